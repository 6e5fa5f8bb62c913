package holdback

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine/store"
)

// lasting is an inner store that outlives each Store opened over it (as
// a Worker's D1 database outlives each request) and records the ids of
// the _local documents written to it.
type lasting struct {
	store.Store
	mu     sync.Mutex
	locals []string
}

func (l *lasting) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	l.mu.Lock()
	l.locals = append(l.locals, strings.TrimPrefix(id, LocalPrefix))
	l.mu.Unlock()
	return l.Store.PutLocal(ctx, id, doc)
}

func (l *lasting) Close() error { return nil }

// written returns and forgets the _local ids written since the last call.
func (l *lasting) written() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.locals
	l.locals = nil
	return out
}

// A Store that changed nothing writes nothing when it saves or closes:
// sessions (a Store opened, used, closed, as per request in a Worker)
// that only read, or write complete notes, leave the inner store's
// _local documents alone, however long they run; a session that holds,
// releases, or finds a state change on resume writes the state, and the
// held note survives every session.
func TestSessionThatChangedNothingWritesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, err := store.NewMemory(store.Options{Name: "relay"})
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Close()
		inner := &lasting{Store: mem}
		start := time.Now()
		session := func(f func(r *rig)) []string {
			t.Helper()
			r := newRig(t, Config{}, Deps{Inner: inner})
			r.start = start
			f(r)
			if err := r.s.Close(); err != nil {
				t.Fatal(err)
			}
			return inner.written()
		}
		reads := func(r *rig) {
			r.rev("a.md")
			r.rev("b.md")
			r.changes("")
			if _, err := r.s.RevsDiff(bg, map[string][]string{"b.md": {"1-b"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := r.s.AllDocs(bg, store.AllDocsOptions{}); err != nil {
				t.Fatal(err)
			}
		}

		if got := session(reads); len(got) != 0 {
			t.Errorf("a read-only session on a fresh store wrote %v", got)
		}
		got := session(func(r *rig) { r.push(chunk("h:1"), meta("a.md", "1-a", "h:1")) })
		if len(got) != 0 {
			t.Errorf("a session writing a complete note wrote _local %v", got)
		}
		got = session(func(r *rig) { r.push(meta("b.md", "1-b", "h:2")) })
		if !slices.Contains(got, "purgatory") {
			t.Errorf("a session that held a note wrote %v, want the purgatory state among them", got)
		}
		got = session(func(r *rig) {
			reads(r)
			time.Sleep(2 * time.Minute) // four periodic saves
			if r.rev("b.md") != "" {
				t.Error("held note served")
			}
		})
		if len(got) != 0 {
			t.Errorf("a read-only session with a held note wrote %v", got)
		}

		// The deadline of active hunting passed between sessions: the
		// state changed on resume and is written once.
		time.Sleep(30 * time.Minute)
		got = session(func(r *rig) {
			if state, _, _ := r.heldDoc("b.md"); state != "soft-expired" {
				t.Errorf("b.md %q at 32 min", state)
			}
		})
		if !slices.Equal(got, []string{"purgatory"}) {
			t.Errorf("the session that found b.md soft-expired wrote %v, want the purgatory state once", got)
		}
		if got := session(reads); len(got) != 0 {
			t.Errorf("a read-only session wrote %v", got)
		}

		got = session(func(r *rig) {
			r.push(chunk("h:2"))
			if err := r.s.Settle(bg); err != nil {
				t.Fatal(err)
			}
			if r.rev("b.md") != "1-b" {
				t.Error("b.md not released")
			}
		})
		if !slices.Contains(got, "purgatory") {
			t.Errorf("the release session wrote %v, want the purgatory state among them", got)
		}
		got = session(func(r *rig) {
			if r.rev("b.md") != "1-b" || len(r.s.Held()) != 0 {
				t.Errorf("after release: b.md %q, held %v", r.rev("b.md"), r.s.Held())
			}
		})
		if len(got) != 0 {
			t.Errorf("a read-only session after the release wrote %v", got)
		}
	})
}

// A held note survives read-only sessions that write nothing: each one
// resumes it from what the session that held it saved, with its
// original deadline.
func TestHeldNoteSurvivesQuietSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, err := store.NewMemory(store.Options{Name: "relay"})
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Close()
		inner := &lasting{Store: mem}
		start := time.Now()
		r := newRig(t, Config{}, Deps{Inner: inner})
		r.push(meta("b.md", "1-b", "h:2"))
		r.s.Close()
		inner.written()
		for range 5 {
			time.Sleep(time.Minute)
			r = newRig(t, Config{}, Deps{Inner: inner})
			held := r.s.Held()
			if len(held) != 1 || held[0].Doc != "b.md" || !held[0].Since.Equal(start) || !held[0].Deadline.Equal(start.Add(30*time.Minute)) {
				t.Fatalf("held %+v", held)
			}
			if diff, _ := r.s.RevsDiff(bg, map[string][]string{"b.md": {"1-b"}}); len(diff) != 0 {
				t.Fatalf("RevsDiff %v: a held revision counts as present", diff)
			}
			r.s.Close()
			if got := inner.written(); len(got) != 0 {
				t.Fatalf("wrote %v", got)
			}
		}
		if _, err := mem.GetLocal(bg, LocalPrefix+"purgatory"); err != nil {
			t.Fatalf("the purgatory state: %v", err)
		}
	})
}
