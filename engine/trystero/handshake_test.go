package trystero

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestHandshakeHashMatchesTrystero(t *testing.T) {
	// hex(SHA-256("abc:1bhxaay1cs5qlh:self-hosted-livesync:myroom")), from
	// trystero 0.25.3's hashWith in Node.
	want := "fc043f14979f99dd0a621713a3fc8320b6e1875078cba700789b0703cea7a25a"
	if got := HandshakeHash("abc", "1bhxaay1cs5qlh", "self-hosted-livesync", "myroom"); got != want {
		t.Errorf("HandshakeHash = %s", got)
	}
	if got := string(HandshakeResponse("abc", "1bhxaay1cs5qlh", "self-hosted-livesync", "myroom")); got != `{"__trystero_pw":"response","h":"`+want+`"}` {
		t.Errorf("HandshakeResponse = %s", got)
	}
}

func TestHandshakeMessages(t *testing.T) {
	msg, c := HandshakeChallenge(nil)
	if len(c) != ChallengeLen || string(msg) != `{"__trystero_pw":"challenge","c":"`+c+`"}` {
		t.Fatalf("challenge %s", msg)
	}
	got, err := ParseChallenge(msg)
	if err != nil || got != c {
		t.Fatalf("ParseChallenge = %q, %v", got, err)
	}
	resp := HandshakeResponse(c, "pw", "app", "room")
	if err := VerifyHandshake(resp, c, "pw", "app", "room"); err != nil {
		t.Errorf("VerifyHandshake: %v", err)
	}
	for _, bad := range []struct {
		msg []byte
		pw  string
	}{
		{resp, "other"},
		{nil, "pw"},
		{[]byte(`"x"`), "pw"},
		{[]byte(`[1]`), "pw"},
		{[]byte(`{"__trystero_pw":"response"}`), "pw"},
		{[]byte(`{"__trystero_pw":"response","h":null}`), "pw"},
		{[]byte(`{"__trystero_pw":"Response","h":"x"}`), "pw"},
		{bytes.Replace(resp, []byte(`"h"`), []byte(`"H"`), 1), "pw"},
		{msg, "pw"},
	} {
		err := VerifyHandshake(bad.msg, c, bad.pw, "app", "room")
		if !errors.Is(err, ErrHandshake) || !errors.Is(err, ErrIncorrectPassword) || !strings.Contains(err.Error(), "incorrect room password") {
			t.Errorf("VerifyHandshake(%s) error %v", bad.msg, err)
		}
	}
	if _, err := ParseChallenge([]byte(`{"__trystero_pw":"challenge","c":5}`)); !errors.Is(err, ErrHandshake) {
		t.Errorf("numeric challenge: %v", err)
	}
	// Any string is a challenge, even an empty one.
	if c, err := ParseChallenge([]byte(`{"c":"","__trystero_pw":"challenge"}`)); err != nil || c != "" {
		t.Errorf("empty challenge: %q %v", c, err)
	}
}

// deliver turns outgoing messages into the Messages the peer receives.
func deliver(t *testing.T, from string, out []Outgoing) []*Message {
	t.Helper()
	r := NewReassembler(ReassemblerConfig{})
	var got []*Message
	var s Sender
	for _, o := range out {
		frames, err := s.Split(o.Action, o.Body, o.Kind, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range frames {
			m, err := r.Add(from, f)
			if err != nil {
				t.Fatal(err)
			}
			if m != nil {
				got = append(got, m)
			}
		}
	}
	return got
}

func runHandshake(t *testing.T, pwA, pwB string) (a, b *PeerHandshake, err error) {
	a = NewPeerHandshake("A", "b", pwA, "app", "room") // "A" < "b": a leads
	b = NewPeerHandshake("b", "A", pwB, "app", "room")
	if !a.Initiator() || b.Initiator() {
		t.Fatal("initiator")
	}
	toB := a.Start(nil)
	toA := b.Start(nil)
	for range 4 {
		var nextA, nextB []Outgoing
		for _, m := range deliver(t, "A", toB) {
			out, err := b.Receive(m)
			if err != nil {
				return a, b, err
			}
			nextA = append(nextA, out...)
		}
		for _, m := range deliver(t, "b", toA) {
			out, err := a.Receive(m)
			if err != nil {
				return a, b, err
			}
			nextB = append(nextB, out...)
		}
		toA, toB = nextA, nextB
	}
	return a, b, nil
}

func TestPeerHandshake(t *testing.T) {
	a, b, err := runHandshake(t, "pw", "pw")
	if err != nil || !a.Active() || !b.Active() {
		t.Fatalf("same password: %v active %v %v", err, a.Active(), b.Active())
	}
	a, b, err = runHandshake(t, "", "")
	if err != nil || !a.Active() || !b.Active() {
		t.Fatalf("no password: %v", err)
	}
	if _, _, err := runHandshake(t, "pw", "other"); !errors.Is(err, ErrIncorrectPassword) {
		t.Fatalf("different passwords: %v", err)
	}
	// A readiness message alone does not activate a peer whose own step
	// is pending, and a string on @_hsdata fails the responder.
	b = NewPeerHandshake("b", "A", "pw", "app", "room")
	b.Start(nil)
	b.Receive(&Message{Action: ActionHandshakeReady})
	if b.Active() {
		t.Error("active before its own step")
	}
	if _, err := b.Receive(&Message{Action: ActionHandshakeData, Body: []byte(`{"__trystero_pw":"challenge","c":"x"}`)}); !errors.Is(err, ErrHandshake) {
		t.Errorf("non-JSON handshake data: %v", err)
	}
}

func FuzzOpenSDP(f *testing.F) {
	key := SDPKey("1bhxaay1cs5qlh", "self-hosted-livesync", "myroom")
	f.Add(sealedByTrystero)
	f.Add("1,2$AAAA")
	f.Add("0x1,1e3,-1$====")
	f.Fuzz(func(t *testing.T, s string) {
		plain, err := OpenSDP(key, s)
		if err != nil {
			if !errors.Is(err, ErrIncorrectPassword) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("OpenSDP error %v", err)
			}
			return
		}
		sealed, err := SealSDP(key, plain, nil)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := OpenSDP(key, sealed); err != nil || again != plain {
			t.Fatalf("reseal: %q %v", again, err)
		}
	})
}

func FuzzDecodeSignal(f *testing.F) {
	f.Add([]byte(`{"peerId":"p","offerId":"o","offer":"X"}`))
	f.Add([]byte(`{"peerId":"p","answer":"A","passive":true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSignal(b)
		if err != nil {
			return
		}
		again, err := DecodeSignal(s.Encode())
		if err != nil || again.Type() != s.Type() || again.PeerID != s.PeerID {
			t.Fatalf("re-decode of %s: %+v %v", s.Encode(), again, err)
		}
	})
}
