package tests

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
)

type couchEnv struct{ url, user, password string }

// servers maps a top-level test's name to the server it and its subtests
// use instead of the environment's (the relay tests run these suites
// against an in-process relay: see useServer in relay_env_test.go).
var servers sync.Map

// couchServer returns the server named by the environment. Without one it
// fails under CI and skips otherwise.
func couchServer(t *testing.T) couchEnv {
	t.Helper()
	if e, ok := servers.Load(strings.SplitN(t.Name(), "/", 2)[0]); ok {
		return e.(couchEnv)
	}
	e := couchEnv{os.Getenv("LIVESYNC_TEST_COUCHDB_URL"), os.Getenv("LIVESYNC_TEST_COUCHDB_USER"), os.Getenv("LIVESYNC_TEST_COUCHDB_PASSWORD")}
	if e.url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("LIVESYNC_TEST_COUCHDB_URL is not set but CI is: the CouchDB integration tests must run in CI " +
				"(.ci/run starts tests/couchserver and sets LIVESYNC_TEST_COUCHDB_URL, _USER and _PASSWORD)")
		}
		t.Skip("LIVESYNC_TEST_COUCHDB_URL not set; run scripts/test, or see README.md \"Integration tests\"")
	}
	return e
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

// openDB opens a database with cfg adjusted by mod; with create it also
// creates the database and destroys it at the end of the test.
func openDB(t *testing.T, name string, create bool, mod func(*couchdb.Config)) *couchdb.DB {
	t.Helper()
	e := couchServer(t)
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

func freshDB(t *testing.T, mod func(*couchdb.Config)) *couchdb.DB {
	return openDB(t, dbName(t), true, mod)
}
