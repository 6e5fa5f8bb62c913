package couchdir_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi/couchdir"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// server is the CouchDB-protocol server the environment names; without
// one the test fails under CI and skips otherwise.
func server(t *testing.T) couchdb.Config {
	t.Helper()
	url := os.Getenv("LIVESYNC_TEST_COUCHDB_URL")
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("LIVESYNC_TEST_COUCHDB_URL is not set but CI is: the couchdir tests must run in CI (tests/run.sh starts tests/couchserver)")
		}
		t.Skip("LIVESYNC_TEST_COUCHDB_URL not set; run tests/run.sh")
	}
	return couchdb.Config{URL: url, User: os.Getenv("LIVESYNC_TEST_COUCHDB_USER"), Password: os.Getenv("LIVESYNC_TEST_COUCHDB_PASSWORD")}
}

func randomName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "lsgo-dir-" + hex.EncodeToString(b)
}

func TestDatabases(t *testing.T) {
	srv := server(t)
	ctx := t.Context()
	a, b := randomName(), randomName()
	t.Cleanup(func() {
		for _, n := range []string{a, b} {
			c := srv
			c.Database = n
			if db, err := couchdb.New(c); err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_ = db.Destroy(ctx)
				cancel()
				db.Close()
			}
		}
	})
	d, err := couchdir.Open(ctx, couchdir.Config{Server: srv, Names: map[string]string{"vault": a, "notes": b}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if names, _ := d.List(ctx); !reflect.DeepEqual(names, []string{"notes", "vault"}) {
		t.Fatalf("List = %v", names)
	}
	if _, err := d.Open(ctx, "vault"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Open before Create: %v, want ErrNotFound", err)
	}
	if err := d.Create(ctx, "vault"); err != nil {
		t.Fatal(err)
	}
	if err := d.Create(ctx, "vault"); !errors.Is(err, couchapi.ErrExists) {
		t.Fatalf("second Create: %v, want ErrExists", err)
	}
	if err := d.Create(ctx, "other"); !errors.Is(err, couchapi.ErrIllegalName) {
		t.Fatalf("Create of an unconfigured name: %v, want ErrIllegalName", err)
	}
	if err := d.Delete(ctx, "vault"); !errors.Is(err, couchapi.ErrForbidden) {
		t.Fatalf("Delete: %v, want ErrForbidden", err)
	}
	if _, err := d.Open(ctx, "other"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Open of an unconfigured name: %v", err)
	}
	st, err := d.Open(ctx, "vault")
	if err != nil {
		t.Fatal(err)
	}
	if st2, _ := d.Open(ctx, "vault"); st2 != st {
		t.Fatal("a second Open gave another store")
	}
	if _, err := st.Put(ctx, []byte(`{"_id":"n","v":1}`)); err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.Name != "vault" || info.DocCount != 1 {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	u1, err := d.ServerUUID(ctx)
	if err != nil || u1 == "" {
		t.Fatalf("ServerUUID = %q, %v", u1, err)
	}
	d2, _ := couchdir.Open(ctx, couchdir.Config{Server: srv, Names: map[string]string{"x": b}})
	if u2, err := d2.ServerUUID(ctx); err != nil || u2 != u1 {
		t.Fatalf("another Databases on the server: uuid %q, %v; want %q", u2, err, u1)
	}
	d2.Close()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Info(ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("a store after Close: %v", err)
	}
	if _, err := d.Open(ctx, "vault"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Open after Close: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	d, err := couchdir.Open(t.Context(), couchdir.Config{Server: couchdb.Config{URL: "http://127.0.0.1:1"}, Names: map[string]string{"vault": "vault"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Open(t.Context(), "vault"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open with the server down: %v, want ErrUnavailable", err)
	}
	if _, err := d.ServerUUID(t.Context()); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("ServerUUID with the server down: %v, want ErrUnavailable", err)
	}
	if err := d.Create(t.Context(), "vault"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Create with the server down: %v, want ErrUnavailable", err)
	}
}
