package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/livesync-go/livesync-go/engine/store"
)

// UpdateLocals changes several _local documents in one Backend Update:
// every change is written together, and an error from fn writes none.
func TestUpdateLocalsIsOneTransaction(t *testing.T) {
	ctx := context.Background()
	rb := &updateCounter{Backend: store.NewMemoryBackend()}
	st, err := store.Open(rb, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	u, ok := st.(store.LocalsUpdater)
	if !ok {
		t.Fatal("the store is not a LocalsUpdater")
	}
	if err := st.PutLocal(ctx, "b", json.RawMessage(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	before := rb.updates
	err = store.UpdateLocals(ctx, u, []string{"a", "b", "c"}, func(id string, old json.RawMessage) (json.RawMessage, error) {
		switch id {
		case "a":
			return json.RawMessage(`{"a":true}`), nil
		case "b":
			if string(old) != `{"n":1}` {
				t.Errorf("b: old %s", old)
			}
			return nil, nil // deleted
		}
		return old, nil // c: absent, left absent
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := rb.updates - before; n != 1 {
		t.Errorf("%d backend transactions, want 1", n)
	}
	got, err := store.GetLocals(ctx, st, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got["a"]) != `{"a":true}` {
		t.Fatalf("after: %q", got)
	}

	boom := errors.New("boom")
	err = u.UpdateLocals(ctx, []string{"a", "d"}, func(id string, old json.RawMessage) (json.RawMessage, error) {
		if id == "d" {
			return nil, boom
		}
		return json.RawMessage(`{"a":false}`), nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want fn's", err)
	}
	if got, _ := store.GetLocals(ctx, st, []string{"a"}); string(got["a"]) != `{"a":true}` {
		t.Fatalf("a failed UpdateLocals wrote a: %s", got["a"])
	}
}

// updateCounter counts a Backend's read-write transactions.
type updateCounter struct {
	store.Backend
	updates int
}

func (u *updateCounter) Update(fn func(store.Tx) error) error {
	u.updates++
	return u.Backend.Update(fn)
}
