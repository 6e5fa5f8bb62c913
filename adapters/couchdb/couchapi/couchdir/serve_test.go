package couchdir_test

import (
	"net/http/httptest"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi/couchdir"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
)

// TestServedEndpointSuite: the relay's CouchDB-protocol API over a
// database kept on the CouchDB server (couchapi → couchdir → CouchDB
// store → server) holds the engine's Endpoint contract, _local
// revisions included.
func TestServedEndpointSuite(t *testing.T) {
	srv := server(t)
	enginetest.EndpointSuite(t, func(t *testing.T) (engine.Endpoint, func()) {
		name := randomName()
		dir, err := couchdir.Open(t.Context(), couchdir.Config{Server: srv, Names: map[string]string{"vault": name}})
		if err != nil {
			t.Fatal(err)
		}
		if err := dir.Create(t.Context(), "vault"); err != nil {
			t.Fatal(err)
		}
		api, err := couchapi.New(couchapi.Config{
			Databases:          dir,
			Users:              []couchapi.User{{Name: "admin", Password: "pw", Admin: true}},
			PasswordIterations: 1000,
		})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(api)
		db, err := couchdb.New(couchdb.Config{URL: hs.URL, Database: "vault", User: "admin", Password: "pw"})
		if err != nil {
			t.Fatal(err)
		}
		return db, func() {
			db.Close()
			api.Close()
			hs.Close()
			dir.Close()
			c := srv
			c.Database = name
			if raw, err := couchdb.New(c); err == nil {
				_ = raw.Destroy(t.Context())
				raw.Close()
			}
		}
	})
}
