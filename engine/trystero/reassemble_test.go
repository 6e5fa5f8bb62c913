package trystero

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func mustSplit(t testing.TB, name string, nonce uint16, body []byte, kind BodyKind, meta []byte) [][]byte {
	t.Helper()
	f, err := SplitAction(name, nonce, body, kind, meta)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestReassembleRoundTrip(t *testing.T) {
	bin := bytes.Repeat([]byte{0, 1, 2, 0xff}, 20000)
	for _, tc := range []struct {
		name string
		body []byte
		kind BodyKind
		meta []byte
	}{
		{"empty string", []byte{}, BodyString, nil},
		{"json", []byte(`{"wire":"raw","payload":"x"}`), BodyJSON, nil},
		{"exactly one chunk", []byte(strings.Repeat("a", ChunkBytes)), BodyString, nil},
		{"one byte more", []byte(strings.Repeat("b", ChunkBytes+1)), BodyString, nil},
		{"binary with metadata", bin, BodyBinary, []byte(`{"r":"id"}`)},
		{"metadata only", []byte{}, BodyBinary, []byte(`null`)},
	} {
		r := NewReassembler(ReassemblerConfig{})
		frames := mustSplit(t, "rpc2", 7, tc.body, tc.kind, tc.meta)
		for i, f := range frames {
			m, err := r.Add("peer", f)
			if err != nil {
				t.Fatalf("%s: frame %d: %v", tc.name, i, err)
			}
			if (m != nil) != (i == len(frames)-1) {
				t.Fatalf("%s: frame %d of %d completed=%v", tc.name, i, len(frames), m != nil)
			}
			if m == nil {
				continue
			}
			if m.Peer != "peer" || m.Action != "rpc2" || m.Nonce != 7 || !bytes.Equal(m.Body, tc.body) ||
				m.Binary != (tc.kind == BodyBinary) || m.JSON != (tc.kind == BodyJSON) || string(m.Metadata) != string(tc.meta) {
				t.Errorf("%s: message %+v", tc.name, m)
			}
		}
		if n := r.InFlight("peer"); n != 0 {
			t.Errorf("%s: %d in flight after completion", tc.name, n)
		}
	}
}

func TestReassembleInterleaved(t *testing.T) {
	r := NewReassembler(ReassemblerConfig{})
	a := mustSplit(t, "x", 1, []byte(strings.Repeat("A", 2*ChunkBytes)), BodyString, nil)
	b := mustSplit(t, "x", 2, []byte(strings.Repeat("B", 2*ChunkBytes)), BodyString, nil)
	c := mustSplit(t, "x", 1, []byte(strings.Repeat("C", 2*ChunkBytes)), BodyString, nil)
	var got []string
	for _, step := range []struct {
		peer  string
		frame []byte
	}{{"p", a[0]}, {"p", b[0]}, {"q", c[0]}, {"p", a[1]}, {"q", c[1]}, {"p", b[1]}} {
		m, err := r.Add(step.peer, step.frame)
		if err != nil {
			t.Fatal(err)
		}
		if m != nil {
			got = append(got, m.Peer+":"+m.Text()[:1])
		}
	}
	if strings.Join(got, ",") != "p:A,q:C,p:B" {
		t.Errorf("completed %v", got)
	}
}

func TestReassembleText(t *testing.T) {
	r := NewReassembler(ReassemblerConfig{})
	// Text is decoded as TextDecoder does: BOM dropped, bad bytes U+FFFD.
	m, err := r.Add("p", mustSplit(t, "s", 0, []byte("\xef\xbb\xbfa\xe2\x82"), BodyString, nil)[0])
	if err != nil || m.Text() != "a\ufffd" {
		t.Errorf("text %q, %v", m.Text(), err)
	}
	// A JSON body that JSON.parse rejects drops the message.
	if _, err := r.Add("p", mustSplit(t, "s", 1, []byte("{"), BodyJSON, nil)[0]); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad JSON: %v", err)
	}
	// So does an empty JSON body.
	if _, err := r.Add("p", mustSplit(t, "s", 2, nil, BodyJSON, []byte(`{}`))[0]); !errors.Is(err, ErrMalformed) {
		t.Errorf("empty JSON: %v", err)
	}
	// Bad metadata is an error, but the message stays open without it.
	frames := mustSplit(t, "s", 3, []byte(`"v"`), BodyJSON, []byte(`{`))
	if _, err := r.Add("p", frames[0]); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad metadata: %v", err)
	}
	if m, err := r.Add("p", frames[1]); err != nil || m.Metadata != nil || m.Text() != `"v"` {
		t.Errorf("after bad metadata: %+v %v", m, err)
	}
	if r.InFlight("p") != 0 {
		t.Error("messages left in flight")
	}
}

func TestReassembleBounds(t *testing.T) {
	r := NewReassembler(ReassemblerConfig{MaxMessageBytes: 3 * ChunkBytes, MaxInFlight: 2, MaxPeerBytes: 4 * ChunkBytes})
	big := mustSplit(t, "big", 0, make([]byte, 5*ChunkBytes), BodyBinary, nil)
	var tooLarge int
	for i, f := range big {
		m, err := r.Add("p", f)
		if errors.Is(err, ErrTooLarge) {
			tooLarge++
		} else if err != nil {
			t.Fatal(err)
		}
		if m != nil {
			t.Fatalf("oversized message delivered at frame %d", i)
		}
	}
	if tooLarge != 1 || r.InFlight("p") != 0 {
		t.Errorf("oversized: %d errors, %d in flight", tooLarge, r.InFlight("p"))
	}
	// The next message on the same action is delivered whole.
	if m, err := r.Add("p", mustSplit(t, "big", 1, []byte("ok"), BodyString, nil)[0]); err != nil || m.Text() != "ok" {
		t.Fatalf("after overflow: %+v %v", m, err)
	}

	// A third partial message evicts the least recently extended one,
	// whose remaining frames are then discarded rather than delivered cut.
	msgs := make([][][]byte, 3)
	for i := range msgs {
		msgs[i] = mustSplit(t, "m", uint16(i), bytes.Repeat([]byte{byte('a' + i)}, 2*ChunkBytes), BodyString, nil)
	}
	for _, f := range [][]byte{msgs[0][0], msgs[1][0], msgs[2][0]} {
		if _, err := r.Add("p", f); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.InFlight("p"); n != 2 {
		t.Fatalf("%d in flight, want 2", n)
	}
	if m, err := r.Add("p", msgs[0][1]); m != nil || err != nil {
		t.Errorf("evicted message completed: %v %v", m, err)
	}
	for _, i := range []int{1, 2} {
		if m, err := r.Add("p", msgs[i][1]); err != nil || m == nil || m.Body[0] != byte('a'+i) || len(m.Body) != 2*ChunkBytes {
			t.Errorf("message %d: %v", i, err)
		}
	}
	// Peer byte budget: two partial messages of 3 chunks exceed 4 chunks
	// once the fifth chunk arrives.
	p1 := mustSplit(t, "n", 0, make([]byte, 3*ChunkBytes), BodyBinary, nil)
	p2 := mustSplit(t, "n", 1, make([]byte, 3*ChunkBytes), BodyBinary, nil)
	r.Add("q", p1[0])
	r.Add("q", p1[1])
	r.Add("q", p2[0])
	if _, err := r.Add("q", p2[1]); err != nil {
		t.Fatalf("within the peer budget: %v", err)
	}
	if _, err := r.Add("q", p2[2]); !errors.Is(err, ErrTooLarge) {
		t.Errorf("peer budget: %v", err)
	}
	r.DropPeer("q")
	if r.InFlight("q") != 0 {
		t.Error("DropPeer left state")
	}
}

func TestReassembleManyPeersBounded(t *testing.T) {
	r := NewReassembler(ReassemblerConfig{MaxInFlight: 4})
	// A hostile peer opening thousands of messages never holds more than
	// MaxInFlight of them.
	for i := range 5000 {
		f := mustSplit(t, "z", uint16(i), make([]byte, ChunkBytes+1), BodyBinary, nil)[0]
		if _, err := r.Add("evil", f); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.InFlight("evil"); n != 4 {
		t.Errorf("%d in flight", n)
	}
	if n := len(r.peers["evil"].evicted); n > 4 {
		t.Errorf("%d evicted keys remembered", n)
	}
}

func FuzzReassembler(f *testing.F) {
	for _, fr := range mustSplit(f, "rpc2", 1, []byte(strings.Repeat("x", ChunkBytes+5)), BodyJSON, []byte(`{"m":1}`)) {
		f.Add(fr, byte(0))
	}
	f.Add([]byte{}, byte(1))
	f.Fuzz(func(t *testing.T, frame []byte, peer byte) {
		r := NewReassembler(ReassemblerConfig{MaxMessageBytes: 64, MaxInFlight: 2, MaxPeerBytes: 100})
		// Feed the frame, mutated variants of it, and a last frame.
		for i := range 4 {
			g := append([]byte(nil), frame...)
			if len(g) > 34 {
				g[34] = byte(i)
				g[33] = byte(i / 2)
			}
			m, err := r.Add(string(rune('a'+peer%3)), g)
			if m != nil && err != nil {
				t.Fatal("message and error")
			}
			if m != nil && len(m.Body) > 4*64 {
				t.Fatalf("message of %d bytes beyond the bound", len(m.Body))
			}
		}
		for p, ps := range r.peers {
			if len(ps.inFlight) > 2 || ps.bytes > 100 || ps.bytes < 0 {
				t.Fatalf("peer %q: %d in flight, %d bytes", p, len(ps.inFlight), ps.bytes)
			}
		}
	})
}

func TestReassembleMetadataAccounting(t *testing.T) {
	r := NewReassembler(ReassemblerConfig{})
	open := mustSplit(t, "o", 0, []byte("abc"), BodyString, nil)
	open[0][34] = 0 // not last: stays in flight with 3 bytes
	r.Add("p", open[0])
	// Metadata sent twice (the second replaces the first), as text that
	// decodes longer than its bytes: "\xff" is U+FFFD, three bytes.
	meta := mustSplit(t, "m", 0, []byte("x"), BodyString, []byte("\"\xff\xff\""))
	if _, err := r.Add("p", meta[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add("p", meta[0]); err != nil {
		t.Fatal(err)
	}
	if got := r.peers["p"].bytes; got != 3+8 {
		t.Errorf("held %d bytes, want 11", got)
	}
	m, err := r.Add("p", meta[1])
	if err != nil || string(m.Metadata) != "\"\ufffd\ufffd\"" {
		t.Fatalf("message %+v %v", m, err)
	}
	if got := r.peers["p"].bytes; got != 3 {
		t.Errorf("held %d bytes after completion, want 3", got)
	}
}
