package couchdb_test

import (
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/negotiate/negotiatetest"
)

// TestPortSuite runs negotiate's port conformance suite on a database:
// the _local records and the version document with their _rev.
func TestPortSuite(t *testing.T) {
	s := envCouch(t)
	negotiatetest.PortSuite(t, func(t *testing.T) negotiate.Port {
		db, cleanup := freshDB(t, s, nil)
		t.Cleanup(cleanup)
		return db
	}, negotiate.CouchDBChunkRange)
	t.Run("Remote", func(t *testing.T) {
		negotiatetest.PortSuite(t, func(t *testing.T) negotiate.Port {
			db, cleanup := freshDB(t, s, nil)
			t.Cleanup(cleanup)
			r, err := couchdb.NewRemote(couchdb.Config{URL: s.url, Database: db.Name(), User: s.user, Password: s.password}, couchdb.RemoteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return r.Negotiate()
		}, negotiate.CouchDBChunkRange)
	})
}
