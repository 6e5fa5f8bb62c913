package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// testLocalUpdate runs RunLocalUpdate on st, as one process, when st is
// a store.LocalUpdater; a Store without it has nothing to prove here.
func testLocalUpdate(t *testing.T, st store.Store) {
	if _, ok := st.(store.LocalUpdater); !ok {
		t.Logf("%T is not a store.LocalUpdater", st)
		return
	}
	RunLocalUpdate(t, st, st)
}

// RunLocalUpdate checks store.LocalUpdater on two Stores that share one
// storage (two processes over one database; or the same Store twice):
// what fn is given and what its result writes, and that updates from
// many goroutines through both Stores at once lose none.
func RunLocalUpdate(t *testing.T, a, b store.Store) {
	ua, ok1 := a.(store.LocalUpdater)
	ub, ok2 := b.(store.LocalUpdater)
	if !ok1 || !ok2 {
		t.Fatalf("%T and %T must both be store.LocalUpdaters", a, b)
	}
	t.Run("Semantics", func(t *testing.T) { localUpdateSemantics(t, ua, b) })
	t.Run("Concurrent", func(t *testing.T) { localUpdateConcurrent(t, ua, ub, b) })
}

func wantLocal(t *testing.T, st store.Store, id, want string) {
	t.Helper()
	got, err := st.GetLocal(ctx, id)
	if want == "" {
		if !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("GetLocal(%q) = %s, %v; want not found", id, got, err)
		}
		return
	}
	if err != nil || string(got) != want {
		t.Fatalf("GetLocal(%q) = %s, %v; want %s", id, got, err, want)
	}
}

func localUpdateSemantics(t *testing.T, u store.LocalUpdater, other store.Store) {
	id := "upd-semantics"
	set := func(v string) func(json.RawMessage) (json.RawMessage, error) {
		return func(json.RawMessage) (json.RawMessage, error) {
			if v == "" {
				return nil, nil
			}
			return json.RawMessage(v), nil
		}
	}
	var seen []string
	record := func(old json.RawMessage) (json.RawMessage, error) {
		if old == nil {
			seen = append(seen, "<nil>")
		} else {
			seen = append(seen, string(old))
		}
		return old, nil
	}
	// Absent: fn sees nil, and nil back writes nothing.
	if err := u.UpdateLocal(ctx, id, record); err != nil {
		t.Fatal(err)
	}
	if len(seen) == 0 || seen[len(seen)-1] != "<nil>" {
		t.Fatalf("fn saw %q for an absent document, want nil", seen)
	}
	wantLocal(t, other, id, "")
	if err := u.UpdateLocal(ctx, id, set(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	wantLocal(t, other, id, `{"v":1}`)
	seen = nil
	if err := u.UpdateLocal(ctx, id, record); err != nil {
		t.Fatal(err)
	}
	if seen[len(seen)-1] != `{"v":1}` {
		t.Fatalf("fn saw %q, want the stored document", seen)
	}
	wantLocal(t, other, id, `{"v":1}`)
	// An error from fn is returned as is and writes nothing.
	boom := errors.New("boom")
	if err := u.UpdateLocal(ctx, id, func(json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"v":2}`), boom
	}); !errors.Is(err, boom) {
		t.Fatalf("fn's error came back as %v", err)
	}
	wantLocal(t, other, id, `{"v":1}`)
	// Not JSON: refused, nothing written.
	if err := u.UpdateLocal(ctx, id, set(`{"v":`)); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("an update that is not JSON: %v, want store.ErrInvalid", err)
	}
	wantLocal(t, other, id, `{"v":1}`)
	// nil deletes; deleting an absent document is no error.
	for range 2 {
		if err := u.UpdateLocal(ctx, id, set("")); err != nil {
			t.Fatal(err)
		}
		wantLocal(t, other, id, "")
	}
	// Ids the store cannot keep.
	for _, bad := range []string{"", strings.Repeat("x", store.MaxLocalIDLength+1)} {
		called := false
		err := u.UpdateLocal(ctx, bad, func(json.RawMessage) (json.RawMessage, error) {
			called = true
			return json.RawMessage(`{}`), nil
		})
		if !errors.Is(err, store.ErrInvalid) || called {
			t.Fatalf("_local id of %d bytes: %v (fn called: %v), want store.ErrInvalid", len(bad), err, called)
		}
	}
}

// localUpdateConcurrent increments a counter from goroutines split over
// both Stores: every increment is kept.
func localUpdateConcurrent(t *testing.T, a, b store.LocalUpdater, reader store.Store) {
	const workers, each = 6, 15
	id := "upd-counter"
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		u := a
		if w%2 == 1 {
			u = b
		}
		wg.Go(func() {
			for range each {
				err := u.UpdateLocal(ctx, id, func(old json.RawMessage) (json.RawMessage, error) {
					var c struct{ N int }
					if old != nil {
						if err := json.Unmarshal(old, &c); err != nil {
							return nil, err
						}
					}
					c.N++
					return json.Marshal(c)
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	wantLocal(t, reader, id, fmt.Sprintf(`{"N":%d}`, workers*each))
}
