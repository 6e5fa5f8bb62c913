package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	kivik "github.com/go-kivik/kivik/v4"
	kivikcouch "github.com/go-kivik/kivik/v4/couchdb"
)

// kivikDB returns a kivik client of the test server (Basic auth) and a
// fresh database on it, destroyed when the test ends. These tests use
// kivik directly, as a third-party CouchDB client would, against
// express-pouchdb and the relay alike.
func kivikDB(t *testing.T, srv couchFactory) (*kivik.Client, *kivik.DB) {
	t.Helper()
	e := srv(t)
	c, err := kivik.New("couch", e.url, kivikcouch.BasicAuth(e.user, e.password), kivikcouch.OptionNoRequestCompression())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := ctxT(t)
	name := dbName(t)
	if err := c.CreateDB(ctx, name); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.DestroyDB(ctx, name)
	})
	return c, c.DB(name)
}

func TestKivikDocuments(t *testing.T) { testKivikDocuments(t, couchServer) }

func testKivikDocuments(t *testing.T, srv couchFactory) {
	c, db := kivikDB(t, srv)
	ctx := ctxT(t)
	if ok, err := c.DBExists(ctx, db.Name()); err != nil || !ok {
		t.Fatalf("DBExists: %v %v", ok, err)
	}
	if ok, _ := c.DBExists(ctx, db.Name()+"-nope"); ok {
		t.Fatal("DBExists of a missing database")
	}
	if err := c.CreateDB(ctx, db.Name()); kivik.HTTPStatus(err) != http.StatusPreconditionFailed {
		t.Fatalf("create twice: %v", err)
	}
	if v, err := c.Version(ctx); err != nil || !strings.HasPrefix(v.Version, "") {
		t.Fatalf("version: %v %v", v, err)
	}
	if names, err := c.AllDBs(ctx); err != nil || !slices.Contains(names, db.Name()) {
		t.Fatalf("AllDBs %v %v", names, err)
	}
	// Ids with characters that need escaping, _design documents included.
	for _, id := range []string{"notes/a b+c%d.md", "日本語", "h:+x", "_design/ddoc"} {
		rev, err := db.Put(ctx, id, map[string]any{"v": id})
		if err != nil {
			t.Fatalf("put %q: %v", id, err)
		}
		var got map[string]any
		if err := db.Get(ctx, id).ScanDoc(&got); err != nil || got["v"] != id || got["_rev"] != rev {
			t.Fatalf("get %q: %v %v", id, got, err)
		}
		if _, err := db.Put(ctx, id, map[string]any{"v": 2}); kivik.HTTPStatus(err) != http.StatusConflict {
			t.Fatalf("put %q without rev: %v, want 409", id, err)
		}
		rev2, err := db.Put(ctx, id, map[string]any{"_rev": rev, "v": 2})
		if err != nil || !strings.HasPrefix(rev2, "2-") {
			t.Fatalf("update %q: %v %v", id, rev2, err)
		}
		if _, err := db.Delete(ctx, id, rev); kivik.HTTPStatus(err) != http.StatusConflict {
			t.Fatalf("delete %q with a stale rev: %v", id, err)
		}
		if _, err := db.Delete(ctx, id, rev2); err != nil {
			t.Fatalf("delete %q: %v", id, err)
		}
		if err := db.Get(ctx, id).Err(); kivik.HTTPStatus(err) != http.StatusNotFound {
			t.Fatalf("get deleted %q: %v", id, err)
		}
	}
	// _local documents through kivik.
	rev, err := db.Put(ctx, "_local/cp", map[string]any{"last_seq": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Put(ctx, "_local/cp", map[string]any{"_rev": rev, "last_seq": "2"}); err != nil {
		t.Fatalf("update _local: %v", err)
	}
	var local map[string]any
	if err := db.Get(ctx, "_local/cp").ScanDoc(&local); err != nil || local["last_seq"] != "2" {
		t.Fatalf("get _local: %v %v", local, err)
	}
	stats, err := db.Stats(ctx)
	if err != nil || stats.Name != db.Name() {
		t.Fatalf("stats %+v %v", stats, err)
	}
}

func TestKivikChangesAndAllDocs(t *testing.T) { testKivikChangesAndAllDocs(t, couchServer) }

func testKivikChangesAndAllDocs(t *testing.T, srv couchFactory) {
	_, db := kivikDB(t, srv)
	ctx := ctxT(t)
	docs := []any{
		map[string]any{"_id": "a", "type": "plain"},
		map[string]any{"_id": "b", "type": "plain"},
		map[string]any{"_id": "h:1", "type": "leaf", "data": "x"},
	}
	res, err := db.BulkDocs(ctx, docs)
	if err != nil || len(res) != 3 {
		t.Fatalf("bulk docs %v %v", res, err)
	}
	ch := db.Changes(ctx, kivik.Param("include_docs", true), kivik.Param("style", "all_docs"))
	var ids []string
	for ch.Next() {
		ids = append(ids, ch.ID())
		var d map[string]any
		if err := ch.ScanDoc(&d); err != nil || d["_id"] != ch.ID() {
			t.Fatalf("change doc %v %v", d, err)
		}
		if len(ch.Changes()) != 1 {
			t.Fatalf("revs %v", ch.Changes())
		}
	}
	if err := ch.Err(); err != nil {
		t.Fatal(err)
	}
	meta, err := ch.Metadata()
	if err != nil || meta.LastSeq == "" {
		t.Fatalf("changes metadata %+v %v", meta, err)
	}
	slices.Sort(ids)
	if strings.Join(ids, ",") != "a,b,h:1" {
		t.Fatalf("changes ids %v", ids)
	}
	// Longpoll from the end returns the next change.
	go func() {
		time.Sleep(200 * time.Millisecond)
		_, _ = db.Put(context.Background(), "late", map[string]any{"type": "plain"})
	}()
	lp := db.Changes(ctx, kivik.Param("feed", "longpoll"), kivik.Param("since", meta.LastSeq), kivik.Param("timeout", 10000))
	var late []string
	for lp.Next() {
		late = append(late, lp.ID())
	}
	if lp.Err() != nil || strings.Join(late, ",") != "late" {
		t.Fatalf("longpoll %v %v", late, lp.Err())
	}
	// AllDocs by keys (POST) with a missing key, and by range.
	rs := db.AllDocs(ctx, kivik.Param("keys", []string{"b", "nope", "a"}), kivik.Param("include_docs", true))
	var got []string
	for rs.Next() {
		id, _ := rs.ID()
		k, _ := rs.Key()
		if id == "" {
			got = append(got, "!"+strings.Trim(k, `"`))
			continue
		}
		var d map[string]any
		if err := rs.ScanDoc(&d); err != nil || d["_id"] != id {
			t.Fatalf("all_docs doc %v %v", d, err)
		}
		got = append(got, id)
	}
	if strings.Join(got, ",") != "b,!nope,a" {
		t.Fatalf("all_docs keys %v (%v)", got, rs.Err())
	}
	rs = db.AllDocs(ctx, kivik.Param("startkey", "a"), kivik.Param("endkey", "b"))
	got = got[:0]
	for rs.Next() {
		id, _ := rs.ID()
		got = append(got, id)
	}
	if strings.Join(got, ",") != "a,b" {
		t.Fatalf("all_docs range %v (%v)", got, rs.Err())
	}
}

func TestKivikReplicationCalls(t *testing.T) { testKivikReplicationCalls(t, couchServer) }

func testKivikReplicationCalls(t *testing.T, srv couchFactory) {
	_, db := kivikDB(t, srv)
	ctx := ctxT(t)
	repl := []any{
		json.RawMessage(`{"_id":"d","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"v":"b"}`),
		json.RawMessage(`{"_id":"d","_rev":"2-c","_revisions":{"start":2,"ids":["c","a"]},"v":"c"}`),
	}
	if _, err := db.BulkDocs(ctx, repl, kivik.Param("new_edits", false)); err != nil {
		t.Fatalf("bulk docs new_edits=false: %v", err)
	}
	// RevsDiff.
	rd := db.RevsDiff(ctx, map[string][]string{"d": {"2-b", "3-x"}, "e": {"1-y"}})
	missing := map[string]string{}
	for rd.Next() {
		id, _ := rd.ID()
		var v struct{ Missing []string }
		if err := rd.ScanValue(&v); err != nil {
			t.Fatal(err)
		}
		missing[id] = strings.Join(v.Missing, ",")
	}
	if len(missing) != 2 || missing["d"] != "3-x" || missing["e"] != "1-y" {
		t.Fatalf("revs diff %v (%v)", missing, rd.Err())
	}
	// BulkGet: both conflict leaves, and a missing revision.
	bg := db.BulkGet(ctx, []kivik.BulkGetReference{{ID: "d", Rev: "2-b"}, {ID: "d", Rev: "2-c"}, {ID: "d", Rev: "9-z"}}, kivik.Param("revs", true))
	var revs []string
	var misses int
	for bg.Next() {
		var d struct {
			Rev       string         `json:"_rev"`
			Revisions map[string]any `json:"_revisions"`
		}
		if err := bg.ScanDoc(&d); err != nil {
			misses++
			continue
		}
		if d.Revisions == nil {
			t.Fatalf("bulk get without _revisions")
		}
		revs = append(revs, d.Rev)
	}
	if strings.Join(revs, ",") != "2-b,2-c" {
		t.Fatalf("bulk get revs %v, misses %d (%v)", revs, misses, bg.Err())
	}
	// OpenRevs (multipart/mixed): both leaves; an unknown revision is a row error.
	or := db.OpenRevs(ctx, "d", []string{"2-b", "2-c", "5-q"}, kivik.Param("revs", true))
	var found, missingRows int
	for or.Next() {
		var d map[string]any
		if err := or.ScanDoc(&d); err != nil {
			if kivik.HTTPStatus(err) != http.StatusNotFound {
				t.Fatalf("open revs row: %v", err)
			}
			missingRows++
			continue
		}
		found++
	}
	if found != 2 || missingRows != 1 {
		t.Fatalf("open revs: %d found, %d missing (%v)", found, missingRows, or.Err())
	}
	var winner map[string]any
	if err := db.Get(ctx, "d", kivik.Param("conflicts", true)).ScanDoc(&winner); err != nil || winner["_rev"] != "2-c" {
		t.Fatalf("winner %v %v", winner, err)
	}
	if c, _ := winner["_conflicts"].([]any); len(c) != 1 || c[0] != "2-b" {
		t.Fatalf("conflicts %v", winner["_conflicts"])
	}
}

func TestKivikSessions(t *testing.T) { testKivikSessions(t, couchServer) }

func testKivikSessions(t *testing.T, srv couchFactory) {
	e := srv(t)
	ctx := ctxT(t)
	c, err := kivik.New("couch", e.url, kivikcouch.CookieAuth(e.user, e.password))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Session(ctx)
	if err != nil || s.Name != e.user {
		t.Fatalf("cookie session %+v %v", s, err)
	}
	if _, err := c.AllDBs(ctx); err != nil {
		t.Fatalf("AllDBs with a session cookie: %v", err)
	}
	bad, err := kivik.New("couch", e.url, kivikcouch.BasicAuth(e.user, e.password+"-wrong"))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := bad.AllDBs(ctx); kivik.HTTPStatus(err) != http.StatusUnauthorized {
		t.Fatalf("wrong password: %v, want 401", err)
	}
}
