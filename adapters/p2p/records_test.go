//go:build !js

package p2p

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// The relay keeps one database for its CouchDB-protocol clients and its
// peers: a record written over HTTP reads back through StoreRecords with
// the same revision, and a write through StoreRecords at that revision
// reads back over HTTP, for the _local records and the version document.
func TestStoreRecordsMatchCouchAPI(t *testing.T) {
	ctx := t.Context()
	dbs := couchapi.NewMemoryDatabases()
	t.Cleanup(func() { dbs.Close() })
	srv, err := couchapi.New(couchapi.Config{Databases: dbs, PasswordIterations: 1000,
		Users: []couchapi.User{{Name: "admin", Password: "secret", Admin: true}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	if err := dbs.Create(ctx, "vault"); err != nil {
		t.Fatal(err)
	}
	st, err := dbs.Open(ctx, "vault")
	if err != nil {
		t.Fatal(err)
	}
	db, err := couchdb.New(couchdb.Config{URL: hs.URL, Database: "vault", User: "admin", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	peer := StoreRecords(st, "")
	for _, r := range []negotiate.Record{negotiate.RecordMilestone, negotiate.RecordSyncParameters, negotiate.RecordVersion} {
		v1, err := db.Write(ctx, r, json.RawMessage(`{"probe":"http"}`), "")
		if err != nil {
			t.Fatalf("%s over HTTP: %v", r, err)
		}
		raw, v, err := peer.Read(ctx, r)
		if err != nil || v != v1 || probe(t, raw) != "http" {
			t.Fatalf("%s through StoreRecords: %s at %q, %v; want http at %q", r, raw, v, err, v1)
		}
		v2, err := peer.Write(ctx, r, json.RawMessage(`{"probe":"peer"}`), v)
		if err != nil {
			t.Fatalf("%s through StoreRecords: %v", r, err)
		}
		raw, v, err = db.Read(ctx, r)
		if err != nil || v != v2 || probe(t, raw) != "peer" {
			t.Fatalf("%s over HTTP: %s at %q, %v; want peer at %q", r, raw, v, err, v2)
		}
		if _, err := db.Write(ctx, r, json.RawMessage(`{"probe":"stale"}`), v1); err == nil {
			t.Fatalf("%s: HTTP accepted a write at the revision StoreRecords replaced", r)
		}
	}
}

func probe(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v struct{ Probe string }
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("record %s: %v", raw, err)
	}
	return v.Probe
}

// A peer's record write cannot delete the record ("_deleted") nor set
// another field of CouchDB's own; the record is left as it was.
func TestStoreRecordsRefuseDeletion(t *testing.T) {
	st := memStore(t)
	for _, prefix := range []string{"", "livesync-go/p2p/g/"} {
		recs := StoreRecords(st, prefix)
		for _, r := range []negotiate.Record{negotiate.RecordSyncParameters, negotiate.RecordVersion} {
			v, err := recs.Write(t.Context(), r, json.RawMessage(`{"type":"x","n":1}`), "")
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range []string{`{"_deleted":true}`, `{"type":"x","_attachments":{}}`} {
				if _, err := recs.Write(t.Context(), r, json.RawMessage(bad), v); !errors.Is(err, engine.ErrMalformed) {
					t.Fatalf("%q%s: writing %s: %v; want ErrMalformed", prefix, r, bad, err)
				}
			}
			if raw, v2, err := recs.Read(t.Context(), r); err != nil || v2 != v || !strings.Contains(string(raw), `"n":1`) {
				t.Fatalf("%q%s after refused writes: %s at %q, %v", prefix, r, raw, v2, err)
			}
		}
	}
}
