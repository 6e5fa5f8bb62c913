package discovery

import (
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	roomsOnce            sync.Once
	roomA, roomA2, roomB *Room // roomA2: same group and passphrase as roomA
	roomWrongPass        *Room
)

func rooms(t testing.TB) {
	t.Helper()
	roomsOnce.Do(func() {
		var err error
		must := func(r *Room, e error) *Room {
			if e != nil && err == nil {
				err = e
			}
			return r
		}
		roomA = must(NewRoom("group-1", "correct horse"))
		roomA2 = must(NewRoom("group-1", "correct horse"))
		roomB = must(NewRoom("group-2", "correct horse"))
		roomWrongPass = must(NewRoom("group-1", "wrong horse"))
		if err != nil {
			panic(err)
		}
	})
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func sample() Announcement {
	return Announcement{
		PeerID:     "12D3KooWExamplePeer",
		Addrs:      []string{"/ip4/127.0.0.1/tcp/4001", "/ip4/127.0.0.1/udp/4001/quic-v1"},
		DeviceName: "laptop",
		Expires:    t0.Add(5 * time.Minute),
	}
}

func TestRoomTag(t *testing.T) {
	rooms(t)
	if roomA.Tag() != roomA2.Tag() {
		t.Fatal("same group and passphrase must give the same room tag")
	}
	if roomA.Tag() == roomB.Tag() || roomA.Tag() == roomWrongPass.Tag() {
		t.Fatal("different group or passphrase must give a different room tag")
	}
	if len(roomA.Tag()) != 64 {
		t.Fatalf("tag length %d, want 64 hex chars", len(roomA.Tag()))
	}
	for _, secret := range []string{"group-1", "correct horse"} {
		if strings.Contains(roomA.Tag(), secret) || strings.Contains(roomA.String(), secret) {
			t.Fatal("room tag or String reveals a secret")
		}
	}
	if _, err := NewRoom("", "x"); err == nil {
		t.Fatal("empty group id accepted")
	}
	if _, err := NewRoom("g", ""); err == nil {
		t.Fatal("empty passphrase accepted")
	}
}

func TestSealOpenRoundTrip(t *testing.T) {
	rooms(t)
	a := sample()
	sealed, err := roomA.Seal(a, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{a.PeerID, "laptop", "127.0.0.1", "group-1"} {
		if strings.Contains(sealed, secret) {
			t.Fatalf("sealed content shows %q", secret)
		}
	}
	got, err := roomA2.Open(sealed, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got.PeerID != a.PeerID || got.DeviceName != a.DeviceName || !got.Expires.Equal(a.Expires) ||
		strings.Join(got.Addrs, ",") != strings.Join(a.Addrs, ",") {
		t.Fatalf("round trip: got %+v, want %+v", got, a)
	}
	again, _ := roomA.Seal(a, t0)
	if again == sealed {
		t.Fatal("two seals of the same announcement are identical (nonce reuse)")
	}
}

func TestOpenRejects(t *testing.T) {
	rooms(t)
	sealed, err := roomA.Seal(sample(), t0)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(sealed)
	flip := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 1
		return base64.StdEncoding.EncodeToString(b)
	}
	cases := []struct {
		name    string
		room    *Room
		content string
		now     time.Time
		want    error
	}{
		{"wrong passphrase", roomWrongPass, sealed, t0, ErrUndecryptable},
		{"other group", roomB, sealed, t0, ErrUndecryptable},
		{"tampered ciphertext", roomA, flip(len(raw) - 1), t0, ErrUndecryptable},
		{"tampered nonce", roomA, flip(1), t0, ErrUndecryptable},
		{"unknown version", roomA, flip(0), t0, ErrMalformed},
		{"not base64", roomA, "!!!", t0, ErrMalformed},
		{"too short", roomA, base64.StdEncoding.EncodeToString(raw[:10]), t0, ErrMalformed},
		{"too long", roomA, strings.Repeat("A", MaxContentLen+4), t0, ErrMalformed},
		{"expired", roomA, sealed, t0.Add(5 * time.Minute), ErrExpired},
		{"expiry too far ahead", roomA, sealed, t0.Add(-2 * time.Hour), ErrInvalid},
	}
	for _, c := range cases {
		_, err := c.room.Open(c.content, c.now)
		var typed *Error
		if !errors.Is(err, c.want) || !errors.As(err, &typed) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

func TestSealRejectsInvalid(t *testing.T) {
	rooms(t)
	bad := []Announcement{
		{Addrs: []string{"/ip4/1.2.3.4/tcp/1"}, Expires: t0.Add(time.Minute)},
		{PeerID: "p", Expires: t0},
		{PeerID: "p", Expires: t0.Add(MaxTTL + time.Second)},
		{PeerID: "p", Addrs: []string{""}, Expires: t0.Add(time.Minute)},
		{PeerID: "p", Addrs: make([]string, MaxAddrs+1), Expires: t0.Add(time.Minute)},
		{PeerID: "p", DeviceName: strings.Repeat("d", 200), Expires: t0.Add(time.Minute)},
	}
	for i, a := range bad {
		if _, err := roomA.Seal(a, t0); err == nil {
			t.Errorf("case %d: invalid announcement sealed", i)
		}
	}
}

func FuzzOpen(f *testing.F) {
	rooms(f)
	sealed, err := roomA.Seal(sample(), t0)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sealed)
	f.Add("")
	f.Add("AQ==")
	f.Add(base64.StdEncoding.EncodeToString(make([]byte, 40)))
	f.Add(sealed[:len(sealed)/2])
	f.Fuzz(func(t *testing.T, content string) {
		a, err := roomA.Open(content, t0)
		if err != nil {
			var typed *Error
			if !errors.As(err, &typed) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		if a.PeerID == "" || !a.Expires.After(t0) {
			t.Fatalf("accepted an invalid announcement: %+v", a)
		}
	})
}
