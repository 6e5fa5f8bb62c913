package holdback

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

var bg = context.Background()

// fakeHunter records the purgatory's Enqueue and Remove calls with the
// virtual time since start.
type fakeHunter struct {
	start time.Time
	mu    sync.Mutex
	calls []string
}

func (h *fakeHunter) Enqueue(doc string, needed []engine.ChunkID, origin string, delay time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf("%v enqueue %s %v origin=%q delay=%v", time.Since(h.start), doc, needed, origin, delay))
}

func (h *fakeHunter) Remove(doc string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf("%v remove %s", time.Since(h.start), doc))
}

func (h *fakeHunter) Calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// rig is a Store over a memory store, with a recording Hunter.
type rig struct {
	t      *testing.T
	start  time.Time
	inner  store.Store
	s      *Store
	hunter *fakeHunter
}

func newRig(t *testing.T, cfg Config, deps Deps) *rig {
	t.Helper()
	if deps.Inner == nil {
		inner, err := store.NewMemory(store.Options{Name: "relay"})
		if err != nil {
			t.Fatal(err)
		}
		deps.Inner = inner
	}
	r := &rig{t: t, start: time.Now(), inner: deps.Inner}
	if deps.Hunter == nil {
		r.hunter = &fakeHunter{start: r.start}
		deps.Hunter = r.hunter
	}
	s, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	r.s = s
	t.Cleanup(func() { s.Close() })
	return r
}

// meta is a plain (unencrypted, readable) metadata revision with
// _revisions history hashes (newest first; the first is rev's hash).
func meta(id, rev string, chunks ...string) json.RawMessage {
	return metaHist(id, rev, nil, chunks...)
}

func metaHist(id, rev string, older []string, chunks ...string) json.RawMessage {
	gen, hash, _ := splitRev(rev)
	if chunks == nil {
		chunks = []string{}
	}
	m := map[string]any{"_id": id, "_rev": rev, "_revisions": map[string]any{"start": gen, "ids": append([]string{hash}, older...)},
		"path": id, "children": chunks, "ctime": 1700000000000, "mtime": 1700000000000, "size": 0, "type": "plain", "eden": map[string]any{}}
	b, _ := json.Marshal(m)
	return b
}

// tombstone is a bodyless deletion with history.
func tombstone(id, rev string, older ...string) json.RawMessage {
	gen, hash, _ := splitRev(rev)
	b, _ := json.Marshal(map[string]any{"_id": id, "_rev": rev, "_deleted": true,
		"_revisions": map[string]any{"start": gen, "ids": append([]string{hash}, older...)}})
	return b
}

func chunk(id string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"_id": id, "_rev": "1-c" + strings.TrimPrefix(id, "h:"), "type": "leaf", "data": "piece " + id})
	return b
}

func (r *rig) push(docs ...json.RawMessage) []engine.BulkDocResult {
	r.t.Helper()
	res, err := r.s.BulkDocs(bg, docs)
	if err != nil {
		r.t.Fatalf("BulkDocs: %v", err)
	}
	if len(res) != len(docs) {
		r.t.Fatalf("BulkDocs: %d results for %d docs", len(res), len(docs))
	}
	for i, x := range res {
		if x.Error != "" {
			r.t.Fatalf("BulkDocs result %d: %+v", i, x)
		}
	}
	return res
}

// rev returns the winning revision the store serves for id, "" if none.
func (r *rig) rev(id string) string {
	r.t.Helper()
	b, err := r.s.Get(bg, id, store.GetOptions{})
	if errors.Is(err, engine.ErrNotFound) {
		return ""
	}
	if err != nil {
		r.t.Fatal(err)
	}
	var d struct {
		Rev string `json:"_rev"`
	}
	json.Unmarshal(b, &d)
	return d.Rev
}

// changes reads the feed after since: "id@rev" per row, and LastSeq.
func (r *rig) changes(since string) ([]engine.Change, string) {
	r.t.Helper()
	p, err := r.s.Changes(bg, engine.ChangesRequest{Since: since})
	if err != nil {
		r.t.Fatal(err)
	}
	return p.Results, p.LastSeq
}

func ids(cs []engine.Change) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func seqNum(t *testing.T, seq string) int {
	t.Helper()
	n, err := strconv.Atoi(seq)
	if err != nil {
		t.Fatalf("seq %q: %v", seq, err)
	}
	return n
}

// sleepUntil sleeps until d after the rig's start (virtual time).
func (r *rig) sleepUntil(d time.Duration) {
	r.t.Helper()
	if left := d - time.Since(r.start); left > 0 {
		time.Sleep(left)
	}
}

func (r *rig) heldDoc(doc string) (state string, revs []string, ok bool) {
	for _, h := range r.s.Held() {
		if h.Doc == doc {
			return h.State.String(), h.Revisions, true
		}
	}
	return "", nil, false
}

// area returns the revisions in the holding area of doc (from the inner
// store, as a restart would see them: the removals of released
// revisions that wait are written first).
func (r *rig) area(doc string) []string {
	r.t.Helper()
	r.s.flushRemovals(bg)
	h, err := r.s.area.get(bg, doc)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for rev := range h.Revs {
		out = append(out, rev)
	}
	slices.Sort(out)
	return out
}
