package couchapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

func TestWelcomeUpAndHeaders(t *testing.T) {
	_, c := newTestServer(t, func(cfg *Config) { cfg.UUID = "0123456789abcdef0123456789abcdef" })
	r := c.anon().must(http.StatusOK, http.MethodGet, "/", nil)
	m := r.json(t)
	if m["couchdb"] != "Welcome" || m["version"] != CouchDBVersion || m["uuid"] != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("welcome = %s", r.body)
	}
	if v, _ := m["vendor"].(map[string]any); v["name"] != "livesync-relay" {
		t.Fatalf("vendor = %v", m["vendor"])
	}
	// LiveSync's wizard parses the version from the Server header.
	if got := r.header.Get("Server"); !strings.HasPrefix(got, "CouchDB/3.5.0") {
		t.Fatalf("Server header %q", got)
	}
	if r.header.Get("X-Couch-Request-Id") == "" || r.header.Get("Cache-Control") != "must-revalidate" {
		t.Fatalf("headers %v", r.header)
	}
	if m := c.anon().must(http.StatusOK, http.MethodGet, "/_up", nil).json(t); m["status"] != "ok" {
		t.Fatalf("_up = %v", m)
	}
	u := c.must(http.StatusOK, http.MethodGet, "/_uuids?count=3", nil).json(t)
	if l, _ := u["uuids"].([]any); len(l) != 3 || len(str(l[0])) != 32 {
		t.Fatalf("_uuids = %v", u)
	}
	wantError(t, c.do(http.MethodGet, "/_uuids?count=1001", nil), 400, "bad_request")
	wantError(t, c.do(http.MethodGet, "/_nothing", nil), 404, "not_found")
	r = c.do(http.MethodPost, "/", nil)
	wantError(t, r, 405, "method_not_allowed")
	if r.header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("Allow = %q", r.header.Get("Allow"))
	}
}

func TestDatabaseLifecycle(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	wantError(t, c.do(http.MethodPut, "/a", nil), 412, "file_exists")
	for _, bad := range []string{"/Abc", "/1abc", "/a.b", "/a%20b", "/%C3%A9"} {
		wantError(t, c.do(http.MethodPut, bad, nil), 400, "illegal_database_name")
	}
	c.must(http.StatusCreated, http.MethodPut, "/b$c()+-_1", nil)
	info := c.must(http.StatusOK, http.MethodGet, "/a", nil).json(t)
	for _, k := range []string{"db_name", "update_seq", "doc_count", "doc_del_count", "instance_start_time", "sizes", "purge_seq"} {
		if _, ok := info[k]; !ok {
			t.Errorf("db info lacks %q: %v", k, info)
		}
	}
	if info["db_name"] != "a" || info["update_seq"] != "0" || info["doc_count"] != 0.0 {
		t.Fatalf("db info %v", info)
	}
	c.putDoc("a", "x", map[string]any{"v": 1})
	info = c.must(http.StatusOK, http.MethodGet, "/a", nil).json(t)
	if info["update_seq"] != "1" || info["doc_count"] != 1.0 {
		t.Fatalf("db info after a write %v", info)
	}
	if r := c.must(http.StatusOK, http.MethodHead, "/a", nil); len(r.body) != 0 {
		t.Fatalf("HEAD has a body")
	}
	dbs := c.must(http.StatusOK, http.MethodGet, "/_all_dbs", nil).list(t)
	if fmt.Sprint(dbs) != "[a b$c()+-_1]" {
		t.Fatalf("_all_dbs = %v", dbs)
	}
	wantError(t, c.do(http.MethodDelete, "/a?rev=1-x", nil), 400, "bad_request")
	c.must(http.StatusOK, http.MethodDelete, "/a", nil)
	r := c.do(http.MethodGet, "/a", nil)
	wantError(t, r, 404, "not_found")
	if r.json(t)["reason"] != "Database does not exist." {
		t.Fatalf("reason %s", r.body)
	}
	wantError(t, c.do(http.MethodDelete, "/a", nil), 404, "not_found")
	wantError(t, c.do(http.MethodGet, "/a/doc", nil), 404, "not_found")
	c.must(http.StatusCreated, http.MethodPost, "/b$c()+-_1/_ensure_full_commit", "{}")
}

func TestValidDatabaseName(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "vault": true, "a0_$()+-": true, "obsidian-livesync": true,
		"": false, "A": false, "0a": false, "_users": false, "a/b": false, "a.b": false, "a b": false,
		"é": false, strings.Repeat("a", 238): true, strings.Repeat("a", 239): false,
	} {
		if got := ValidDatabaseName(name); got != want {
			t.Errorf("ValidDatabaseName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestDocumentCRUD(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	r := c.must(http.StatusCreated, http.MethodPut, "/a/doc", map[string]any{"type": "plain", "n": 1})
	m := r.json(t)
	rev1 := str(m["rev"])
	if m["ok"] != true || m["id"] != "doc" || !strings.HasPrefix(rev1, "1-") || r.header.Get("ETag") != `"`+rev1+`"` {
		t.Fatalf("PUT = %s %v", r.body, r.header)
	}
	r = c.must(http.StatusOK, http.MethodGet, "/a/doc", nil)
	if d := r.json(t); d["_id"] != "doc" || d["_rev"] != rev1 || d["n"] != 1.0 || r.header.Get("ETag") != `"`+rev1+`"` {
		t.Fatalf("GET = %s", r.body)
	}
	wantError(t, c.do(http.MethodPut, "/a/doc", map[string]any{"n": 2}), 409, "conflict")
	wantError(t, c.do(http.MethodPut, "/a/doc?rev=1-zz", map[string]any{"_rev": rev1}), 400, "bad_request")
	rev2 := str(c.must(http.StatusCreated, http.MethodPut, "/a/doc?rev="+rev1, map[string]any{"n": 2}).json(t)["rev"])
	if !strings.HasPrefix(rev2, "2-") {
		t.Fatalf("rev2 %s", rev2)
	}
	d := c.must(http.StatusOK, http.MethodGet, "/a/doc?revs=true", nil).json(t)
	revs, _ := d["_revisions"].(map[string]any)
	if revs["start"] != 2.0 || len(revs["ids"].([]any)) != 2 {
		t.Fatalf("revs=true: %v", d)
	}
	// An old revision's body is served until the database is compacted,
	// as in CouchDB (history_test.go has the details).
	if d := c.must(http.StatusOK, http.MethodGet, "/a/doc?rev="+rev1, nil).json(t); d["n"] != 1.0 {
		t.Fatalf("GET ?rev=%s: %v", rev1, d)
	}
	c.must(http.StatusAccepted, http.MethodPost, "/a/_compact", nil)
	wantError(t, c.do(http.MethodGet, "/a/doc?rev="+rev1, nil), 404, "not_found")
	wantError(t, c.do(http.MethodDelete, "/a/doc", nil), 409, "conflict")
	wantError(t, c.do(http.MethodDelete, "/a/doc?rev="+rev1, nil), 409, "conflict")
	del := c.must(http.StatusOK, http.MethodDelete, "/a/doc?rev="+rev2, nil).json(t)
	rev3 := str(del["rev"])
	if del["ok"] != true || !strings.HasPrefix(rev3, "3-") {
		t.Fatalf("DELETE = %v", del)
	}
	r = c.do(http.MethodGet, "/a/doc", nil)
	wantError(t, r, 404, "not_found")
	if r.json(t)["reason"] != "deleted" {
		t.Fatalf("deleted doc: %s", r.body)
	}
	if r = c.do(http.MethodGet, "/a/nothing", nil); r.json(t)["reason"] != "missing" {
		t.Fatalf("missing doc: %s", r.body)
	}
	// The tombstone itself is readable by revision.
	if d := c.must(http.StatusOK, http.MethodGet, "/a/doc?rev="+rev3, nil).json(t); d["_deleted"] != true {
		t.Fatalf("tombstone: %v", d)
	}
	// Recreate after delete, without _rev.
	c.must(http.StatusCreated, http.MethodPut, "/a/doc", map[string]any{"again": true})
	// POST /db generates an id.
	p := c.must(http.StatusCreated, http.MethodPost, "/a", map[string]any{"x": 1}).json(t)
	if len(str(p["id"])) != 32 {
		t.Fatalf("POST /db = %v", p)
	}
	// If-Match names the revision too.
	cur := str(c.must(http.StatusOK, http.MethodGet, "/a/doc", nil).json(t)["_rev"])
	c.with(http.Header{"If-Match": {`"` + cur + `"`}}).must(http.StatusCreated, http.MethodPut, "/a/doc", map[string]any{"y": 1})
	// new_edits=false on a single document answers {ok,id,rev}.
	ne := c.must(http.StatusCreated, http.MethodPut, "/a/repl?new_edits=false", map[string]any{"_rev": "5-abc", "v": 1}).json(t)
	if ne["rev"] != "5-abc" || ne["id"] != "repl" {
		t.Fatalf("new_edits=false PUT = %v", ne)
	}
	wantError(t, c.do(http.MethodPut, "/a/repl2?new_edits=false", map[string]any{"v": 1}), 400, "bad_request")
	wantError(t, c.do(http.MethodGet, "/a/doc/attachment", nil), 404, "not_found")
	wantError(t, c.do(http.MethodGet, "/a/_view", nil), 404, "not_found")
	wantError(t, c.do(http.MethodPut, "/a/doc", "[1]"), 400, "bad_request")
}

// Document ids with any character travel escaped in the path and come
// back unchanged through every route.
func TestDocumentIDsWithAnyCharacters(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	ids := []string{"notes/a.md", "a+b", "100%", "日本語/ノート.md", "h:+hh1lfufz7xkh", "f:abc/def", "sp ace", "q?x=1&y", "hash#frag", "_design/ddoc", "i:.obsidian/app.json", "emoji 🎉"}
	for _, id := range ids {
		rev := c.putDoc("a", id, map[string]any{"path": id})
		d := c.must(http.StatusOK, http.MethodGet, "/a/"+escapeID(id), nil).json(t)
		if d["_id"] != id || d["_rev"] != rev || d["path"] != id {
			t.Fatalf("%q: GET = %v", id, d)
		}
	}
	// POST _all_docs with keys, include_docs: rows in key order.
	keys := append(slices.Clone(ids), "absent/one")
	r := c.must(http.StatusOK, http.MethodPost, "/a/_all_docs?include_docs=true", map[string]any{"keys": keys})
	var all struct {
		TotalRows int `json:"total_rows"`
		Rows      []struct {
			ID    string          `json:"id"`
			Key   string          `json:"key"`
			Error string          `json:"error"`
			Doc   json.RawMessage `json:"doc"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(r.body, &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Rows) != len(keys) || all.TotalRows != len(ids) {
		t.Fatalf("rows %d (total %d): %s", len(all.Rows), all.TotalRows, r.body)
	}
	for i, row := range all.Rows {
		if row.Key != keys[i] {
			t.Fatalf("row %d key %q, want %q", i, row.Key, keys[i])
		}
		if i < len(ids) && (row.ID != ids[i] || !strings.Contains(string(row.Doc), `"path"`)) {
			t.Fatalf("row %d: %+v", i, row)
		}
	}
	if last := all.Rows[len(keys)-1]; last.Error != "not_found" || last.ID != "" {
		t.Fatalf("missing key row %+v", last)
	}
	// GET _all_docs lists them in byte order.
	var list struct {
		Rows []struct{ ID string } `json:"rows"`
	}
	_ = json.Unmarshal(c.must(http.StatusOK, http.MethodGet, "/a/_all_docs", nil).body, &list)
	var got []string
	for _, row := range list.Rows {
		got = append(got, row.ID)
	}
	want := slices.Sorted(slices.Values(ids))
	if !slices.Equal(got, want) {
		t.Fatalf("_all_docs order %q, want %q", got, want)
	}
	// open_revs and _bulk_get with such ids.
	b := c.must(http.StatusOK, http.MethodPost, "/a/_bulk_get?revs=true", map[string]any{"docs": []map[string]string{{"id": "日本語/ノート.md"}, {"id": "100%"}}})
	if !strings.Contains(string(b.body), `"_id":"日本語/ノート.md"`) || !strings.Contains(string(b.body), `"_id":"100%"`) {
		t.Fatalf("_bulk_get with unicode ids: %s", b.body)
	}
	if l := c.must(http.StatusOK, http.MethodGet, "/a/"+escapeID("a+b")+"?open_revs=all", nil).list(t); len(l) != 1 {
		t.Fatalf("open_revs of a+b: %v", l)
	}
	// A literal "/" in the path is an attachment, not part of the id.
	wantError(t, c.do(http.MethodGet, "/a/notes/a.md", nil), 404, "not_found")
}

func TestBulkDocs(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	// new_edits=false: replicated revisions; the answer lists only errors.
	body := `{"new_edits":false,"docs":[
		{"_id":"n1","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"type":"plain"},
		{"_id":"h:c1","_rev":"1-c","type":"leaf","data":"x"},
		{"_id":"n1","_rev":"2-a","_revisions":{"start":2,"ids":["a","a"]},"type":"plain"}]}`
	r := c.must(http.StatusCreated, http.MethodPost, "/a/_bulk_docs", body)
	if string(r.body) != "[]\n" {
		t.Fatalf("new_edits=false answer %s", r.body)
	}
	d := c.must(http.StatusOK, http.MethodGet, "/a/n1?conflicts=true", nil).json(t)
	if d["_rev"] != "2-b" || fmt.Sprint(d["_conflicts"]) != "[2-a]" {
		t.Fatalf("conflicted doc %v", d)
	}
	// new_edits=true: per-document results, conflicts per document.
	r = c.must(http.StatusCreated, http.MethodPost, "/a/_bulk_docs", `{"docs":[
		{"_id":"n1","v":1},
		{"_id":"fresh","v":1},
		{"v":"no id"},
		{"_id":"n1","_rev":"2-b","v":2}]}`)
	var rows []map[string]any
	_ = json.Unmarshal(r.body, &rows)
	if len(rows) != 4 || rows[0]["error"] != "conflict" || rows[0]["reason"] != "Document update conflict." ||
		rows[1]["ok"] != true || len(str(rows[2]["id"])) != 32 || rows[3]["ok"] != true || !strings.HasPrefix(str(rows[3]["rev"]), "3-") {
		t.Fatalf("new_edits=true rows %s", r.body)
	}
	// Whole-request errors, nothing written.
	for name, tc := range map[string]struct {
		body   string
		status int
		err    string
	}{
		"not JSON":            {`{"docs":[`, 400, "bad_request"},
		"not an object":       {`[1,2]`, 400, "bad_request"},
		"no docs":             {`{"doc":[]}`, 400, "bad_request"},
		"docs not a list":     {`{"docs":{}}`, 400, "bad_request"},
		"doc not an object":   {`{"docs":[1]}`, 400, "bad_request"},
		"new_edits not bool":  {`{"docs":[],"new_edits":"no"}`, 400, "bad_request"},
		"rev x":               {`{"docs":[{"_id":"w1","_rev":"x"}]}`, 400, "bad_request"},
		"rev 1-":              {`{"docs":[{"_id":"w1","_rev":"1-"}]}`, 400, "bad_request"},
		"rev abc-def":         {`{"docs":[{"_id":"w1","_rev":"abc-def"}]}`, 400, "bad_request"},
		"rev 0-a":             {`{"docs":[{"_id":"w1","_rev":"0-a"}]}`, 400, "bad_request"},
		"rev -1-a":            {`{"docs":[{"_id":"w1","_rev":"-1-a"}]}`, 400, "bad_request"},
		"id not string":       {`{"docs":[{"_id":5}]}`, 400, "bad_request"},
		"reserved id":         {`{"docs":[{"_id":"_foo"}]}`, 400, "illegal_docid"},
		"empty id":            {`{"docs":[{"_id":""}]}`, 400, "illegal_docid"},
		"replicated, no _rev": {`{"new_edits":false,"docs":[{"_id":"w1"}]}`, 400, "bad_request"},
		"replicated, no _id":  {`{"new_edits":false,"docs":[{"_rev":"1-a"}]}`, 400, "bad_request"},
		"invalid UTF-8":       {"{\"docs\":[{\"_id\":\"\xff\"}]}", 400, "bad_request"},
	} {
		t.Run(name, func(t *testing.T) {
			wantError(t, c.do(http.MethodPost, "/a/_bulk_docs", tc.body), tc.status, tc.err)
		})
	}
	if wantError(t, c.do(http.MethodGet, "/a/w1", nil), 404, "not_found"); t.Failed() {
		return
	}
	// Per-document refusals of the store (a decorator's ErrForbidden) keep the others.
	_, f := newTestServer(t, func(cfg *Config) { cfg.Databases = refusing{cfg.Databases} })
	f.must(http.StatusCreated, http.MethodPut, "/a", nil)
	r = f.must(http.StatusCreated, http.MethodPost, "/a/_bulk_docs", `{"new_edits":false,"docs":[
		{"_id":"ok1","_rev":"1-a"},
		{"_id":"refused","_rev":"3-a"}]}`)
	if string(r.body) != `[{"id":"refused","rev":"3-a","error":"forbidden","reason":"held back"}]`+"\n" {
		t.Fatalf("per-document error rows %s", r.body)
	}
	f.must(http.StatusOK, http.MethodGet, "/a/ok1", nil)
	wantError(t, f.do(http.MethodPut, "/a/refused", "{}"), 403, "forbidden")
	r = f.must(http.StatusCreated, http.MethodPost, "/a/_bulk_docs", `{"docs":[{"_id":"refused"},{"_id":"fine"}]}`)
	if !strings.Contains(string(r.body), `{"id":"refused","error":"forbidden"`) || !strings.Contains(string(r.body), `"ok":true,"id":"fine"`) {
		t.Fatalf("new_edits=true refusal rows %s", r.body)
	}
	// Design documents: admins only.
	_, alice := newTestServer(t, nil)
	alice.must(http.StatusCreated, http.MethodPut, "/a", nil)
	alice = alice.as("alice", alicePass)
	r = alice.must(http.StatusCreated, http.MethodPost, "/a/_bulk_docs", `{"docs":[{"_id":"_design/x"},{"_id":"y"}]}`)
	if !strings.Contains(string(r.body), `"error":"forbidden"`) || !strings.Contains(string(r.body), `"id":"y","rev"`) {
		t.Fatalf("design doc by a non-admin: %s", r.body)
	}
	wantError(t, alice.do(http.MethodPut, "/a/_design/x", "{}"), 403, "forbidden")
}

func TestRevsDiff(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	c.must(http.StatusCreated, http.MethodPost, "/a/_bulk_docs", `{"new_edits":false,"docs":[{"_id":"d","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]}}]}`)
	r := c.must(http.StatusOK, http.MethodPost, "/a/_revs_diff", `{"d":["2-b","1-a","3-c"],"e":["1-x"]}`)
	var got map[string]struct{ Missing []string }
	_ = json.Unmarshal(r.body, &got)
	if len(got) != 2 || fmt.Sprint(got["d"].Missing) != "[3-c]" || fmt.Sprint(got["e"].Missing) != "[1-x]" {
		t.Fatalf("_revs_diff = %s", r.body)
	}
	if r := c.must(http.StatusOK, http.MethodPost, "/a/_revs_diff", `{"d":["2-b"]}`); string(r.body) != "{}\n" {
		t.Fatalf("nothing missing: %s", r.body)
	}
	for _, bad := range []string{`{"d":"2-b"}`, `{"d":["x"]}`, `{"d":[1]}`, `[]`, `nope`, `{"d":["1-"]}`} {
		wantError(t, c.do(http.MethodPost, "/a/_revs_diff", bad), 400, "")
	}
	wantError(t, c.do(http.MethodGet, "/a/_revs_diff", nil), 405, "method_not_allowed")
}

func TestBulkGet(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	c.must(http.StatusCreated, http.MethodPost, "/a/_bulk_docs", `{"new_edits":false,"docs":[
		{"_id":"d","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"v":"b"},
		{"_id":"d","_rev":"2-c","_revisions":{"start":2,"ids":["c","a"]},"v":"c"},
		{"_id":"gone","_rev":"2-z","_revisions":{"start":2,"ids":["z","y"]},"_deleted":true}]}`)
	r := c.must(http.StatusOK, http.MethodPost, "/a/_bulk_get?revs=true&latest=true", `{"docs":[
		{"id":"d","rev":"2-b"},
		{"id":"d","rev":"9-nope"},
		{"id":"nothing"},
		{"id":"d"},
		{"id":"d","rev":"1-a"},
		{"id":"gone","rev":"2-z"},
		{"id":"d","rev":"x"},
		{"rev":"1-a"},
		5]}`)
	var got struct {
		Results []struct {
			ID   any `json:"id"`
			Docs []struct {
				OK    map[string]any `json:"ok"`
				Error map[string]any `json:"error"`
			} `json:"docs"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	res := got.Results
	if len(res) != 9 {
		t.Fatalf("%d results: %s", len(res), r.body)
	}
	okRev := func(i, j int) string { return str(res[i].Docs[j].OK["_rev"]) }
	errOf := func(i int) map[string]any { return res[i].Docs[0].Error }
	if res[0].ID != "d" || okRev(0, 0) != "2-b" || res[0].Docs[0].OK["_revisions"] == nil {
		t.Errorf("named revision: %+v", res[0])
	}
	if e := errOf(1); e["error"] != "not_found" || e["reason"] != "missing" || e["rev"] != "9-nope" || e["id"] != "d" {
		t.Errorf("missing revision: %+v", e)
	}
	if e := errOf(2); e["error"] != "not_found" || e["rev"] != "undefined" {
		t.Errorf("missing document: %+v", e)
	}
	if len(res[3].Docs) != 2 || okRev(3, 0) != "2-c" || okRev(3, 1) != "2-b" {
		t.Errorf("no rev: every leaf, winner first: %+v", res[3])
	}
	if len(res[4].Docs) != 2 {
		t.Errorf("latest=true of the common ancestor: both leaves: %+v", res[4])
	}
	if res[5].Docs[0].OK["_deleted"] != true {
		t.Errorf("tombstone: %+v", res[5])
	}
	if e := errOf(6); e["error"] != "bad_request" || e["rev"] != "x" {
		t.Errorf("broken rev: %+v", e)
	}
	if e := errOf(7); e["error"] != "bad_request" || e["id"] != nil || e["reason"] != "document id missed" {
		t.Errorf("no id: %+v (id %v)", e, res[7].ID)
	}
	if e := errOf(8); e["error"] != "bad_request" || res[8].ID != nil {
		t.Errorf("not an object: %+v", e)
	}
	// Without revs, no _revisions; without latest, an ancestor is missing.
	r = c.must(http.StatusOK, http.MethodPost, "/a/_bulk_get", `{"docs":[{"id":"d","rev":"2-b"},{"id":"d","rev":"1-a"}]}`)
	if strings.Contains(string(r.body), "_revisions") || !strings.Contains(string(r.body), `"rev":"1-a","error":"not_found"`) {
		t.Fatalf("revs=false: %s", r.body)
	}
	if r := c.must(http.StatusOK, http.MethodPost, "/a/_bulk_get", `{"docs":[]}`); string(r.body) != `{"results":[]}`+"\n" {
		t.Fatalf("empty: %s", r.body)
	}
	wantError(t, c.do(http.MethodPost, "/a/_bulk_get", `{}`), 400, "bad_request")
	wantError(t, c.do(http.MethodPost, "/a/_bulk_get", `{"docs":1}`), 400, "bad_request")
	wantError(t, c.do(http.MethodPost, "/a/_bulk_get?open_revs=all", `{"docs":[]}`), 400, "bad_request")
}

func TestAllDocs(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	for _, id := range []string{"b", "d", "a", "c", "e"} {
		c.putDoc("a", id, map[string]any{"v": id})
	}
	rev := str(c.must(http.StatusOK, http.MethodGet, "/a/e", nil).json(t)["_rev"])
	c.must(http.StatusOK, http.MethodDelete, "/a/e?rev="+rev, nil)
	type row struct {
		ID    string
		Key   string
		Value struct {
			Rev     string
			Deleted bool
		}
		Doc   map[string]any
		Error string
	}
	query := func(method, path string, body any) (total int, offset any, rows []row) {
		t.Helper()
		var out struct {
			TotalRows int `json:"total_rows"`
			Offset    any
			Rows      []row
		}
		r := c.must(http.StatusOK, method, path, body)
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatalf("%s: %v", r.body, err)
		}
		return out.TotalRows, out.Offset, out.Rows
	}
	ids := func(rows []row) string {
		var s []string
		for _, r := range rows {
			s = append(s, r.ID)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		path   string
		want   string
		offset any
	}{
		{"/a/_all_docs", "a,b,c,d", 0.0},
		{`/a/_all_docs?startkey="b"&endkey="c"`, "b,c", 1.0},
		{`/a/_all_docs?start_key="b"&end_key="c"&inclusive_end=false`, "b", 1.0},
		{`/a/_all_docs?startkey="bb"`, "c,d", 2.0},
		{`/a/_all_docs?limit=2&skip=1`, "b,c", 1.0},
		{`/a/_all_docs?descending=true`, "d,c,b,a", 0.0},
		{`/a/_all_docs?descending=true&startkey="c"&limit=2`, "c,b", 0.0},
		{`/a/_all_docs?startkey="z"`, "", 4.0},
		{`/a/_all_docs?startkey="c"&endkey="b"`, "", 2.0},
		{`/a/_all_docs?limit=0`, "", 0.0},
		{`/a/_all_docs?limit=99999999999999999999`, "a,b,c,d", 0.0},
		{`/a/_all_docs?key="c"`, "c", nil},
	} {
		total, offset, rows := query(http.MethodGet, tc.path, nil)
		if ids(rows) != tc.want || total != 4 || offset != tc.offset {
			t.Errorf("%s: rows %q total %d offset %v, want %q 4 %v", tc.path, ids(rows), total, offset, tc.want, tc.offset)
		}
	}
	_, _, rows := query(http.MethodPost, "/a/_all_docs?include_docs=true", map[string]any{"keys": []string{"c", "e", "zz", "a"}})
	if len(rows) != 4 || rows[0].Doc["v"] != "c" || rows[0].Value.Rev == "" ||
		!rows[1].Value.Deleted || rows[1].Doc != nil || rows[1].ID != "e" ||
		rows[2].Error != "not_found" || rows[2].Key != "zz" || rows[3].ID != "a" {
		t.Fatalf("keys rows %+v", rows)
	}
	// keys as a query parameter; options in the POST body.
	if _, _, rows := query(http.MethodGet, `/a/_all_docs?keys=["d","a"]`, nil); ids(rows) != "d,a" {
		t.Fatalf("GET keys: %v", rows)
	}
	if _, _, rows := query(http.MethodPost, "/a/_all_docs", map[string]any{"keys": []string{"d"}, "include_docs": true}); rows[0].Doc["v"] != "d" {
		t.Fatalf("include_docs in the body: %+v", rows)
	}
	for _, bad := range []string{`?limit=-1`, `?limit=x`, `?skip=-2`, `?startkey=b`, `?startkey=1`, `?include_docs=maybe`, `?keys=[1`} {
		r := c.do(http.MethodGet, "/a/_all_docs"+bad, nil)
		if r.status != 400 {
			t.Errorf("%s: status %d: %s", bad, r.status, r.body)
		}
	}
	wantError(t, c.do(http.MethodPost, "/a/_all_docs", `{"keys":"a"}`), 400, "bad_request")
}

func TestOpenRevs(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	c.must(http.StatusCreated, http.MethodPost, "/a/_bulk_docs", `{"new_edits":false,"docs":[
		{"_id":"d","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"v":"b"},
		{"_id":"d","_rev":"2-c","_revisions":{"start":2,"ids":["c","a"]},"v":"c"}]}`)
	l := c.must(http.StatusOK, http.MethodGet, "/a/d?open_revs=all&revs=true", nil).list(t)
	if len(l) != 2 {
		t.Fatalf("open_revs=all: %v", l)
	}
	r := c.must(http.StatusOK, http.MethodGet, `/a/d?open_revs=["2-b","3-nope","1-a"]`, nil)
	if string(r.body) != `[{"ok":{"_id":"d","_rev":"2-b","v":"b"}},{"missing":"3-nope"},{"missing":"1-a"}]`+"\n" {
		t.Fatalf("open_revs list: %s", r.body)
	}
	r = c.must(http.StatusOK, http.MethodGet, `/a/d?open_revs=["1-a"]&latest=true`, nil)
	if l := r.list(t); len(l) != 2 {
		t.Fatalf("latest of an ancestor: %s", r.body)
	}
	// multipart/mixed for clients that ask (kivik).
	r = c.with(http.Header{"Accept": {"multipart/mixed"}}).must(http.StatusOK, http.MethodGet, `/a/d?open_revs=["2-c","4-x"]`, nil)
	ct := r.header.Get("Content-Type")
	if !strings.HasPrefix(ct, "multipart/mixed; boundary=") || !strings.Contains(string(r.body), `{"_id":"d","_rev":"2-c","v":"c"}`) ||
		!strings.Contains(string(r.body), `error="true"`) || !strings.Contains(string(r.body), `{"missing":"4-x"}`) {
		t.Fatalf("multipart: %s\n%s", ct, r.body)
	}
	wantError(t, c.do(http.MethodGet, "/a/nope?open_revs=all", nil), 404, "not_found")
	for _, bad := range []string{`["x"]`, `[1]`, `"2-b"`, `[`, `{}`, `["1-"]`} {
		wantError(t, c.do(http.MethodGet, "/a/d?open_revs="+bad, nil), 400, "bad_request")
	}
	if l := c.must(http.StatusOK, http.MethodGet, `/a/nope?open_revs=["1-a"]`, nil).list(t); len(l) != 1 {
		t.Fatalf("unknown document, named rev: %v", l)
	}
}

func TestLocalDocs(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	wantError(t, c.do(http.MethodGet, "/a/_local/cp", nil), 404, "not_found")
	r := c.must(http.StatusCreated, http.MethodPut, "/a/_local/cp", map[string]any{"last_seq": "1"}).json(t)
	if r["id"] != "_local/cp" || r["rev"] != "0-1" {
		t.Fatalf("first PUT %v", r)
	}
	wantError(t, c.do(http.MethodPut, "/a/_local/cp", map[string]any{"last_seq": "2"}), 409, "conflict")
	wantError(t, c.do(http.MethodPut, "/a/_local/cp", map[string]any{"_rev": "0-7", "last_seq": "2"}), 409, "conflict")
	r = c.must(http.StatusCreated, http.MethodPut, "/a/_local/cp", map[string]any{"_rev": "0-1", "last_seq": "2"}).json(t)
	if r["rev"] != "0-2" {
		t.Fatalf("second PUT %v", r)
	}
	d := c.must(http.StatusOK, http.MethodGet, "/a/_local/cp", nil).json(t)
	if d["_id"] != "_local/cp" || d["_rev"] != "0-2" || d["last_seq"] != "2" {
		t.Fatalf("GET %v", d)
	}
	// Ids with "/" in them, escaped or not.
	c.must(http.StatusCreated, http.MethodPut, "/a/_local/a%2Fb", map[string]any{"x": 1})
	if d := c.must(http.StatusOK, http.MethodGet, "/a/_local/a/b", nil).json(t); d["_id"] != "_local/a/b" {
		t.Fatalf("slash id %v", d)
	}
	wantError(t, c.do(http.MethodDelete, "/a/_local/cp?rev=0-1", nil), 409, "conflict")
	if r := c.must(http.StatusOK, http.MethodDelete, "/a/_local/cp?rev=0-2", nil).json(t); r["rev"] != "0-0" {
		t.Fatalf("DELETE %v", r)
	}
	wantError(t, c.do(http.MethodGet, "/a/_local/cp", nil), 404, "not_found")
	wantError(t, c.do(http.MethodDelete, "/a/_local/cp?rev=0-2", nil), 404, "not_found")
	if r := c.must(http.StatusCreated, http.MethodPut, "/a/_local/cp", map[string]any{"again": true}).json(t); r["rev"] != "0-1" {
		t.Fatalf("PUT after DELETE %v", r)
	}
	// _local documents are never in the changes feed or _all_docs.
	if ch := c.must(http.StatusOK, http.MethodGet, "/a/_changes", nil).json(t); len(ch["results"].([]any)) != 0 {
		t.Fatalf("changes list _local docs: %v", ch)
	}
	// _bulk_docs may write them too.
	r = c.must(http.StatusCreated, http.MethodPost, "/a/_bulk_docs", `{"docs":[{"_id":"_local/b","v":1}]}`).list(t)[0].(map[string]any)
	if r["ok"] != true || r["rev"] != "0-1" {
		t.Fatalf("bulk _local %v", r)
	}
	wantError(t, c.do(http.MethodPut, "/a/_local/x", "[]"), 400, "bad_request")
}

func TestConfigEndpoint(t *testing.T) {
	_, c := newTestServer(t, nil)
	cfg := c.must(http.StatusOK, http.MethodGet, "/_node/_local/_config", nil).json(t)
	sec := func(name string) map[string]any { m, _ := cfg[name].(map[string]any); return m }
	// The values LiveSync's wizard checks (utilCheckCouchDB.ts).
	for _, tc := range []struct{ section, key, want string }{
		{"chttpd", "require_valid_user", "true"},
		{"chttpd_auth", "require_valid_user", "true"},
		{"chttpd", "enable_cors", "true"},
		{"httpd", "enable_cors", "true"},
		{"chttpd", "max_http_request_size", "4194304"},
		{"couchdb", "max_document_size", "50000000"},
		{"cors", "credentials", "true"},
		{"cors", "origins", "app://obsidian.md,capacitor://localhost,http://localhost"},
		{"cors", "headers", "accept, authorization, content-type, origin, referer"},
		{"cors", "methods", "GET, PUT, POST, HEAD, DELETE"},
	} {
		if got := sec(tc.section)[tc.key]; got != tc.want {
			t.Errorf("%s/%s = %v, want %q", tc.section, tc.key, got, tc.want)
		}
	}
	if _, ok := sec("httpd")["WWW-Authenticate"]; ok {
		t.Error("WWW-Authenticate reported though it is never sent")
	}
	if a := sec("admins"); len(a) != 1 || a["admin"] == nil || strings.Contains(fmt.Sprint(a), "sha256-") {
		t.Errorf("admins (to an admin) = %v", a)
	}
	alice := c.as("alice", alicePass)
	if a := alice.must(http.StatusOK, http.MethodGet, "/_node/_local/_config/admins", nil).json(t); len(a) != 0 {
		t.Errorf("admins shown to a non-admin: %v", a)
	}
	r := c.must(http.StatusOK, http.MethodGet, "/_node/nonode@nohost/_config/cors/credentials", nil)
	if string(r.body) != "\"true\"\n" {
		t.Fatalf("one key: %s", r.body)
	}
	wantError(t, c.do(http.MethodGet, "/_node/_local/_config/cors/nope", nil), 404, "not_found")
	r = c.do(http.MethodPut, "/_node/_local/_config/chttpd/max_http_request_size", `"4294967296"`)
	wantError(t, r, 405, "method_not_allowed")
	if !strings.Contains(r.json(t)["reason"].(string), "read-only") {
		t.Fatalf("PUT reason %s", r.body)
	}
	wantError(t, c.anon().do(http.MethodGet, "/_node/_local/_config", nil), 401, "unauthorized")
	// Anonymous access and an opt-in WWW-Authenticate are reported as such.
	_, c2 := newTestServer(t, func(cfg *Config) {
		cfg.AllowAnonymousRead = true
		cfg.CORSOrigins = []string{"*"}
		cfg.WWWAuthenticate = `Basic realm="couchdb"`
		cfg.MaxRequestBytes = 4294967296
	})
	cfg = c2.anon().must(http.StatusOK, http.MethodGet, "/_node/_local/_config", nil).json(t)
	if sec("chttpd")["require_valid_user"] != "false" || sec("cors")["origins"] != "*" ||
		sec("httpd")["WWW-Authenticate"] != `Basic realm="couchdb"` || sec("chttpd")["max_http_request_size"] != "4294967296" {
		t.Fatalf("config %v", cfg)
	}
}

func TestHooksAndRecover(t *testing.T) {
	type call struct {
		route  string
		status int
	}
	var calls []call
	_, c := newTestServer(t, func(cfg *Config) {
		cfg.Databases = panicky{cfg.Databases}
		cfg.Hooks.OnRequest = func(route string, status int, d time.Duration) {
			calls = append(calls, call{route, status})
		}
	})
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	c.must(http.StatusOK, http.MethodGet, "/a", nil)
	wantError(t, c.do(http.MethodGet, "/boom", nil), 500, "internal_server_error")
	c.do(http.MethodGet, "/a/_changes?limit=x", nil)
	want := []call{{"/{db}", 201}, {"/{db}", 200}, {"/{db}", 500}, {"/{db}/_changes", 400}}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Fatalf("hook calls %v, want %v", calls, want)
	}
}

// refusing is a Databases whose stores refuse the document "refused", as
// a hold-back decorator would.
type refusing struct{ Databases }

func (r refusing) Open(ctx context.Context, name string) (store.Store, error) {
	st, err := r.Databases.Open(ctx, name)
	return refusingStore{st}, err
}

type refusingStore struct{ store.Store }

func (r refusingStore) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	var pass []json.RawMessage
	var out []engine.BulkDocResult
	for _, d := range docs {
		if strings.Contains(string(d), `"refused"`) {
			out = append(out, engine.BulkDocResult{ID: "refused", Rev: "3-a", Error: "forbidden", Reason: "held back"})
			continue
		}
		pass = append(pass, d)
	}
	res, err := r.Store.BulkDocs(ctx, pass)
	return append(res, out...), err
}

func (r refusingStore) Put(ctx context.Context, doc json.RawMessage) (string, error) {
	if strings.Contains(string(doc), `"refused"`) {
		return "", fmt.Errorf("held back: %w", ErrForbidden)
	}
	return r.Store.Put(ctx, doc)
}

func (r refusingStore) PutBatch(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	var pass []json.RawMessage
	var at []int
	out := make([]engine.BulkDocResult, len(docs))
	for i, d := range docs {
		if strings.Contains(string(d), `"refused"`) {
			out[i] = engine.BulkDocResult{ID: "refused", Error: "forbidden", Reason: "held back"}
			continue
		}
		pass, at = append(pass, d), append(at, i)
	}
	res, err := r.Store.PutBatch(ctx, pass)
	if err != nil {
		return nil, err
	}
	for k, i := range at {
		out[i] = res[k]
	}
	return out, nil
}

// panicky is a Databases whose Open panics for the database "boom".
type panicky struct{ Databases }

func (p panicky) Open(ctx context.Context, name string) (store.Store, error) {
	if name == "boom" {
		panic("boom")
	}
	return p.Databases.Open(ctx, name)
}

// TestOnlyServerAdminsDelete: as in CouchDB, a user listed for a
// database (a device's credentials) cannot delete it, with its history;
// it may still create, compact and configure it.
func TestOnlyServerAdminsDelete(t *testing.T) {
	_, admin := newTestServer(t, nil)
	admin.must(http.StatusCreated, http.MethodPut, "/a", nil)
	alice := admin.as("alice", alicePass)
	wantError(t, alice.do(http.MethodDelete, "/a", nil), http.StatusForbidden, "forbidden")
	admin.must(http.StatusOK, http.MethodGet, "/a", nil)
	admin.must(http.StatusOK, http.MethodDelete, "/a", nil)
	alice.must(http.StatusCreated, http.MethodPut, "/a", nil)
	wantError(t, alice.do(http.MethodPut, "/b", nil), http.StatusForbidden, "forbidden")
	alice.must(http.StatusAccepted, http.MethodPost, "/a/_compact", "")
	alice.must(http.StatusOK, http.MethodPut, "/a/_revs_limit", "100")
	wantError(t, alice.anon().do(http.MethodDelete, "/a", nil), http.StatusUnauthorized, "unauthorized")
}
