//go:build !js && !wasip1

package d1kv_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/wasm/workers/d1kv"
	"github.com/livesync-go/livesync-go/wasm/workers/internal/sqlitexec"
)

func openDatabases(t *testing.T, path string) *d1kv.Databases {
	t.Helper()
	x, err := sqlitexec.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	dbs, err := d1kv.OpenDatabases(t.Context(), x, couchapi.StoreOptions(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbs.Close() })
	return dbs
}

// Two isolates' Databases over one D1 database see each other's
// creations and deletions.
func TestDatabasesTwoIsolates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d1.sqlite")
	a, b := openDatabases(t, path), openDatabases(t, path)
	ctx := t.Context()
	if err := a.Create(ctx, "Bad"); !errors.Is(err, couchapi.ErrIllegalName) {
		t.Fatalf("Create(Bad) = %v", err)
	}
	for _, n := range []string{"vault", "notes"} {
		if err := a.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Create(ctx, "vault"); !errors.Is(err, couchapi.ErrExists) {
		t.Fatalf("second Create = %v, want ErrExists", err)
	}
	if names, err := b.List(ctx); err != nil || !slices.Equal(names, []string{"notes", "vault"}) {
		t.Fatalf("List = %v, %v", names, err)
	}
	sa, err := a.Open(ctx, "vault")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sa.Put(ctx, json.RawMessage(`{"_id":"n1"}`)); err != nil {
		t.Fatal(err)
	}
	sb, err := b.Open(ctx, "vault")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Get(ctx, "n1", store.GetOptions{}); err != nil {
		t.Fatalf("b does not see a's write: %v", err)
	}
	if err := b.Delete(ctx, "vault"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Open(ctx, "vault"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Open after another isolate's Delete = %v", err)
	}
	// A store a held from before the Delete writes nothing.
	if _, err := sa.Put(ctx, json.RawMessage(`{"_id":"n2"}`)); err == nil {
		t.Fatal("a Put into a deleted database succeeded")
	}
	if err := a.Delete(ctx, "vault"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("second Delete = %v", err)
	}
	// Created again, it starts empty.
	if err := a.Create(ctx, "vault"); err != nil {
		t.Fatal(err)
	}
	sa, err = a.Open(ctx, "vault")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := sa.Info(ctx); err != nil || info.DocCount != 0 || info.UpdateSeq != "0" {
		t.Fatalf("recreated database: %+v, %v", info, err)
	}
}

// The engine's endpoint suite through the CouchDB adapter against
// couchapi serving d1kv databases, as the Worker does.
func TestEndpointSuite(t *testing.T) {
	const password = "suite-admin-secret"
	dbs := openDatabases(t, filepath.Join(t.TempDir(), "d1.sqlite"))
	api, err := couchapi.New(couchapi.Config{
		Databases:          dbs,
		Users:              []couchapi.User{{Name: "admin", Password: password, Admin: true}},
		PasswordIterations: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { api.Close() })
	enginetest.EndpointSuite(t, func(t *testing.T) (engine.Endpoint, func()) {
		name := make([]byte, 6)
		_, _ = rand.Read(name)
		db, err := couchdb.New(couchdb.Config{URL: srv.URL, Database: "suite-" + hex.EncodeToString(name), User: "admin", Password: password})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Create(t.Context()); err != nil {
			db.Close()
			t.Fatal(err)
		}
		return db, func() { db.Close() }
	})
}
