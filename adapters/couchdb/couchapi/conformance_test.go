package couchapi_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi/boltdir"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

// The relay's CouchDB-protocol server, over bbolt databases as the relay
// runs it, served on 127.0.0.1 and reached through the CouchDB adapter:
// the engine's ports hold against it as against CouchDB.

const suitePassword = "suite-admin-secret"

// startServer serves a relay API with one admin over databases in a
// temporary directory until the test ends, and returns its URL.
func startServer(t *testing.T) string {
	t.Helper()
	dbs, err := boltdir.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbs.Close() })
	api, err := couchapi.New(couchapi.Config{
		Databases:          dbs,
		Users:              []couchapi.User{{Name: "admin", Password: suitePassword, Admin: true}},
		PasswordIterations: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { api.Close() }) // first: ends open feeds
	return srv.URL
}

// freshDB creates a database with a random name on the server at url.
func freshDB(t *testing.T, url string, mod func(*couchdb.Config)) (*couchdb.DB, func()) {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	cfg := couchdb.Config{URL: url, Database: "suite-" + hex.EncodeToString(b), User: "admin", Password: suitePassword}
	if mod != nil {
		mod(&cfg)
	}
	db, err := couchdb.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Create(t.Context()); err != nil {
		db.Close()
		t.Fatalf("create %s: %v", cfg.Database, err)
	}
	return db, func() { db.Close() }
}

func TestEndpointSuite(t *testing.T) {
	url := startServer(t)
	enginetest.EndpointSuite(t, func(t *testing.T) (engine.Endpoint, func()) { return freshDB(t, url, nil) })
	t.Run("NoBulkGet", func(t *testing.T) {
		enginetest.EndpointSuite(t, func(t *testing.T) (engine.Endpoint, func()) {
			return freshDB(t, url, func(c *couchdb.Config) { c.NoBulkGet = true })
		})
	})
}

func TestChunkSourceSuite(t *testing.T) {
	url := startServer(t)
	enginetest.ChunkSourceSuite(t,
		func(t *testing.T, chunks []engine.Chunk) (engine.ChunkSource, func()) {
			db, cleanup := freshDB(t, url, nil)
			docs := make([]json.RawMessage, len(chunks))
			for i, c := range chunks {
				docs[i], _ = json.Marshal(map[string]string{"_id": c.ID, "_rev": fmt.Sprintf("1-%032x", i), "type": "leaf", "data": c.Data})
			}
			res, err := db.BulkDocs(t.Context(), docs)
			for _, r := range res {
				if err == nil && r.Error != "" {
					err = fmt.Errorf("%s: %s", r.ID, r.Error)
				}
			}
			if err != nil {
				cleanup()
				t.Fatalf("write chunks: %v", err)
			}
			return db.ChunkSource(nil), cleanup
		},
		func(t *testing.T) (engine.ChunkSource, func()) { // the server is down
			down := httptest.NewServer(nil)
			db, err := couchdb.New(couchdb.Config{URL: down.URL, Database: "gone", User: "admin", Password: suitePassword})
			down.Close()
			if err != nil {
				t.Fatal(err)
			}
			return db.ChunkSource(nil), func() { db.Close() }
		})
}
