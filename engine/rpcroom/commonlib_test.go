package rpcroom

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"unicode/utf16"
)

// commonlibString is the string of testdata/commonlib_chunks.jsonl:
// "x", 400 emoji, "y", 400 emoji, a lone high surrogate, "漢字", 100 emoji.
func commonlibString() []uint16 {
	u := utf16.Encode([]rune("x" + strings.Repeat("😀", 400) + "y" + strings.Repeat("😀", 400)))
	u = append(u, 0xD83D)
	return append(u, utf16.Encode([]rune("漢字"+strings.Repeat("😀", 100)))...)
}

// TestCommonlibChunks checks both directions against wire messages that
// Node 20 produced with commonlib's splitIntoChunks (src/rpc/chunking.ts)
// at 800 bytes and JSON.stringify, for the request envelope
// {"kind":"request","requestId":"req-test-00000000","method":"test.echo",
// "args":[commonlibString()]} under stream id "stream-test-00000000": five
// parts of 400, 399, 400, 399 and 295 units, two ending in half a pair.
// Sending must produce the same bytes; receiving them (out of order,
// with a duplicate) must hand the handler the string bit for bit.
func TestCommonlibChunks(t *testing.T) {
	raw, err := os.ReadFile("testdata/commonlib_chunks.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	units := commonlibString()
	env, err := requestEnvelope("req-test-00000000", "test.echo", []json.RawMessage{QuoteUTF16(units)})
	if err != nil {
		t.Fatal(err)
	}
	parts := SplitUTF16(jsUnits(string(env)), MinMaxWirePayloadBytes)
	if len(parts) != len(lines) {
		t.Fatalf("%d parts, commonlib made %d", len(parts), len(lines))
	}
	for i, p := range parts {
		if got := string(EncodeChunk("stream-test-00000000", i, len(parts), p)); got != lines[i] {
			t.Errorf("chunk %d:\n got %s\nwant %s", i, got, lines[i])
		}
	}
	synctest.Test(t, func(t *testing.T) {
		_, b, n, _ := pair(t, nil)
		var (
			mu  sync.Mutex
			got [][]uint16
		)
		b.Handle("test.echo", func(_ context.Context, _ string, args []json.RawMessage) (any, error) {
			u, err := UnquoteUTF16(args[0])
			mu.Lock()
			defer mu.Unlock()
			got = append(got, u)
			return nil, err
		})
		for _, i := range []int{4, 2, 0, 2, 3, 1} {
			b.Receive("A", []byte(lines[i]))
		}
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 1 || !slices.Equal(got[0], units) {
			t.Errorf("handler got %d strings; equal to the sent one: %v", len(got), len(got) == 1 && slices.Equal(got[0], units))
		}
		done := 0
		for _, s := range n.messages("B", "A") {
			if s.msg == `{"wire":"chunk-ack","streamId":"stream-test-00000000","missing":[]}` {
				done++
			}
		}
		if done != 1 {
			t.Errorf("B sent %d empty chunk-acks, want 1", done)
		}
	})
}
