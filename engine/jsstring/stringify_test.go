package jsstring

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestAppendJSONString pins JSON.stringify results (ECMAScript
// QuoteJSONString, checked with Node 20) where Go's encoding/json
// disagrees: '<', '>', '&', U+2028 and U+2029 are not escaped, control
// characters use lower-case hex, and U+007F is copied.
func TestAppendJSONString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", `""`},
		{"plain ascii", `"plain ascii"`},
		{`quote " backslash \ slash /`, `"quote \" backslash \\ slash /"`},
		{"\b\t\n\f\r", `"\b\t\n\f\r"`},
		{"\x00\x01\x0b\x0e\x1f", `"\u0000\u0001\u000b\u000e\u001f"`},
		{"\x7f", "\"\x7f\""},
		{"<a href='x'>&amp;</a>", `"<a href='x'>&amp;</a>"`},
		{"line\u2028para\u2029end", "\"line\u2028para\u2029end\""},
		{"bêta 文書 😀", `"bêta 文書 😀"`},
		{"\ufffd", "\"\ufffd\""},
		// Invalid UTF-8: one U+FFFD per byte, as JavaScript would hold it.
		{"a\xffb\xed\xa0\x80c", "\"a\ufffdb\ufffd\ufffd\ufffdc\""},
	} {
		if got := string(AppendJSONString(nil, c.in)); got != c.want {
			t.Errorf("AppendJSONString(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := string(AppendJSONString([]byte("x="), "y")); got != `x="y"` {
		t.Errorf("AppendJSONString does not append: %q", got)
	}
}

// FuzzAppendJSONString checks that the output is valid UTF-8 JSON that
// decodes to s (invalid bytes read as U+FFFD, one each) and escapes only
// what JSON.stringify escapes.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c", "\x00\x1f\x7f", "<>&\u2028\u2029", "é文😀", "\xff\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendJSONString(nil, s)
		if !utf8.Valid(out) {
			t.Fatalf("output is not UTF-8: %q", out)
		}
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("output %q is not a JSON string: %v", out, err)
		}
		if want := perByteValid(s); back != want {
			t.Fatalf("round trip of %q = %q, want %q", s, back, want)
		}
		body := string(out[1 : len(out)-1])
		for i := 0; i < len(body); i++ {
			c := body[i]
			if c < 0x20 || c == '"' {
				t.Fatalf("unescaped %#x in %q", c, out)
			}
			if c != '\\' {
				continue
			}
			i++
			switch body[i] {
			case '"', '\\', 'b', 't', 'n', 'f', 'r':
			case 'u':
				esc := body[i+1 : i+5]
				v, err := strconv.ParseUint(esc, 16, 16)
				if err != nil || v >= 0x20 || strings.ContainsRune("\b\t\n\f\r", rune(v)) || strings.ToLower(esc) != esc {
					t.Fatalf("escape \\u%s in %q is not JSON.stringify's", esc, out)
				}
				i += 4
			default:
				t.Fatalf("escape \\%c in %q is not JSON.stringify's", body[i], out)
			}
		}
	})
}

// perByteValid replaces each invalid UTF-8 byte of s with U+FFFD.
func perByteValid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += w
	}
	return b.String()
}
