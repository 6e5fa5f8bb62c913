package tests

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
)

type couchEnv struct{ url, user, password string }

// couchFactory returns the CouchDB-protocol server a test runs against.
// Tests that run against more than one server take it as a parameter:
// couchServer (the environment's) or a relay's (relay.server).
type couchFactory func(t *testing.T) couchEnv

// couchServer returns the server named by the environment. Without one it
// fails under CI and skips otherwise.
func couchServer(t *testing.T) couchEnv {
	t.Helper()
	e := couchEnv{os.Getenv("LIVESYNC_TEST_COUCHDB_URL"), os.Getenv("LIVESYNC_TEST_COUCHDB_USER"), os.Getenv("LIVESYNC_TEST_COUCHDB_PASSWORD")}
	if e.url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("LIVESYNC_TEST_COUCHDB_URL is not set but CI is: the CouchDB integration tests must run in CI " +
				"(.ci/run starts tests/couchserver and sets LIVESYNC_TEST_COUCHDB_URL, _USER and _PASSWORD)")
		}
		t.Skip("LIVESYNC_TEST_COUCHDB_URL not set; run tests/run.sh, or see README.md \"Integration tests\"")
	}
	return e
}

// fixedServer is the factory of a server that is already running.
func fixedServer(e couchEnv) couchFactory {
	return func(*testing.T) couchEnv { return e }
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dbName(t *testing.T) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "lsgo-test-" + hex.EncodeToString(b)
}

// openDB opens a database on srv's server with cfg adjusted by mod; with
// create it also creates the database and destroys it at the end of the
// test.
func openDB(t *testing.T, srv couchFactory, name string, create bool, mod func(*couchdb.Config)) *couchdb.DB {
	t.Helper()
	e := srv(t)
	cfg := couchdb.Config{URL: e.url, Database: name, User: e.user, Password: e.password}
	if mod != nil {
		mod(&cfg)
	}
	db, err := couchdb.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if create {
		ctx := ctxT(t)
		if err := db.Create(ctx); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = db.Destroy(ctx)
		})
	}
	return db
}

func freshDB(t *testing.T, srv couchFactory, mod func(*couchdb.Config)) *couchdb.DB {
	return openDB(t, srv, dbName(t), true, mod)
}
