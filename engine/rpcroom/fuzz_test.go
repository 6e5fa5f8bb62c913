package rpcroom

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"unicode/utf16"
)

// FuzzParseEnvelope: any input is an envelope or an error wrapping
// ErrMalformed; an accepted request has a method and args, a response a
// boolean ok and, when not ok, an error.
func FuzzParseEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"kind":"handshake","versionMajor":1,"versionMinor":0}`,
		`{"kind":"request","requestId":"r","method":"db.info","args":[]}`,
		`{"kind":"response","requestId":"r","ok":true,"data":{"a":"\ud83d"}}`,
		`{"kind":"response","requestId":"r","ok":false,"error":{"code":"REMOTE_ERROR","message":"missing"}}`,
		`{"kind":"cancel","requestId":"r"}`, `{"kind":"request","requestId":7}`, `[1]`, `null`,
		`{"kind":"response","requestId":"r","ok":false}`, `{"kind":"handshake","versionMajor":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseEnvelope(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		switch e.Kind {
		case KindRequest:
			if e.Args == nil {
				t.Fatal("request without args accepted")
			}
		case KindResponse:
			if !e.OK && e.Error == nil {
				t.Fatal("failed response without error accepted")
			}
		case KindHandshake, KindCancel:
		default:
			t.Fatalf("kind %q accepted", e.Kind)
		}
	})
}

// FuzzSplitUTF16: the parts join to the payload, each is at most
// max(16, maxBytes/2) units and, unless one unit long, at most maxBytes
// bytes of UTF-8 on its own.
func FuzzSplitUTF16(f *testing.F) {
	f.Add([]byte("hello"), uint16(800))
	f.Add([]byte("😀éx"), uint16(20))
	f.Fuzz(func(t *testing.T, b []byte, max16 uint16) {
		maxBytes := 1 + int(max16)
		s := string(b)
		units := utf16.Encode([]rune(s))
		if len(s)%3 == 1 && len(units) > 0 { // a lone high surrogate, as JavaScript strings may have
			units = append(units, 0xd83d)
		}
		parts := SplitUTF16(units, maxBytes)
		if len(units) > 0 && len(parts) == 0 {
			t.Fatal("no parts")
		}
		if got := slices.Concat(parts...); !slices.Equal(got, units) && len(units) > 0 {
			t.Fatal("parts do not join to the payload")
		}
		if len(parts) == 1 {
			return
		}
		for i, p := range parts {
			if len(p) > max(16, maxBytes/2) {
				t.Fatalf("part %d has %d units", i, len(p))
			}
			if len(p) > 1 && EncodedLen(p) > maxBytes {
				t.Fatalf("part %d is %d bytes > %d", i, EncodedLen(p), maxBytes)
			}
		}
	})
}

// FuzzEnvelopeJSON: the WTF-8 reassembly of any payload is valid JSON or
// an error.
func FuzzEnvelopeJSON(f *testing.F) {
	f.Add([]byte(`{"a":"\xed\xa0\xbd\xed\xb8\x80"}`))
	f.Add([]byte(`{"a":"\xed\xa0\xbd"}`))
	f.Add([]byte("\"\xff\""))
	f.Fuzz(func(t *testing.T, w []byte) {
		out, err := envelopeJSON(w)
		if err == nil && json.Valid(w) && !json.Valid(out) {
			t.Fatalf("valid input %q became invalid %q", w, out)
		}
	})
}
