package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// TestSafe: safe leaves printable text of every script
// as it is and escapes, %q style, what a terminal would act on.
func TestSafe(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"notes/today.md", "notes/today.md"},
		{"Ünïcode Ñame.md", "Ünïcode Ñame.md"},
		{"資料/概要.md", "資料/概要.md"},
		{"emoji 👨‍👩‍👧 and ZWNJ می‌خواهم", "emoji 👨‍👩‍👧 and ZWNJ می‌خواهم"},
		{`back\slash "quoted"`, `back\\slash "quoted"`},
		{`lit\x1b.md`, `lit\\x1b.md`},
		{"zero\u200bwidth \ufeffbom soft\u00adhyphen", `zero\u200bwidth \ufeffbom soft\u00adhyphen`},
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
			if r != '\\' && unsafeRune(r, utf8.RuneLen(r)) {
				t.Fatalf("safe(%q) = %q holds %U", s, out, r)
			}
		}
		// Every backslash in the output starts an escape, so the output
		// reads back unambiguously.
		if u, err := strconv.Unquote(`"` + strings.ReplaceAll(out, `"`, `\"`) + `"`); err != nil {
			t.Fatalf("safe(%q) = %q does not read back: %v", s, out, err)
		} else if utf8.ValidString(s) && u != s {
			t.Fatalf("safe(%q) = %q reads back as %q", s, out, u)
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

// TestOutputEscapesRemoteText: the error line, ls and
// rm print a path or an error text holding terminal escapes escaped, and
// --json keeps the exact text.
func TestOutputEscapesRemoteText(t *testing.T) {
	const hostile = "evil\x1b]0;pwned\a\x00\u202e.md"
	const escaped = `evil\x1b]0;pwned\a\x00\u202e.md`
	raw := func(t *testing.T, what, out string) {
		t.Helper()
		if strings.ContainsAny(out, "\x1b\a\x00\u202e") {
			t.Errorf("%s: raw control characters: %q", what, out)
		}
		if !strings.Contains(out, escaped) {
			t.Errorf("%s does not show %s: %q", what, escaped, out)
		}
	}

	commands["test-hostile-error"] = func(env *cliEnv, args []string) error {
		env.json = len(args) > 0
		return fmt.Errorf("the remote answered %s", hostile)
	}
	defer delete(commands, "test-hostile-error")
	code, stdout, stderr := cli(t, nil, "test-hostile-error")
	if code == exitOK || stdout != "" {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	raw(t, "the error line", stderr)
	_, stdout, _ = cli(t, nil, "test-hostile-error", "--json")
	var res struct{ Error string }
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || !strings.HasSuffix(res.Error, hostile) {
		t.Errorf("--json error %q (%v), want the exact text", res.Error, err)
	}

	s := newSession(t)
	s.ok("hello\n", "put", hostile)
	raw(t, "ls", s.ok("", "ls"))
	_, out, _ := s.run("", "rm", hostile)
	raw(t, "rm", out)
}

// TestPrintPointsEscape: hunt's table, the quarantine
// warning and doctor's findings print remote text escaped.
func TestPrintPointsEscape(t *testing.T) {
	const hostile = "x\x1b[2J\a\x00\u2066"
	const escaped = `x\x1b[2J\a\x00\u2066`
	var out, errb bytes.Buffer
	env := &cliEnv{stdout: &out, stderr: &errb}
	at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	printHeld(env, []vault.HeldFile{{File: vault.File{Meta: livesync.Meta{Path: hostile}, Chunks: 2}, Missing: []engine.ChunkID{"h:1"},
		Since: at, Source: hostile, LastAttempt: at, LastResult: hostile}})
	warnQuarantined(env, "bucket", journalsync.Quarantine{Key: hostile, Stage: hostile, Err: hostile, At: at}, true)
	d := &doctor{env: env, spec: remoteSpec{id: "http://couch"}}
	d.add(finding{Check: "chunks", Status: statusWarning, Message: hostile, Details: []string{hostile}, Advice: hostile})
	d.report()
	for name, s := range map[string]string{"stdout": out.String(), "stderr": errb.String()} {
		if strings.ContainsAny(s, "\x1b\a\x00\u2066") {
			t.Errorf("%s: raw control characters: %q", name, s)
		}
	}
	if n := strings.Count(out.String(), escaped); n != 6 { // hunt: path, from, last; doctor: message, detail, advice
		t.Errorf("stdout shows %s %d times, want 6:\n%s", escaped, n, out.String())
	}
	if n := strings.Count(errb.String(), escaped); n != 3 {
		t.Errorf("stderr shows %s %d times, want 3:\n%s", escaped, n, errb.String())
	}
}
