package store_test

import (
	"encoding/json"
	"testing"

	"github.com/livesync-go/livesync-go/engine/store"
)

// LiveLocal gives a _local document's body, and nil for an absent or a
// deleted one.
func TestLiveLocal(t *testing.T) {
	ctx := t.Context()
	st, err := store.NewMemory(store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if raw, err := store.LiveLocal(ctx, st, "x"); raw != nil || err != nil {
		t.Fatalf("absent: %s, %v", raw, err)
	}
	if err := st.PutLocal(ctx, "x", json.RawMessage(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if raw, err := store.LiveLocal(ctx, st, "x"); string(raw) == "" || err != nil {
		t.Fatalf("present: %s, %v", raw, err)
	}
	if err := st.PutLocal(ctx, "x", json.RawMessage(`{"_deleted":true}`)); err != nil {
		t.Fatal(err)
	}
	if raw, err := store.LiveLocal(ctx, st, "x"); raw != nil || err != nil {
		t.Fatalf("deleted: %s, %v", raw, err)
	}
}
