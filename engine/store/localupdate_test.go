package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/storetest"
)

// rerunBackend runs each Update's fn twice when rerun is set: the first
// run's writes are discarded and, before the second, another writer
// commits (between), as a backend whose commit lost a compare-and-swap
// does. It counts the writes that reach the backend.
type rerunBackend struct {
	store.Backend
	rerun   bool
	between func(tx store.Tx) error
	writes  int
}

var errLost = errors.New("lost the commit")

func (r *rerunBackend) Update(fn func(store.Tx) error) error {
	if r.rerun {
		r.rerun = false
		err := r.Backend.Update(func(tx store.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			return errLost
		})
		if !errors.Is(err, errLost) {
			return err
		}
		if r.between != nil {
			if err := r.Backend.Update(r.between); err != nil {
				return err
			}
		}
	}
	return r.Backend.Update(func(tx store.Tx) error { return fn(countingTx{tx, &r.writes}) })
}

type countingTx struct {
	store.Tx
	n *int
}

func (c countingTx) Put(b store.Bucket, k, v []byte) error { *c.n++; return c.Tx.Put(b, k, v) }
func (c countingTx) Delete(b store.Bucket, k []byte) error { *c.n++; return c.Tx.Delete(b, k) }

// keepOpen is a Backend whose Close leaves the shared one open, so that
// two Stores can be opened over one storage.
type keepOpen struct{ store.Backend }

func (keepOpen) Close() error { return nil }

// Two Stores over one in-memory backend, as two processes over one
// database: every update through either is kept.
func TestLocalUpdateTwoStores(t *testing.T) {
	be := store.NewMemoryBackend()
	t.Cleanup(func() { be.Close() })
	a, err := store.Open(keepOpen{be}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.Open(keepOpen{be}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	storetest.RunLocalUpdate(t, a, b)
}

// A transaction run again sees what the writer that came between
// committed, and only its last run's result is written; an update that
// returns the stored bytes, or deletes what is absent, writes nothing.
func TestLocalUpdateRerun(t *testing.T) {
	ctx := t.Context()
	rb := &rerunBackend{Backend: store.NewMemoryBackend()}
	st, err := store.Open(rb, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	u := st.(store.LocalUpdater)
	if err := st.PutLocal(ctx, "x", json.RawMessage(`{"revs":["a"]}`)); err != nil {
		t.Fatal(err)
	}
	rb.rerun = true
	rb.between = func(tx store.Tx) error {
		return tx.Put(store.BucketLocal, []byte("x"), []byte(`{"revs":["a","b"]}`))
	}
	var calls []string
	err = u.UpdateLocal(ctx, "x", func(old json.RawMessage) (json.RawMessage, error) {
		calls = append(calls, string(old))
		var d struct{ Revs []string }
		if err := json.Unmarshal(old, &d); err != nil {
			return nil, err
		}
		d.Revs = append(d.Revs, "c")
		return json.Marshal(struct {
			Revs []string `json:"revs"`
		}{d.Revs})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || calls[0] != `{"revs":["a"]}` || calls[1] != `{"revs":["a","b"]}` {
		t.Fatalf("fn was given %q, want the first read then what the other writer committed", calls)
	}
	got, err := st.GetLocal(ctx, "x")
	if err != nil || string(got) != `{"revs":["a","b","c"]}` {
		t.Fatalf("stored %s, %v", got, err)
	}

	rb.writes = 0
	same := func(old json.RawMessage) (json.RawMessage, error) { return json.RawMessage(string(old)), nil }
	if err := u.UpdateLocal(ctx, "x", same); err != nil {
		t.Fatal(err)
	}
	none := func(json.RawMessage) (json.RawMessage, error) { return nil, nil }
	if err := u.UpdateLocal(ctx, "absent", none); err != nil {
		t.Fatal(err)
	}
	if rb.writes != 0 {
		t.Fatalf("%d writes for updates that change nothing", rb.writes)
	}
	if err := u.UpdateLocal(ctx, "x", none); err != nil || rb.writes != 1 {
		t.Fatalf("delete: %v, %d writes", err, rb.writes)
	}
}

// A closed store, or a cancelled context, updates nothing and never
// calls fn.
func TestLocalUpdateClosed(t *testing.T) {
	st, err := store.NewMemory(store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	u := st.(store.LocalUpdater)
	fn := func(json.RawMessage) (json.RawMessage, error) {
		t.Error("fn called")
		return nil, nil
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := u.UpdateLocal(ctx, "x", fn); err == nil {
		t.Error("an update with a cancelled context succeeded")
	}
	st.Close()
	if err := u.UpdateLocal(t.Context(), "x", fn); !errors.Is(err, store.ErrClosed) {
		t.Errorf("an update of a closed store: %v, want store.ErrClosed", err)
	}
}

// GetLocals reads those that exist, through a LocalsReader or one
// GetLocal each.
func TestGetLocals(t *testing.T) {
	ctx := t.Context()
	st, err := store.NewMemory(store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, id := range []string{"a", "c"} {
		if err := st.PutLocal(ctx, id, json.RawMessage(`"`+id+`"`)); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []store.Store{st, plain{st}} {
		got, err := store.GetLocals(ctx, s, []string{"a", "b", "c"})
		if err != nil || len(got) != 2 || string(got["a"]) != `"a"` || string(got["c"]) != `"c"` {
			t.Errorf("%T: %q, %v", s, got, err)
		}
	}
}

// plain hides the Store's optional interfaces.
type plain struct{ store.Store }
