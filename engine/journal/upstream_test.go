package journal_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// upstreamUnescapeRE is the pattern of unescapeNewLineFromString in
// commonlib src/common/utils.ts; Go's leftmost-first, non-overlapping
// replacement matches JavaScript's String.prototype.replace with /g.
var upstreamUnescapeRE = regexp.MustCompile(`\\n|\\r|\\\\`)

// upstreamParseChunk reads a one-record pack the way commonlib
// JournalSyncCore.ts does: strip "~", split at every U+001F, keep the
// second field, unescape it if it starts with `\f`. It is an independent
// model used to cross-check the decoder.
func upstreamParseChunk(t testing.TB, payload []byte) string {
	t.Helper()
	line, ok := bytes.CutSuffix(payload, []byte("\n"))
	if !ok || bytes.IndexByte(line, '\n') >= 0 || len(line) == 0 || line[0] != '~' {
		t.Fatalf("not a one-chunk pack: %q", payload)
	}
	parts := strings.Split(string(line[1:]), "\x1f")
	if len(parts) < 2 {
		t.Fatalf("no U+001F in %q", payload)
	}
	data := parts[1]
	if !strings.HasPrefix(data, `\f`) {
		return data
	}
	return upstreamUnescapeRE.ReplaceAllStringFunc(data[2:], func(m string) string {
		switch m {
		case `\n`:
			return "\n"
		case `\r`:
			return "\r"
		}
		return `\`
	})
}
