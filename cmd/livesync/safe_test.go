package main

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"
	"unicode/utf8"
)

// TestSafe (issue 13 item 7): safe leaves printable text of every script
// as it is and escapes, %q style, what a terminal would act on.
func TestSafe(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"notes/today.md", "notes/today.md"},
		{"Ünïcode Ñame.md", "Ünïcode Ñame.md"},
		{"資料/概要.md", "資料/概要.md"},
		{"emoji 👨‍👩‍👧 and ZWNJ می‌خواهم", "emoji 👨‍👩‍👧 and ZWNJ می‌خواهم"},
		{`back\slash "quoted"`, `back\slash "quoted"`},
		{"title\x1b]0;pwned\a.md", `title\x1b]0;pwned\a.md`},
		{"nul\x00byte", `nul\x00byte`},
		{"csi \x1b[2J\x1b[31mred", `csi \x1b[2J\x1b[31mred`},
		{"tab\tnew\nline\rcr", `tab\tnew\nline\rcr`},
		{"del\x7f", `del\x7f`},
		{"c1 \u0085 \u009b", `c1 \u0085 \u009b`},
		{"bidi \u202eevil\u202c \u2066x\u2069", `bidi \u202eevil\u202c \u2066x\u2069`},
		{"sep\u2028line", `sep\u2028line`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`},
		{"", ""},
	} {
		if got := safe(tc.in); got != tc.want {
			t.Errorf("safe(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzSafe: the output of safe never holds a byte a terminal acts on and
// is valid UTF-8; printable input comes back unchanged.
func FuzzSafe(f *testing.F) {
	for _, s := range []string{"a", "\x1b]0;x\a", "\x00", "\u202e", "\xff", "Ñ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := safe(s)
		if !utf8.ValidString(out) {
			t.Fatalf("safe(%q) = %q: not UTF-8", s, out)
		}
		for _, r := range out {
			if unsafeRune(r, utf8.RuneLen(r)) {
				t.Fatalf("safe(%q) = %q holds %U", s, out, r)
			}
		}
		if !strings.ContainsFunc(s, func(r rune) bool { return unsafeRune(r, utf8.RuneLen(r)) }) && utf8.ValidString(s) && out != s {
			t.Fatalf("safe(%q) = %q changed printable text", s, out)
		}
	})
}

// TestSafeAligns: escaped cells still line up in a tabwriter table (a
// raw tab in a path would have opened a column).
func TestSafeAligns(t *testing.T) {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, p := range []string{"a\tb", "plain", "x\x1b[2Jy"} {
		tw.Write([]byte(safe(p) + "\t10\n"))
	}
	tw.Flush()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	col := strings.Index(lines[0], "10")
	for _, l := range lines {
		if strings.Index(l, "10") != col || strings.Count(l, "10") != 1 {
			t.Errorf("misaligned table:\n%s", b.String())
		}
	}
}
