package trystero

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
)

// sealedByTrystero was sealed by trystero 0.25.3's encrypt (crypto.mjs)
// with genKey("1bhxaay1cs5qlh", "self-hosted-livesync", "myroom").
const sealedByTrystero = "249,158,64,200,253,112,145,159,71,161,121,120,212,163,188,64$TBGVPlNO2Z7Qb/Q/JViiNF2zKdryZ3BZDV2gIxThYQgD+gs4HxfnUbHL+XWEfTQ="

const plainSDP = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\n"

func TestOpenSDPFromTrystero(t *testing.T) {
	key := SDPKey("1bhxaay1cs5qlh", "self-hosted-livesync", "myroom")
	got, err := OpenSDP(key, sealedByTrystero)
	if err != nil || got != plainSDP {
		t.Fatalf("OpenSDP = %q, %v", got, err)
	}
	// JavaScript's Number() and atob are lenient; these variants open too.
	variants := []string{
		strings.Replace(sealedByTrystero, "249,", " 249 ,", 1),
		strings.Replace(sealedByTrystero, "249,", "0xf9,", 1),
		strings.Replace(sealedByTrystero, "249,", "505,", 1), // 505 mod 256
		strings.Replace(sealedByTrystero, "249,", "249.9,", 1),
		strings.Replace(sealedByTrystero, "$TBG", "$T B\nG", 1),
		strings.TrimSuffix(sealedByTrystero, "="),
		sealedByTrystero + "$ignored",
	}
	for _, v := range variants {
		if got, err := OpenSDP(key, v); err != nil || got != plainSDP {
			t.Errorf("OpenSDP(%q) = %q, %v", v, got, err)
		}
	}
}

func TestOpenSDPWrongPassword(t *testing.T) {
	key := SDPKey("wrong", "self-hosted-livesync", "myroom")
	for _, s := range []string{sealedByTrystero, "", "$", "1,2,3$AAAA", "x$!!!", "1$A", strings.Repeat("9,", 100) + "$" + strings.Repeat("A", 64)} {
		_, err := OpenSDP(key, s)
		if !errors.Is(err, ErrIncorrectPassword) || !errors.Is(err, engine.ErrDecrypt) {
			t.Errorf("OpenSDP(%q) error %v", s, err)
		}
		if err != nil && !strings.Contains(err.Error(), "incorrect room password") {
			t.Errorf("message %q lacks the plug-in's wording", err)
		}
	}
	if _, err := OpenSDP(key, strings.Repeat("1", MaxSealedBytes+1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized: %v", err)
	}
}

func TestSealSDPRoundTrip(t *testing.T) {
	key := SDPKey("1bhxaay1cs5qlh", "self-hosted-livesync", "myroom")
	iv := bytes.Repeat([]byte{0, 255, 7, 100}, 4)
	s, err := SealSDP(key, plainSDP, bytes.NewReader(iv))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s, "0,255,7,100,0,255,7,100,0,255,7,100,0,255,7,100$") {
		t.Errorf("sealed %q", s)
	}
	// The ciphertext is the plaintext plus a 16-byte tag, base64 with padding.
	if _, b64, _ := strings.Cut(s, "$"); len(b64) != (len(plainSDP)+16+2)/3*4 {
		t.Errorf("base64 part %q", b64)
	}
	if got, err := OpenSDP(key, s); err != nil || got != plainSDP {
		t.Errorf("round trip = %q, %v", got, err)
	}
	if _, err := SealSDP(key, "x", bytes.NewReader(nil)); err == nil {
		t.Error("SealSDP without randomness succeeded")
	}
}

func TestJSToUint8(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		in   float64
		want byte
	}{{nan, 0}, {math.Inf(1), 0}, {256, 0}, {-1, 255}, {-1.9, 255}, {1.9, 1}, {1e20, byte(math.Mod(1e20, 256))}} {
		if got := jsToUint8(tc.in); got != tc.want {
			t.Errorf("jsToUint8(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestDecodeText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"abc", "abc"},
		{"\xef\xbb\xbfabc", "abc"},               // BOM dropped
		{"\xef\xbb\xbf\xef\xbb\xbfa", "\ufeffa"}, // only one
		{"\xe2\x82A", "\ufffdA"},                 // truncated sequence: one U+FFFD
		{"\xed\xa0\x80", "\ufffd\ufffd\ufffd"},   // surrogate: three
		{"\xf0\x9f\x98", "\ufffd"},               // truncated at the end
		{"\xc0\xaf", "\ufffd\ufffd"},             // overlong
		{"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"},
		{"a\xffb\xe2\x82\xacc", "a\ufffdb€c"},
	} {
		if got := decodeText([]byte(tc.in)); got != tc.want {
			t.Errorf("decodeText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
