package couchapi

import (
	"errors"
	"log/slog"
	"slices"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/bridge"
	"github.com/livesync-go/livesync-go/engine/store"
)

// TestHeldDatabases: each database is served through a hold-back, opened
// once; reserved names are no database; a database with upstreams gets
// its bridge (the hold-back's Hunter); Delete and Close close what they
// opened.
func TestHeldDatabases(t *testing.T) {
	ctx := t.Context()
	inner := NewMemoryDatabases()
	var bridged []string
	h := NewHeld(inner, HeldConfig{Reserved: map[string]bool{"status": true},
		Bridge: func(name string, local bridge.Local, log *slog.Logger) (*bridge.Bridge, error) {
			if name != "bridged" {
				return nil, nil
			}
			bridged = append(bridged, name)
			return bridge.New(local, bridge.Config{DB: name, UUID: "uuid", Log: log})
		}})
	for _, name := range []string{"plain", "bridged"} {
		if err := h.Create(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Create(ctx, "status"); !errors.Is(err, ErrIllegalName) {
		t.Errorf("Create of a reserved name: %v", err)
	}
	if _, err := h.Open(ctx, "status"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Open of a reserved name: %v", err)
	}
	d, err := h.OpenHeld(ctx, "bridged")
	if err != nil || d.Bridge() == nil || d.Name != "bridged" || !slices.Equal(bridged, []string{"bridged"}) {
		t.Fatalf("OpenHeld: %+v, %v; bridges built %q (once)", d, err, bridged)
	}
	open := h.Opened()
	if len(open) != 2 || open[0].Name != "bridged" || open[1].Name != "plain" || open[1].Bridge() != nil {
		t.Fatalf("Opened: %+v", open)
	}
	if _, err := inner.Open(ctx, "status"); err == nil {
		t.Fatal("the reserved name reached the inner databases")
	}
	if names, err := h.List(ctx); err != nil || !slices.Equal(names, []string{"bridged", "plain"}) {
		t.Fatalf("List: %q, %v", names, err)
	}
	if err := h.Delete(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	if _, err := open[1].Info(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("a deleted database's hold-back answers %v, want ErrClosed", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Open(ctx, "bridged"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Open after Close: %v", err)
	}
	if _, err := inner.List(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("the inner databases are open after Close: %v", err)
	}
}
