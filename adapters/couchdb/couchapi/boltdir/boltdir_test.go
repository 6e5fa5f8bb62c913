package boltdir

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

func TestDatabases(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	ctx := context.Background()
	d, err := Open(dir, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Open(ctx, "vault"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("open absent: %v", err)
	}
	for _, bad := range []string{"", "A", "../x", "a/b", "a.db"} {
		if err := d.Create(ctx, bad); !errors.Is(err, couchapi.ErrIllegalName) {
			t.Errorf("create %q: %v", bad, err)
		}
	}
	if err := d.Create(ctx, "vault"); err != nil {
		t.Fatal(err)
	}
	if err := d.Create(ctx, "vault"); !errors.Is(err, couchapi.ErrExists) {
		t.Fatalf("create twice: %v", err)
	}
	st, err := d.Open(ctx, "vault")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, []byte(`{"_id":"x","v":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := d.Create(ctx, "other$(1)+-"); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(dir, "README.txt"), []byte("not a db"), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "Bad.db"), nil, 0o600)
	names, err := d.List(ctx)
	if err != nil || fmt.Sprint(names) != "[other$(1)+- vault]" {
		t.Fatalf("list %v %v", names, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Open(ctx, "vault"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("open after close: %v", err)
	}
	// Reopened: the data is there.
	d2, err := Open(dir, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	st2, err := d2.Open(ctx, "vault")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st2.Get(ctx, "x", store.GetOptions{}); err != nil {
		t.Fatalf("document after reopen: %v", err)
	}
	if err := d2.Delete(ctx, "vault"); err != nil {
		t.Fatal(err)
	}
	if _, err := st2.Info(ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("store after delete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "vault.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file after delete: %v", err)
	}
	if err := d2.Delete(ctx, "vault"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

func TestPath(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(dir, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Create(t.Context(), "vault"); err != nil {
		t.Fatal(err)
	}
	if p := d.Path("vault"); p != filepath.Join(dir, "vault.db") {
		t.Fatalf("Path = %q", p)
	}
	for _, bad := range []string{"", "../x", "Vault", "a/b", "_users"} {
		if p := d.Path(bad); p != "" {
			t.Fatalf("Path(%q) = %q", bad, p)
		}
	}
}
