package trystero

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// Frames captured from trystero 0.25.3's own sender (@trystero-p2p/core
// dist action-wire.mjs makeInternalAction("rpc2").send) with a fake peer,
// for sends numbered from nonce 0.
func TestSplitActionMatchesTrystero(t *testing.T) {
	bin := make([]byte, 40000)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	small := []struct {
		name  string
		body  string
		kind  BodyKind
		meta  string
		nonce uint16
		want  []string
	}{
		{"json", `{"a":1,"s":"é"}`, BodyJSON, "", 0, []string{"7270633200000000000000000000000000000000000000000000000000000000000009ff7b2261223a312c2273223a22c3a9227d"}},
		{"str", "hello", BodyString, "", 1, []string{"7270633200000000000000000000000000000000000000000000000000000000000101ff68656c6c6f"}},
		{"empty", "", BodyString, "", 2, []string{"7270633200000000000000000000000000000000000000000000000000000000000201ff"}},
		{"meta", "[1,2]", BodyJSON, `{"r":"x"}`, 3, []string{
			"727063320000000000000000000000000000000000000000000000000000000000030a807b2272223a2278227d",
			"7270633200000000000000000000000000000000000000000000000000000000000309ff5b312c325d"}},
	}
	for _, tc := range small {
		var meta []byte
		if tc.meta != "" {
			meta = []byte(tc.meta)
		}
		frames, err := SplitAction("rpc2", tc.nonce, []byte(tc.body), tc.kind, meta)
		if err != nil {
			t.Fatal(err)
		}
		if len(frames) != len(tc.want) {
			t.Fatalf("%s: %d frames, want %d", tc.name, len(frames), len(tc.want))
		}
		for i, f := range frames {
			if got := hex.EncodeToString(f); got != tc.want[i] {
				t.Errorf("%s frame %d:\n got %s\nwant %s", tc.name, i, got, tc.want[i])
			}
		}
	}
	large := []struct {
		name  string
		body  []byte
		kind  BodyKind
		meta  []byte
		nonce uint16
		lens  []int
		heads []string
		sha   string
	}{
		{"exact", []byte(strings.Repeat("x", 16348)), BodyString, nil, 4, []int{16384}, []string{"000401ff"},
			"7993977514dd1464052471393d213a32e0ec38d66038ff42d83b1f0af63eb453"},
		{"multi", []byte(strings.Repeat("y", 16349*2)), BodyString, nil, 5, []int{16384, 16384, 38},
			[]string{"00050055", "000500aa", "000501ff"}, "22085f784a0058d243d1bfaa85afd1b10427db96c224b523add1416978c4df59"},
		{"binmeta", bin, BodyBinary, []byte(`{"m":1}`), 6, []int{43, 16384, 16384, 7340},
			[]string{"00060e40", "00060c80", "00060cbf", "00060dff"}, "c6772f221c684e8b36633ef3b04ffb0cc3cd321df4ba18c15c5ddf0c6ad0e35a"},
	}
	for _, tc := range large {
		frames, err := SplitAction("rpc2", tc.nonce, tc.body, tc.kind, tc.meta)
		if err != nil {
			t.Fatal(err)
		}
		if len(frames) != len(tc.lens) {
			t.Fatalf("%s: %d frames, want %d", tc.name, len(frames), len(tc.lens))
		}
		for i, f := range frames {
			if len(f) != tc.lens[i] || hex.EncodeToString(f[32:36]) != tc.heads[i] {
				t.Errorf("%s frame %d: len %d head %x, want %d %s", tc.name, i, len(f), f[32:36], tc.lens[i], tc.heads[i])
			}
		}
		sum := sha256.Sum256(bytes.Join(frames, nil))
		if got := hex.EncodeToString(sum[:]); got != tc.sha {
			t.Errorf("%s: sha256 of frames %s, want %s", tc.name, got, tc.sha)
		}
	}
}

func TestHandshakeReadyFrame(t *testing.T) {
	// @_hsready carries an empty string (trystero room.mjs sendHandshakeReady("")).
	frames, err := SplitAction(ActionHandshakeReady, 0, []byte{}, BodyString, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "405f687372656164790000000000000000000000000000000000000000000000000001ff"
	if len(frames) != 1 || hex.EncodeToString(frames[0]) != want {
		t.Errorf("hsready frame %x", frames)
	}
}

func TestSenderNonces(t *testing.T) {
	var s Sender
	for i := range 3 {
		f, err := s.Split("ad", []byte("{}"), BodyJSON, nil)
		if err != nil {
			t.Fatal(err)
		}
		if h, _ := ParseAction(f[0]); h.Nonce != uint16(i) {
			t.Errorf("send %d has nonce %d", i, h.Nonce)
		}
	}
	if f, _ := s.Split("rpc2", nil, BodyString, nil); f[0][33] != 0 {
		t.Error("nonces are per action")
	}
	s.nonces["ad"] = 65535
	s.Split("ad", nil, BodyString, nil)
	if s.nonces["ad"] != 0 {
		t.Error("nonce does not wrap")
	}
}

func TestActionNameLimits(t *testing.T) {
	for _, name := range []string{"", strings.Repeat("a", 33), strings.Repeat("é", 17)} {
		if _, err := SplitAction(name, 0, nil, BodyString, nil); !errors.Is(err, ErrActionName) {
			t.Errorf("SplitAction(%q) error %v", name, err)
		}
	}
	f, err := SplitAction(strings.Repeat("é", 16), 0, nil, BodyString, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := ParseAction(f[0]); h.Name != strings.Repeat("é", 16) {
		t.Errorf("32-byte name read back as %q", h.Name)
	}
}

func TestParseActionShortAndOddFrames(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want ActionHeader
		body string
	}{
		// A short frame reads missing header bytes as zero.
		{nil, ActionHeader{}, ""},
		{[]byte("ad"), ActionHeader{Name: "ad"}, ""},
		// NULs anywhere in the name are removed; a BOM is dropped.
		{append([]byte("a\x00d\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"), 1, 2, 15, 7, 'z'),
			ActionHeader{Name: "ad", Nonce: 258, Last: true, Metadata: true, Binary: true, JSON: true, Progress: 7}, "z"},
		{append(append([]byte("\xef\xbb\xbfx\xe2\x82"), make([]byte, 26)...), 0, 0, 1, 0), ActionHeader{Name: "x\ufffd", Last: true}, ""},
	} {
		h, body := ParseAction(tc.in)
		if h != tc.want || string(body) != tc.body {
			t.Errorf("ParseAction(%x) = %+v %q, want %+v %q", tc.in, h, body, tc.want, tc.body)
		}
	}
}

func TestProgressRounding(t *testing.T) {
	// Math.round: 255*1/2 = 127.5 rounds up.
	if p := progress(0, 2); p != 128 {
		t.Errorf("progress(0,2) = %d", p)
	}
	if p := progress(2, 3); p != 255 {
		t.Errorf("progress(2,3) = %d", p)
	}
}
