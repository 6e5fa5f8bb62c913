package store

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
)

// hinted is a memory Backend that records the Prefetch hints it gets.
type hinted struct {
	Backend
	hints []string
}

func (h *hinted) Prefetch(b Bucket, keys [][]byte) error {
	ks := make([]string, len(keys))
	for i, k := range keys {
		ks[i] = string(k)
	}
	slices.Sort(ks)
	h.hints = append(h.hints, strings.Join(ks, ","))
	return nil
}

// TestPrefetchHints: the batch reads and writes of a pull tell a
// Prefetcher backend the documents they are about to read.
func TestPrefetchHints(t *testing.T) {
	ctx := context.Background()
	h := &hinted{Backend: NewMemoryBackend()}
	st, err := Open(h, Options{Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.RevsDiff(ctx, map[string][]string{"a": {"1-x"}, "b": {"1-y"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.BulkDocs(ctx, []json.RawMessage{json.RawMessage(`{"_id":"a","_rev":"1-x"}`), json.RawMessage(`{"_id":"b","_rev":"1-y"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.BulkGet(ctx, []engine.DocRev{{ID: "a"}, {ID: "b"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutChunks(ctx, []engine.Chunk{{ID: "h:1", Data: "x"}, {ID: "h:2", Data: "y"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetChunks(ctx, []engine.ChunkID{"h:1", "h:2"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"a,b", "a,b", "a,b", "h:1,h:2", "h:1,h:2"}
	if !slices.Equal(h.hints, want) {
		t.Fatalf("hints = %q, want %q", h.hints, want)
	}
}
