package holdback

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// A released note is served at once; its holding document leaves the
// area in a later, gathered write. A crash before that write leaves it
// there, and the next process finds it already served: it drops it
// without releasing anything again, and still holds the others.
func TestReleasedLeftInTheAreaByACrashAreDropped(t *testing.T) {
	sh := newShared(t)
	one := newRig(t, Config{}, Deps{Inner: sh.open(false)})
	one.push(meta("a.md", "1-a", "h:a"), meta("b.md", "1-b", "h:b"))
	one.push(chunk("h:a"))
	if err := one.s.Settle(bg); err != nil {
		t.Fatal(err)
	}
	if one.rev("a.md") != "1-a" {
		t.Fatal("a.md is not served once its chunk is stored")
	}
	raw := sh.open(false)
	defer raw.Close()
	if _, err := raw.GetLocal(bg, localDocPrefix+"a.md"); err != nil {
		t.Fatalf("the removal of a.md's holding document did not wait: %v", err)
	}

	// The first process stops without writing it (a crash).
	two := newRig(t, Config{}, Deps{Inner: sh.open(false)})
	if got := heldDocs(two.s); !reflect.DeepEqual(got, []string{"b.md"}) {
		t.Fatalf("held after the crash: %v, want b.md", got)
	}
	if st := two.s.Stats(); st.Released != 0 || st.Held != 1 {
		t.Fatalf("after the crash: %+v", st)
	}
	if _, err := raw.GetLocal(bg, localDocPrefix+"a.md"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a.md's holding document is left after the resume: %v", err)
	}
	if got := index(t, raw); !reflect.DeepEqual(got, []string{"b.md"}) {
		t.Fatalf("the index lists %v, want b.md", got)
	}
	if two.rev("b.md") != "" {
		t.Fatal("b.md is served before its chunk")
	}
	two.push(chunk("h:b"))
	if err := two.s.Settle(bg); err != nil {
		t.Fatal(err)
	}
	if two.rev("b.md") != "1-b" {
		t.Fatal("b.md is not served once its chunk is stored")
	}
}

// The removals that wait are written with the next hold, in its
// transaction, and at Close.
func TestWaitingRemovalsAreWrittenWithTheNextHold(t *testing.T) {
	sh := newShared(t)
	r := newRig(t, Config{}, Deps{Inner: sh.open(false)})
	r.push(meta("a.md", "1-a", "h:a"), meta("b.md", "1-b", "h:b"))
	r.push(chunk("h:a"))
	if err := r.s.Settle(bg); err != nil {
		t.Fatal(err)
	}
	r.push(meta("c.md", "1-c", "h:c"))
	raw := sh.open(false)
	defer raw.Close()
	if _, err := raw.GetLocal(bg, localDocPrefix+"a.md"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a.md's holding document is left after the next hold: %v", err)
	}
	if got := index(t, raw); !reflect.DeepEqual(got, []string{"b.md", "c.md"}) {
		t.Fatalf("the index lists %v, want b.md and c.md", got)
	}
	r.push(chunk("h:b"))
	if err := r.s.Settle(bg); err != nil {
		t.Fatal(err)
	}
	if err := r.s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := index(t, raw); !reflect.DeepEqual(got, []string{"c.md"}) {
		t.Fatalf("the index lists %v after Close, want c.md", got)
	}
}

// countingStore counts the inner BulkDocs calls and offers what the
// engine's own store offers (store.LocalsUpdater).
type countingStore struct {
	store.Store
	mu   sync.Mutex
	bulk int
}

func (c *countingStore) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	c.mu.Lock()
	c.bulk++
	c.mu.Unlock()
	return c.Store.BulkDocs(ctx, docs)
}

func (c *countingStore) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bulk
}

func (c *countingStore) UpdateLocal(ctx context.Context, id string, fn func(old json.RawMessage) (json.RawMessage, error)) error {
	return c.Store.(store.LocalUpdater).UpdateLocal(ctx, id, fn)
}

func (c *countingStore) UpdateLocals(ctx context.Context, ids []string, fn func(id string, old json.RawMessage) (json.RawMessage, error)) error {
	return c.Store.(store.LocalsUpdater).UpdateLocals(ctx, ids, fn)
}

// A client's batch of chunks that completes held notes is written with
// those notes in one inner write, the notes after the chunks; they are
// served when the call returns. A batch that completes none is written
// as it is.
func TestChunksAndTheNotesTheyCompleteAreOneWrite(t *testing.T) {
	mem, err := store.NewMemory(store.Options{Name: "relay"})
	if err != nil {
		t.Fatal(err)
	}
	inner := &countingStore{Store: mem}
	r := newRig(t, Config{}, Deps{Inner: inner})
	if !r.s.carries() {
		t.Fatal("the store's own kind does not carry writes")
	}
	r.push(meta("a.md", "1-a", "h:a1", "h:a2"), meta("b.md", "1-b", "h:b"), meta("c.md", "1-c", "h:c"))
	_, since := r.changes("")
	n := inner.calls()
	settle := WithSettle(bg)
	if _, err := r.s.BulkDocs(settle, []json.RawMessage{chunk("h:a1"), chunk("h:a2"), chunk("h:b"), chunk("h:x")}); err != nil {
		t.Fatal(err)
	}
	if got := inner.calls() - n; got != 1 {
		t.Fatalf("%d inner writes for a batch of chunks and the notes it completes, want 1", got)
	}
	cs, _ := r.changes(since)
	if got := ids(cs); !reflect.DeepEqual(got, []string{"h:a1", "h:a2", "h:b", "h:x", "a.md", "b.md"}) {
		t.Fatalf("feed %v: want the chunks, then the notes they complete", got)
	}
	n = inner.calls()
	if _, err := r.s.BulkDocs(settle, []json.RawMessage{chunk("h:y")}); err != nil {
		t.Fatal(err)
	}
	if got := inner.calls() - n; got != 1 {
		t.Fatalf("%d inner writes for a batch that completes nothing, want 1", got)
	}
	if r.rev("c.md") != "" {
		t.Fatal("c.md is served before its chunk")
	}
	if st := r.s.Stats(); st.Released != 2 || st.Held != 1 {
		t.Fatalf("stats %+v", st)
	}
}
