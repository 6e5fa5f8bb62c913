package couchdb_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/storetest"
)

// isApacheCouchDB reports whether s is Apache CouchDB rather than the
// CouchDB-protocol test server (express-pouchdb).
func isApacheCouchDB(t *testing.T, s couchServer) bool {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.url+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(s.user, s.password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var root struct {
		CouchDB string `json:"couchdb"`
		Vendor  struct {
			Name string `json:"name"`
		} `json:"vendor"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&root); err != nil {
		t.Fatal(err)
	}
	return root.CouchDB != "" && strings.Contains(strings.ToLower(root.Vendor.Name), "apache")
}

func randomDBName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "lsgo-store-" + hex.EncodeToString(b)
}

// storeProfile is where the CouchDB store differs from store.Open's:
// CouchDB keeps every body until compaction and its revs limit is 1000;
// the test server (PouchDB 7 through express-pouchdb) also has no
// _revs_limit, takes any since, and makes random revisions.
func storeProfile(apache bool) storetest.Profile {
	p := storetest.Profile{KeepsAllBodies: true, DefaultRevsLimit: 1000}
	if !apache {
		p.FixedRevsLimit, p.LenientSince, p.RandomRevs = true, true, true
		p.RevsDiffByBody, p.SelectorIDOrder, p.RevsInfoNoDeleted = true, true, true
		p.ManyLeaves = 200
	}
	return p
}

// openStore opens a Store over a fresh database on s; the cleanup
// destroys the database.
func openStore(t testing.TB, s couchServer, name string) *couchdb.Store {
	t.Helper()
	cfg := couchdb.Config{URL: s.url, Database: name, User: s.user, Password: s.password}
	st, err := couchdb.OpenStore(cfg, couchdb.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := st.DB().Create(ctx); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	t.Cleanup(func() {
		st.Close()
		db, err := couchdb.New(cfg)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = db.Destroy(ctx)
		db.Close()
	})
	return st
}

func TestStoreConformance(t *testing.T) {
	s := envCouch(t)
	p := storeProfile(isApacheCouchDB(t, s))
	storetest.RunProfile(t, func(t *testing.T, opts store.Options) store.Store {
		st := openStore(t, s, randomDBName())
		if opts.RevsLimit != 0 {
			if err := st.SetRevsLimit(t.Context(), opts.RevsLimit); err != nil {
				t.Fatalf("SetRevsLimit(%d): %v", opts.RevsLimit, err)
			}
		}
		return st
	}, p)
}

func TestStoreLocalUpdateTwoStores(t *testing.T) {
	s := envCouch(t)
	a := openStore(t, s, randomDBName())
	b, err := couchdb.OpenStore(couchdb.Config{URL: s.url, Database: a.DB().Name(), User: s.user, Password: s.password}, couchdb.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	storetest.RunLocalUpdate(t, a, b)
}

// benchServer is envCouch for benchmarks.
func benchServer(b *testing.B) couchServer {
	s := couchServer{os.Getenv("LIVESYNC_TEST_COUCHDB_URL"), os.Getenv("LIVESYNC_TEST_COUCHDB_USER"), os.Getenv("LIVESYNC_TEST_COUCHDB_PASSWORD")}
	if s.url == "" {
		b.Skip("LIVESYNC_TEST_COUCHDB_URL not set")
	}
	return s
}

// The shared store benchmarks over the CouchDB store (compare with
// engine/store/boltstore's BenchmarkBulkDocs and BenchmarkChanges*).
func BenchmarkStoreBulkDocs(b *testing.B) {
	s := benchServer(b)
	storetest.BenchBulkDocs(b, func(b *testing.B) store.Store { return openStore(b, s, randomDBName()) })
}

func BenchmarkStoreChanges(b *testing.B) {
	s := benchServer(b)
	storetest.BenchChanges(b, func(b *testing.B) store.Store { return openStore(b, s, randomDBName()) }, "")
}

func BenchmarkStoreChangesSelector(b *testing.B) {
	s := benchServer(b)
	storetest.BenchChanges(b, func(b *testing.B) store.Store { return openStore(b, s, randomDBName()) }, `{"type":{"$ne":"leaf"}}`)
}

// TestStoreLocalKeepsOwnRev: a _local document's own _id and _rev (the
// "0-N" couchapi serves, kept in the body) come back as written, not
// replaced by the server's.
func TestStoreLocalKeepsOwnRev(t *testing.T) {
	s := envCouch(t)
	st := openStore(t, s, randomDBName())
	for _, doc := range []string{
		`{"_id":"_local/cp","_rev":"0-7","last_seq":"5"}`,
		`{"b":1,"_rev":"0-8","a":{"x":[1,2]}}`,
		`{}`,
	} {
		if err := st.PutLocal(t.Context(), "cp", json.RawMessage(doc)); err != nil {
			t.Fatal(err)
		}
		got, err := st.GetLocal(t.Context(), "cp")
		if err != nil || string(got) != doc {
			t.Fatalf("GetLocal = %s, %v; want %s", got, err, doc)
		}
	}
}
