package couchapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi/couchdir"
)

// upstreamCounter is a proxy in front of the CouchDB server that counts
// the requests made through it, leaving out _local documents (the
// hold-back's own state, saved on its schedule).
type upstreamCounter struct {
	url string
	mu  sync.Mutex
	n   map[string]int
}

func newUpstreamCounter(t *testing.T, target string) *upstreamCounter {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	c := &upstreamCounter{n: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/_local/") {
			kind := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
			if !strings.HasPrefix(kind, "_") {
				kind = "{doc}"
			}
			kind = r.Method + " " + kind
			c.mu.Lock()
			c.n[kind]++
			c.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// take returns the requests counted since the last take, by kind, and
// their total.
func (c *upstreamCounter) take() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, total := c.n, 0
	for _, v := range n {
		total += v
	}
	c.n = map[string]int{}
	return n, total
}

// relayOverCouch serves the database "vault", kept in a fresh database on
// the CouchDB server of the environment, as the relay does ([databases.
// store] kind = "couchdb", through the hold-back), with the server
// reached through an upstreamCounter. It returns the relay's URL, the
// database (reached directly) and the counter.
func relayOverCouch(t *testing.T) (string, *couchdb.DB, *upstreamCounter) {
	t.Helper()
	server, user, pass := os.Getenv("LIVESYNC_TEST_COUCHDB_URL"), os.Getenv("LIVESYNC_TEST_COUCHDB_USER"), os.Getenv("LIVESYNC_TEST_COUCHDB_PASSWORD")
	if server == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("LIVESYNC_TEST_COUCHDB_URL is not set but CI is (.ci/run starts tests/couchserver)")
		}
		t.Skip("LIVESYNC_TEST_COUCHDB_URL not set")
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "lsgo-batch-" + hex.EncodeToString(b)
	db, err := couchdb.New(couchdb.Config{URL: server, Database: name, User: user, Password: pass})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Create(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = db.Destroy(ctx)
		db.Close()
	})
	counter := newUpstreamCounter(t, server)
	dirs, err := couchdir.Open(t.Context(), couchdir.Config{
		Server: couchdb.Config{URL: counter.url, User: user, Password: pass},
		Names:  map[string]string{"vault": name},
	})
	if err != nil {
		t.Fatal(err)
	}
	held := couchapi.NewHeld(dirs, couchapi.HeldConfig{})
	api, err := couchapi.New(couchapi.Config{
		Databases:          held,
		Users:              []couchapi.User{{Name: "admin", Password: suitePassword, Admin: true}},
		PasswordIterations: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(func() { dirs.Close() })
	t.Cleanup(func() { held.Close() })
	t.Cleanup(srv.Close)
	t.Cleanup(func() { api.Close() })
	return srv.URL, db, counter
}

// post sends body to the relay as the admin and decodes the answer.
func post(t *testing.T, relay, path string, body any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, relay+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("admin", suitePassword)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, raw)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("POST %s: %v: %s", path, err, raw)
	}
	return out
}

// TestRelayOverCouchDBReadsInBatches: a _bulk_get (as PouchDB sends it,
// revs=true&latest=true) and an _all_docs?keys&include_docs (LiveSync's
// chunk fetch) through a relay whose database is on a CouchDB server
// cost the same few upstream requests for 1, 10, 100 or 300 documents.
func TestRelayOverCouchDBReadsInBatches(t *testing.T) {
	relay, db, counter := relayOverCouch(t)
	const n = 300
	docs := make([]json.RawMessage, 0, n+2)
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("doc-%03d", i)
		docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":%q,"_rev":"1-%032x","i":%d}`, ids[i], i, i)))
	}
	// A conflict, and a deleted document.
	docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"doc-000","_rev":"1-%032x","other":true}`, 99999)))
	docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"doc-001","_rev":"2-%032x","_revisions":{"start":2,"ids":["%032x","%032x"]},"_deleted":true}`, 88888, 88888, 1)))
	if res, err := db.BulkDocs(t.Context(), docs); err != nil {
		t.Fatal(err)
	} else {
		for _, r := range res {
			if r.Error != "" {
				t.Fatalf("write %s: %s", r.ID, r.Error)
			}
		}
	}
	post(t, relay, "/vault/_all_docs", map[string]any{"keys": []string{"warm-up"}}) // opens the database
	counter.take()
	for _, k := range []int{1, 10, 100, n} {
		refs := make([]map[string]string, k)
		for i := range k {
			refs[i] = map[string]string{"id": ids[i], "rev": fmt.Sprintf("1-%032x", i)}
		}
		got := post(t, relay, "/vault/_bulk_get?revs=true&latest=true", map[string]any{"docs": refs})
		kinds, total := counter.take()
		results, _ := got["results"].([]any)
		if len(results) != k {
			t.Fatalf("_bulk_get of %d: %d results", k, len(results))
		}
		for i, r := range results {
			d, _ := r.(map[string]any)["docs"].([]any)
			if i == 1 {
				continue // doc-001's 1- is no leaf: latest=true answers its deleted leaf
			}
			if len(d) != 1 || d[0].(map[string]any)["ok"] == nil {
				t.Fatalf("_bulk_get of %d: result %d = %v", k, i, r)
			}
		}
		t.Logf("_bulk_get of %d documents: %d upstream requests %v", k, total, kinds)
		// One _bulk_get of the named revisions.
		if total != 1 {
			t.Errorf("_bulk_get of %d documents made %d upstream requests %v; want 1", k, total, kinds)
		}

		keys := append([]string{"absent"}, ids[:k]...)
		got = post(t, relay, "/vault/_all_docs?include_docs=true&conflicts=true", map[string]any{"keys": keys})
		kinds, total = counter.take()
		rows, _ := got["rows"].([]any)
		if len(rows) != k+1 {
			t.Fatalf("_all_docs of %d keys: %d rows", k+1, len(rows))
		}
		t.Logf("_all_docs of %d keys: %d upstream requests %v", k+1, total, kinds)
		// One _all_docs?keys, and the database's information for
		// total_rows.
		if total != 2 || kinds["POST _all_docs"] != 1 {
			t.Errorf("_all_docs of %d keys made %d upstream requests %v; want 2", k+1, total, kinds)
		}
	}
	// Every leaf (references without rev), and latest=true for revisions
	// that are no leaf: the leaves of all the documents in two requests.
	refs := make([]map[string]string, n)
	for i := range n {
		refs[i] = map[string]string{"id": ids[i]}
	}
	got := post(t, relay, "/vault/_bulk_get?revs=true", map[string]any{"docs": refs})
	kinds, total := counter.take()
	results, _ := got["results"].([]any)
	if d, _ := results[0].(map[string]any)["docs"].([]any); len(results) != n || len(d) != 2 {
		t.Fatalf("_bulk_get of every leaf: %d results, doc-000 has %d leaves; want %d, 2", len(results), len(d), n)
	}
	t.Logf("_bulk_get of every leaf of %d documents: %d upstream requests %v", n, total, kinds)
	if want := (n+99)/100 + 1; total > want {
		t.Errorf("_bulk_get of every leaf of %d documents made %d upstream requests %v; want at most %d", n, total, kinds, want)
	}
}
