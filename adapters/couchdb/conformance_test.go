package couchdb_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
)

// couchServer is a CouchDB-protocol server: its URL and an admin's
// credentials.
type couchServer struct{ url, user, password string }

// envCouch is the server the environment names (express-pouchdb in CI:
// .ci/run starts tests/couchserver). Without one it fails under CI and
// skips otherwise.
func envCouch(t *testing.T) couchServer {
	t.Helper()
	s := couchServer{os.Getenv("LIVESYNC_TEST_COUCHDB_URL"), os.Getenv("LIVESYNC_TEST_COUCHDB_USER"), os.Getenv("LIVESYNC_TEST_COUCHDB_PASSWORD")}
	if s.url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("LIVESYNC_TEST_COUCHDB_URL is not set but CI is: the CouchDB conformance tests must run in CI " +
				"(.ci/run starts tests/couchserver and sets LIVESYNC_TEST_COUCHDB_URL, _USER and _PASSWORD)")
		}
		t.Skip("LIVESYNC_TEST_COUCHDB_URL not set; run tests/run.sh, or see README.md \"Integration tests\"")
	}
	return s
}

// freshDB creates a database with a random name on s, with cfg adjusted
// by mod; the cleanup destroys it.
func freshDB(t *testing.T, s couchServer, mod func(*couchdb.Config)) (*couchdb.DB, func()) {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	cfg := couchdb.Config{URL: s.url, Database: "lsgo-suite-" + hex.EncodeToString(b), User: s.user, Password: s.password}
	if mod != nil {
		mod(&cfg)
	}
	db, err := couchdb.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := db.Create(ctx); err != nil {
		db.Close()
		t.Fatalf("create %s: %v", cfg.Database, err)
	}
	return db, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = db.Destroy(ctx)
		db.Close()
	}
}

// chunkDB is a fresh database holding chunks as plaintext chunk documents
// (type "leaf"), and its chunk source.
func chunkDB(t *testing.T, s couchServer, chunks []engine.Chunk) (engine.ChunkSource, func()) {
	t.Helper()
	db, cleanup := freshDB(t, s, nil)
	docs := make([]json.RawMessage, len(chunks))
	for i, c := range chunks {
		docs[i], _ = json.Marshal(map[string]string{"_id": c.ID, "_rev": fmt.Sprintf("1-%032x", i), "type": "leaf", "data": c.Data})
	}
	res, err := db.BulkDocs(t.Context(), docs)
	if err != nil {
		cleanup()
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error != "" {
			cleanup()
			t.Fatalf("write chunk %s: %s", r.ID, r.Error)
		}
	}
	return db.ChunkSource(nil), cleanup
}

// brokenChunks is the chunk source of an existing database reached with a
// wrong password: every request is refused.
func brokenChunks(t *testing.T, s couchServer) (engine.ChunkSource, func()) {
	t.Helper()
	db, cleanup := freshDB(t, s, nil)
	wrong, err := couchdb.New(couchdb.Config{URL: s.url, Database: db.Name(), User: s.user, Password: s.password + "-wrong"})
	if err != nil {
		cleanup()
		t.Fatal(err)
	}
	return wrong.ChunkSource(nil), func() { wrong.Close(); cleanup() }
}

func TestEndpointSuite(t *testing.T) {
	s := envCouch(t)
	enginetest.EndpointSuite(t, func(t *testing.T) (engine.Endpoint, func()) { return freshDB(t, s, nil) })
	t.Run("NoBulkGet", func(t *testing.T) {
		enginetest.EndpointSuite(t, func(t *testing.T) (engine.Endpoint, func()) {
			return freshDB(t, s, func(c *couchdb.Config) { c.NoBulkGet = true })
		})
	})
	t.Run("CookieAuth", func(t *testing.T) {
		enginetest.EndpointSuite(t, func(t *testing.T) (engine.Endpoint, func()) {
			return freshDB(t, s, func(c *couchdb.Config) { c.Auth = couchdb.AuthCookie })
		})
	})
	t.Run("RemoteEndpoint", func(t *testing.T) { // chunks first in every BulkDocs
		enginetest.EndpointSuite(t, func(t *testing.T) (engine.Endpoint, func()) {
			db, cleanup := freshDB(t, s, nil)
			return couchdb.ChunksFirst(db), cleanup
		})
	})
}

func TestChunkSourceSuite(t *testing.T) {
	s := envCouch(t)
	enginetest.ChunkSourceSuite(t,
		func(t *testing.T, chunks []engine.Chunk) (engine.ChunkSource, func()) { return chunkDB(t, s, chunks) },
		func(t *testing.T) (engine.ChunkSource, func()) { return brokenChunks(t, s) })
}
