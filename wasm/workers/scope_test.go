//go:build !js

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/holdback"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/storetest"
	"github.com/livesync-go/livesync-go/wasm/workers/d1kv"
	"github.com/livesync-go/livesync-go/wasm/workers/internal/sqlitexec"
)

// countingExec counts the statements an isolate sends to D1.
type countingExec struct {
	d1kv.Exec
	queries, batches atomic.Int64
}

func (c *countingExec) Query(ctx context.Context, q string, args ...any) ([]d1kv.Row, error) {
	c.queries.Add(1)
	return c.Exec.Query(ctx, q, args...)
}

func (c *countingExec) Batch(ctx context.Context, stmts []d1kv.Stmt) error {
	c.batches.Add(1)
	return c.Exec.Batch(ctx, stmts)
}

func (c *countingExec) reset() { c.queries.Store(0); c.batches.Store(0) }

// isolate is the Worker's app over its own connection to one SQLite
// file (D1), serving over HTTP.
type isolate struct {
	t   *testing.T
	x   *countingExec
	app *app
	url string
}

const testDB = "vault"

// newD1 makes an SQLite file with the Worker's tables and returns its
// path.
func newD1(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "d1.sqlite")
	x, err := sqlitexec.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	dbs, err := d1kv.OpenDatabases(context.Background(), x, couchapi.StoreOptions(0))
	if err != nil {
		t.Fatal(err)
	}
	defer dbs.Close()
	if err := dbs.Create(context.Background(), testDB); err != nil {
		t.Fatal(err)
	}
	return path
}

func newIsolate(t *testing.T, path string, env map[string]string) *isolate {
	t.Helper()
	db, err := sqlitexec.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	vars := map[string]string{"LIVESYNC_USERS": "admin:adminpw:* alice:alicepw:" + testDB}
	for k, v := range env {
		vars[k] = v
	}
	x := &countingExec{Exec: db}
	a, err := newApp(envOf(vars), x)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return &isolate{t: t, x: x, app: a, url: srv.URL}
}

// do sends one request as alice and returns its status and body.
func (w *isolate) client() jsonClient {
	return jsonClient{t: w.t, url: w.url, user: "alice", password: "alicepw"}
}

func (w *isolate) do(method, path string, body any) (int, []byte) {
	w.t.Helper()
	return w.client().do(method, path, body)
}

func (w *isolate) ok(method, path string, body any) []byte {
	w.t.Helper()
	return w.client().ok(method, path, body)
}

// push writes docs as a replicator does (new_edits=false).
func (w *isolate) push(docs ...json.RawMessage) {
	w.t.Helper()
	b := w.ok("POST", "/"+testDB+"/_bulk_docs", map[string]any{"docs": docs, "new_edits": false})
	var res []engine.BulkDocResult
	if err := json.Unmarshal(b, &res); err != nil {
		w.t.Fatal(err)
	}
	for _, r := range res {
		if r.Error != "" {
			w.t.Fatalf("push: %+v", r)
		}
	}
}

// meta is a readable metadata revision of note id with its chunks.
func meta(id, rev string, chunks ...string) json.RawMessage {
	gen, hash, _ := strings.Cut(rev, "-")
	b, _ := json.Marshal(map[string]any{"_id": id, "_rev": rev,
		"_revisions": map[string]any{"start": json.Number(gen), "ids": []string{hash}},
		"path":       id, "children": chunks, "ctime": 1700000000000, "mtime": 1700000000000, "size": 1, "type": "plain", "eden": map[string]any{}})
	return b
}

func chunk(id string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"_id": id, "_rev": "1-c" + strings.TrimPrefix(id, "h:"), "type": "leaf", "data": "piece " + id})
	return b
}

// served reports whether note id is served, in every way a client reads
// it, failing the test when the ways disagree.
func (w *isolate) served(id, rev string) bool {
	w.t.Helper()
	code, _ := w.do("GET", "/"+testDB+"/"+url.PathEscape(id), nil)
	var changes struct {
		Results []struct{ ID string } `json:"results"`
	}
	json.Unmarshal(w.ok("GET", "/"+testDB+"/_changes", nil), &changes)
	inChanges := false
	for _, r := range changes.Results {
		inChanges = inChanges || r.ID == id
	}
	var all struct {
		Rows []struct{ ID string } `json:"rows"`
	}
	json.Unmarshal(w.ok("GET", "/"+testDB+"/_all_docs", nil), &all)
	inAll := false
	for _, r := range all.Rows {
		inAll = inAll || r.ID == id
	}
	bg := w.ok("POST", "/"+testDB+"/_bulk_get", map[string]any{"docs": []map[string]string{{"id": id, "rev": rev}}})
	inBulk := bytes.Contains(bg, []byte(`"ok"`))
	if code == 200 != inChanges || inChanges != inAll || inAll != inBulk {
		w.t.Fatalf("%s: GET %d, in _changes %v, in _all_docs %v, _bulk_get ok %v", id, code, inChanges, inAll, inBulk)
	}
	return code == 200
}

// present reports whether _revs_diff says the database has id's rev.
func (w *isolate) present(id, rev string) bool {
	w.t.Helper()
	var diff map[string]any
	json.Unmarshal(w.ok("POST", "/"+testDB+"/_revs_diff", map[string][]string{id: {rev}}), &diff)
	return diff[id] == nil
}

// rawLocal reads a _local document straight from D1, past the
// hold-back.
func rawLocal(t *testing.T, path, id string) []byte {
	t.Helper()
	x, err := sqlitexec.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	dbs, err := d1kv.NewDatabases(x, couchapi.StoreOptions(0))
	if err != nil {
		t.Fatal(err)
	}
	defer dbs.Close()
	st, err := dbs.Open(context.Background(), testDB)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.GetLocal(context.Background(), id)
	if err != nil {
		return nil
	}
	return b
}

// rawHas reports whether the database in D1 has document id, past the
// hold-back.
func rawHas(t *testing.T, path, id string) bool {
	t.Helper()
	x, err := sqlitexec.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	dbs, _ := d1kv.NewDatabases(x, couchapi.StoreOptions(0))
	defer dbs.Close()
	st, err := dbs.Open(context.Background(), testDB)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Get(context.Background(), id, store.GetOptions{})
	return err == nil
}

// Metadata pushed before its chunks stays hidden from every read, request
// after request (each a new scope over D1), while _revs_diff says it is
// stored; the request that brings the last chunk returns once the note
// is written, and the next request serves it.
func TestHoldAcrossRequests(t *testing.T) {
	path := newD1(t)
	w := newIsolate(t, path, nil)
	w.push(meta("note.md", "1-a", "h:1", "h:2"))
	for i := range 2 {
		if w.served("note.md", "1-a") {
			t.Fatalf("request %d: the note is served before its chunks", i)
		}
		if !w.present("note.md", "1-a") {
			t.Fatalf("request %d: _revs_diff says the held revision is missing", i)
		}
	}
	state := rawLocal(t, path, holdback.LocalPrefix+"purgatory")
	if !bytes.Contains(state, []byte(`"note.md"`)) {
		t.Fatalf("the purgatory's state in D1 does not name the held note: %s", state)
	}
	w.push(chunk("h:1"))
	if w.served("note.md", "1-a") || rawHas(t, path, "note.md") {
		t.Fatal("the note is served with one chunk of two")
	}
	w.push(chunk("h:2"))
	if !rawHas(t, path, "note.md") {
		t.Fatal("the push of the last chunk returned before the note was written")
	}
	if !w.served("note.md", "1-a") {
		t.Fatal("the note is not served once its chunks are stored")
	}
}

// openScope opens the database in a new scope of w, as a request does.
func (w *isolate) openScope() (context.Context, *scope, store.Store) {
	w.t.Helper()
	sc := w.app.newScope()
	ctx := withScope(context.Background(), sc)
	st, err := requestDatabases{}.Open(ctx, testDB)
	if err != nil {
		w.t.Fatal(err)
	}
	return ctx, sc, st
}

func bulk(t *testing.T, ctx context.Context, st store.Store, docs ...json.RawMessage) {
	t.Helper()
	res, err := st.BulkDocs(ctx, docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error != "" {
			t.Fatalf("BulkDocs: %+v", r)
		}
	}
}

// Two requests in flight at once, in two isolates over one D1, each
// holding a revision the other's hold-back never saw (the notes a and b,
// and two revisions of note c): none is lost, none is served early, and
// chunks pushed through a request that does not know the note held still
// release it at the next request.
func TestHoldTwoIsolates(t *testing.T) {
	path := newD1(t)
	w1, w2 := newIsolate(t, path, nil), newIsolate(t, path, nil)
	ctx1, sc1, st1 := w1.openScope()
	ctx2, sc2, st2 := w2.openScope()
	bulk(t, ctx1, st1, meta("a.md", "1-a", "h:a"), meta("c.md", "1-c", "h:c1"))
	bulk(t, ctx2, st2, meta("b.md", "1-b", "h:b"), meta("c.md", "2-c", "h:c2"))
	// The chunks of a, through the request that never saw a held.
	bulk(t, ctx2, st2, chunk("h:a"))
	if rawHas(t, path, "a.md") {
		t.Fatal("a was written by a request that did not hold it")
	}
	if err := sc1.close(ctx1); err != nil {
		t.Fatal(err)
	}
	if err := sc2.close(ctx2); err != nil {
		t.Fatal(err)
	}
	for _, w := range []*isolate{w1, w2} {
		if !w.served("a.md", "1-a") {
			t.Error("a, its chunk stored, is not served at the next request")
		}
		for _, d := range [][2]string{{"b.md", "1-b"}, {"c.md", "1-c"}, {"c.md", "2-c"}} {
			if !w.present(d[0], d[1]) {
				t.Errorf("%s %s was lost", d[0], d[1])
			}
			if w.served(d[0], d[1]) {
				t.Errorf("%s %s is served before its chunks", d[0], d[1])
			}
		}
	}
	w2.push(chunk("h:b"), chunk("h:c2"))
	if !w1.served("b.md", "1-b") {
		t.Error("b is not served once its chunk is stored")
	}
	b := w1.ok("GET", "/"+testDB+"/c.md", nil)
	if !bytes.Contains(b, []byte(`"_rev":"2-c"`)) {
		t.Errorf("c: served %s, want its newest revision 2-c", b)
	}
}

// The hold-back's own _local documents can be neither read nor written
// by a client, whichever way the id is spelt.
func TestHoldReservedLocal(t *testing.T) {
	path := newD1(t)
	w := newIsolate(t, path, nil)
	w.push(meta("note.md", "1-a", "h:1"))
	before := rawLocal(t, path, holdingIndex)
	if before == nil {
		t.Fatal("no holding index in D1")
	}
	for _, id := range []string{holdingIndex, holdback.LocalPrefix + "purgatory", holdingPrefix + "note.md"} {
		for _, p := range []string{"/" + testDB + "/_local/" + id, "/" + testDB + "/_local/" + url.PathEscape(id)} {
			if code, b := w.do("GET", p, nil); code != 404 {
				t.Errorf("GET %s: %d %s", p, code, b)
			}
			if code, b := w.do("PUT", p, map[string]any{"docs": []string{}}); code/100 == 2 {
				t.Errorf("PUT %s: %d %s", p, code, b)
			}
			if code, b := w.do("DELETE", p, nil); code/100 == 2 {
				t.Errorf("DELETE %s: %d %s", p, code, b)
			}
		}
	}
	if after := rawLocal(t, path, holdingIndex); !bytes.Equal(after, before) {
		t.Errorf("the holding index changed: %s, was %s", after, before)
	}
	if !w.present("note.md", "1-a") {
		t.Error("the held revision was lost")
	}
}

// The hold-back's documents in D1 (engine/holdback/area.go): a test
// names them to look past the hold-back.
const (
	holdingPrefix = holdback.LocalPrefix + "doc/"
	holdingIndex  = holdback.LocalPrefix + "index"
)

// openArea opens the database as a scope's hold-back sees it, over a
// connection of its own (an isolate) to the SQLite file.
func openArea(t *testing.T, path string) *areaStore {
	t.Helper()
	x, err := sqlitexec.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	dbs, err := d1kv.NewDatabases(x, couchapi.StoreOptions(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbs.Close() })
	st, err := areaDatabases{dbs: dbs, x: x}.Open(context.Background(), testDB)
	if err != nil {
		t.Fatal(err)
	}
	return st.(*areaStore)
}

// Two isolates' stores over one D1 update _local documents atomically
// (the conformance of store.LocalUpdater), and read several at once.
func TestAreaStoreLocals(t *testing.T) {
	path := newD1(t)
	one, two := openArea(t, path), openArea(t, path)
	storetest.RunLocalUpdate(t, one, two)
	ctx := context.Background()
	var ids []string
	for i := range 98 + 5 {
		id := fmt.Sprintf("l%03d", i)
		ids = append(ids, id)
		if i%2 == 0 {
			if err := one.PutLocal(ctx, id, json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := two.GetLocals(ctx, append(ids, "upd-counter"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != (98+5+1)/2+1 {
		t.Errorf("GetLocals read %d documents", len(got))
	}
	for i, id := range ids {
		if b, ok := got[id]; ok != (i%2 == 0) || ok && string(b) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Errorf("%s: %s, %v", id, b, ok)
		}
	}
}

// The D1 statements a request costs, with nothing held and with a held
// note; a GET writes nothing.
func TestHoldQueriesPerRequest(t *testing.T) {
	path := newD1(t)
	w := newIsolate(t, path, nil)
	w.push(meta("plain.md", "1-p"), chunk("h:1"))
	count := func(what, method, p string, body any) (int64, int64) {
		t.Helper()
		w.x.reset()
		w.ok(method, p, body)
		q, b := w.x.queries.Load(), w.x.batches.Load()
		t.Logf("%s: %d queries, %d write batches", what, q, b)
		return q, b
	}
	get := func(what, p string) {
		t.Helper()
		if _, writes := count(what, "GET", p, nil); writes != 0 {
			t.Errorf("%s wrote to D1 %d times", what, writes)
		}
	}
	get("GET /db/doc, nothing held", "/"+testDB+"/plain.md")
	get("GET /db/_changes, nothing held", "/"+testDB+"/_changes")
	count("POST _bulk_docs of a note held", "POST", "/"+testDB+"/_bulk_docs",
		map[string]any{"docs": []json.RawMessage{meta("held.md", "1-h", "h:2")}, "new_edits": false})
	one, _ := count("GET /db/doc, one note held", "GET", "/"+testDB+"/plain.md", nil)
	var more []json.RawMessage
	for i := range 40 {
		more = append(more, meta(fmt.Sprintf("more-%d.md", i), "1-m", fmt.Sprintf("h:m%d", i)))
	}
	w.push(more...)
	if many, _ := count("GET /db/doc, 41 notes held", "GET", "/"+testDB+"/plain.md", nil); many > one+2 {
		t.Errorf("a GET with 41 notes held costs %d queries, with one %d: the hold-back's documents are not read ahead", many, one)
	}
	get("GET /db/_changes, 41 notes held", "/"+testDB+"/_changes")
	if q, _ := count("POST _bulk_docs of a chunk releasing one of 41 notes held", "POST", "/"+testDB+"/_bulk_docs",
		map[string]any{"docs": []json.RawMessage{chunk("h:2")}, "new_edits": false}); q > 40 {
		t.Errorf("releasing one note costs %d queries: a query per note held", q)
	}
	get("GET /db/doc after the release", "/"+testDB+"/held.md")
}

// The held limits are the Worker's vars, counted across requests: a
// user's note past LIVESYNC_MAX_HELD_PER_USER is refused with a reason
// that names the var.
func TestHoldPerUserLimit(t *testing.T) {
	path := newD1(t)
	w := newIsolate(t, path, map[string]string{"LIVESYNC_MAX_HELD_PER_USER": "2"})
	w.push(meta("a.md", "1-a", "h:a"))
	w.push(meta("b.md", "1-b", "h:b"))
	b := w.ok("POST", "/"+testDB+"/_bulk_docs", map[string]any{"docs": []json.RawMessage{meta("c.md", "1-c", "h:c")}, "new_edits": false})
	var res []engine.BulkDocResult
	json.Unmarshal(b, &res)
	if len(res) != 1 || res[0].Error != holdback.TooManyHeld || !strings.Contains(res[0].Reason, "LIVESYNC_MAX_HELD_PER_USER") {
		t.Fatalf("the third note held for alice: %s", b)
	}
	w.push(chunk("h:a"))
	w.push(meta("c.md", "1-c", "h:c")) // a slot is free again
	if w.served("c.md", "1-c") || !w.present("c.md", "1-c") {
		t.Error("c is not held once a slot is free")
	}
}
