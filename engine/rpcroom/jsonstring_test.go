package rpcroom

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// TestQuoteUTF16 pins JSON.stringify's output in Node 20 for the same
// code units.
func TestQuoteUTF16(t *testing.T) {
	in := []uint16{'"', '\\', '\b', '\f', '\n', '\r', '\t', 0, 0x1F, 0x7F, '<', '>', '&', 0x2028, 0x2029, 0xE9,
		0xD83D, 0xDE00, 0xD83D, 0xDE00, 'x', 0xDC00, 0xD800}
	want := `"\"\\\b\f\n\r\t\u0000\u001f` + "\x7f<>&\u2028\u2029é😀😀x" + `\udc00\ud800"`
	if got := string(QuoteUTF16(in)); got != want {
		t.Errorf("QuoteUTF16 = %q\nwant        %q", got, want)
	}
}

func TestUnquoteUTF16(t *testing.T) {
	tests := []struct {
		name string
		tok  string
		want []uint16
	}{
		{"empty", `""`, []uint16{}},
		{"escapes", `"\"\\\/\b\f\n\r\t"`, []uint16{'"', '\\', '/', '\b', '\f', '\n', '\r', '\t'}},
		{"pair as escapes", `"\ud83d\ude00"`, []uint16{0xD83D, 0xDE00}},
		{"pair upper-case hex", `"\uD83D\uDE00"`, []uint16{0xD83D, 0xDE00}},
		{"raw emoji", `"😀"`, []uint16{0xD83D, 0xDE00}},
		{"lone high at end", `"a\ud83d"`, []uint16{'a', 0xD83D}},
		{"lone low at start", `"\ude00b"`, []uint16{0xDE00, 'b'}},
		{"high then non-low escape", `"\ud83d\u0041"`, []uint16{0xD83D, 'A'}},
		{"two highs", `"\ud83d\ud83d"`, []uint16{0xD83D, 0xD83D}},
		{"reversed pair", `"\ude00\ud83d"`, []uint16{0xDE00, 0xD83D}},
		{"high then raw char", `"\ud83dé"`, []uint16{0xD83D, 0xE9}},
		{"invalid utf-8 byte", "\"a\xffb\"", []uint16{'a', 0xFFFD, 'b'}},
		{"del raw", "\"\x7f\"", []uint16{0x7F}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := UnquoteUTF16([]byte(tt.tok))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %x, want %x", got, tt.want)
			}
		})
	}
	for _, bad := range []string{``, `"`, `abc`, `"a`, `"\"`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\nb\"", "\"\x00\"", `"a"b"`} {
		if _, err := UnquoteUTF16([]byte(bad)); err == nil {
			t.Errorf("UnquoteUTF16(%q) accepted", bad)
		}
	}
}

// TestEnvelopeJSON: halves of a pair that meet after joining become one
// character; a surrogate still alone inside a string becomes its escape;
// one outside a string, or after a backslash, is malformed, as JSON.parse
// would reject it.
func TestEnvelopeJSON(t *testing.T) {
	join := func(toks ...string) []byte {
		var w []byte
		for _, tok := range toks {
			p, err := unquoteWTF8([]byte(tok))
			if err != nil {
				t.Fatal(err)
			}
			w = append(w, p...)
		}
		return w
	}
	tests := []struct {
		name  string
		parts []string
		want  string
	}{
		{"plain", []string{`"{\"a\":1}"`}, `{"a":1}`},
		{"pair split across parts", []string{`"[\"x\ud83d"`, `"\ude00y\"]"`}, `["x😀y"]`},
		{"lone kept as escape", []string{`"[\"\ud83d\"]"`}, `["\ud83d"]`},
		{"lone low kept", []string{`"[\"a\", \""`, `"\udc00\"]"`}, `["a", "\udc00"]`},
		{"escaped quote before lone", []string{`"[\"\\\"\ud800\"]"`}, `["\"\ud800"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := envelopeJSON(join(tt.parts...))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if !utf8.Valid(got) || !json.Valid(got) {
				t.Errorf("result %q is not valid UTF-8 JSON", got)
			}
		})
	}
	for _, bad := range []string{`"\ud83d"`, `"[\"\\\ud83d\"]"`} {
		if _, err := envelopeJSON(join(bad)); !errors.Is(err, errLoneSurrogate) {
			t.Errorf("envelopeJSON(%s) err = %v, want errLoneSurrogate", bad, err)
		}
	}
}

// FuzzUnquoteUTF16 checks the surrogate-preserving decoder against
// encoding/json: both accept the same string tokens; without lone
// surrogates they decode alike; and quoting the units again round-trips.
func FuzzUnquoteUTF16(f *testing.F) {
	for _, s := range []string{`""`, `"a\ud83d"`, `"\ud83d\ude00"`, `"\ude00\ud83d"`, "\"\xff\"", `"\u00e9\n"`, `"\x"`, `"😀"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, tok []byte) {
		units, err := UnquoteUTF16(tok)
		var s string
		jerr := json.Unmarshal(tok, &s)
		isString := len(tok) > 1 && tok[0] == '"' && tok[len(tok)-1] == '"'
		if isString && (err == nil) != (jerr == nil) {
			t.Fatalf("UnquoteUTF16 err %v, encoding/json err %v for %q", err, jerr, tok)
		}
		if err != nil {
			return
		}
		lone := false
		for i, u := range units {
			if isHigh(u) && (i+1 >= len(units) || !isLow(units[i+1])) || isLow(u) && (i == 0 || !isHigh(units[i-1])) {
				lone = true
			}
		}
		if !lone && string(utf16.Decode(units)) != s {
			t.Fatalf("decoded %q, encoding/json %q", string(utf16.Decode(units)), s)
		}
		again, err := UnquoteUTF16(QuoteUTF16(units))
		if err != nil || !slices.Equal(again, units) {
			t.Fatalf("round trip of %x gave %x, %v", units, again, err)
		}
	})
}
