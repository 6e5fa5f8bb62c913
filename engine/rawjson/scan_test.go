package rawjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

var scanSeeds = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1.5e-3`, `1E+2`, `true`, `false`, `null`, `"a\"b\\c\/\b\f\n\r\t\u00e9\ud83d\ude00"`,
	`{"a":[1,{"b":null}],"c":"<&>"}`, "{ \"a\" : [ 1 , 2 ] }", "\"\u2028\u2029\"", `"é日本😀"`,
	`01`, `1.`, `.5`, `-`, `1e`, `tru`, `nul`, `"\x"`, `"\u12"`, "\"\x01\"", `[1,]`, `{"a"}`, `{"a":1,}`,
	"\"\xff\"", `{"a":1}x`, strings.Repeat("[", 1001) + strings.Repeat("]", 1001), `"\'"`, `"abc`,
}

// compactEscaped is what json.Marshal writes for a json.RawMessage v.
func compactEscaped(v []byte) ([]byte, bool) {
	out, err := json.Marshal(json.RawMessage(v))
	return out, err == nil
}

func checkScan(t *testing.T, b []byte) {
	end, valid, canon := Scan(b, 0)
	if !valid {
		// Undecided only for what encoding/json rejects, invalid UTF-8 or
		// deep nesting.
		if json.Valid(b) && len(b) > 0 && b[0] > ' ' && b[len(b)-1] > ' ' && utf8.Valid(b) && len(b) <= MaxDepth {
			t.Fatalf("Scan(%q) undecided on valid JSON", b)
		}
		return
	}
	if end != len(b) {
		// A value followed by more: the value alone must check the same.
		checkScan(t, b[:end])
		return
	}
	want, ok := compactEscaped(b)
	if !ok {
		t.Fatalf("Scan(%q) valid, encoding/json rejects it", b)
	}
	if canon != bytes.Equal(want, b) {
		t.Fatalf("Scan(%q) canonical %v; Marshal writes %q", b, canon, want)
	}
	if got := AppendCanonical([]byte("x"), b); !bytes.Equal(got[1:], want) || got[0] != 'x' {
		t.Fatalf("AppendCanonical(%q) = %q, want %q", b, got[1:], want)
	}
}

func TestScan(t *testing.T) {
	for _, s := range scanSeeds {
		checkScan(t, []byte(s))
	}
	if _, valid, _ := Scan([]byte(strings.Repeat("[", MaxDepth)+strings.Repeat("]", MaxDepth)), 0); !valid {
		t.Error("MaxDepth deep array not followed")
	}
}

func FuzzScan(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkScan(t, b) })
}

func checkUnquote(t *testing.T, b []byte) {
	var want string
	werr := json.Unmarshal(b, &want)
	got, ok := Unquote(b)
	if ok && (werr != nil || got != want) {
		t.Fatalf("Unquote(%q) = %q, encoding/json: %q %v", b, got, want, werr)
	}
	if !ok && werr == nil && len(b) > 0 && b[0] == '"' && b[len(b)-1] == '"' {
		t.Fatalf("Unquote(%q) failed, encoding/json reads %q", b, want)
	}
	if ok {
		if s, sok := String(b); !sok || s != got && bytes.IndexByte(b, '\\') >= 0 {
			t.Fatalf("String(%q) = %q %v, want %q", b, s, sok, got)
		}
	}
}

func checkAppendString(t *testing.T, s string) {
	want, _ := json.Marshal(s)
	if got := AppendString([]byte("x"), s); !bytes.Equal(got[1:], want) {
		t.Fatalf("AppendString(%q) = %q, want %q", s, got[1:], want)
	}
}

var stringSeeds = []string{
	``, `"`, `""`, `"a"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u2028\ud83d\ude00"`, `"\ud83d"`, `"\ud83dx"`,
	`"\ud83d\u0041"`, `"\ude00\ud83d"`, `"\uD83D\uDE00"`, "\"\xff\xfe\"", "\"\xe2\x80\"", `"\'"`, `"\x"`, `"\u12"`,
	"\"\x01\"", `"a"b"`, `"abc\"`, `null`, ` "a"`, `"<&>"`, "\"\u2028\"", "\"\x7f\"", `"日本語"`,
}

func TestUnquoteAndAppendString(t *testing.T) {
	for _, s := range stringSeeds {
		checkUnquote(t, []byte(s))
		checkAppendString(t, s)
	}
}

func FuzzUnquote(f *testing.F) {
	for _, s := range stringSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkUnquote(t, b)
		checkAppendString(t, string(b))
	})
}

// TestLongStrings puts each kind of byte the word-at-a-time loops look
// for at every position of strings longer than a word.
func TestLongStrings(t *testing.T) {
	for _, c := range []string{`"`, `\\`, `\n`, "<", ">", "&", "\x01", "\x1f", "\x7f", "é", "\u2028", "\xff", " ", "~"} {
		for p := 0; p <= 20; p++ {
			s := strings.Repeat("a", p) + c + strings.Repeat("b", 20-p)
			checkAppendString(t, s)
			raw := []byte(`"` + s + `"`)
			checkScan(t, raw)
			checkUnquote(t, raw)
		}
	}
}
