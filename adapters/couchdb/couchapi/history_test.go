package couchapi

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// revsInfoOf reads GET /{db}/{id}?revs_info=true (plus extra query) and
// returns the entries as "rev status", newest first.
func revsInfoOf(t *testing.T, c *client, path string) []string {
	t.Helper()
	d := c.must(http.StatusOK, http.MethodGet, path, nil).json(t)
	list, ok := d["_revs_info"].([]any)
	if !ok {
		t.Fatalf("GET %s: no _revs_info: %v", path, d)
	}
	var out []string
	for _, e := range list {
		m := e.(map[string]any)
		if len(m) != 2 {
			t.Fatalf("_revs_info entry %v: want exactly rev and status", m)
		}
		out = append(out, str(m["rev"])+" "+str(m["status"]))
	}
	return out
}

// The issue's report: "GET /db/doc?rev=<older rev> answers 404 missing on
// the relay, both for older revisions loaded with new_edits=false and
// after a normal edit. CouchDB keeps those bodies until compaction, and
// the plugin's file-history view reads them (revs_info, then each
// available rev)."
func TestRevisionHistoryUntilCompact(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	var revs []string
	for i := 1; i <= 3; i++ {
		body := map[string]any{"v": i}
		if len(revs) > 0 {
			body["_rev"] = revs[len(revs)-1]
		}
		revs = append(revs, c.putDoc("a", "n", body))
	}
	c.must(http.StatusCreated, http.MethodPost, "/a/_bulk_docs", `{"new_edits":false,"docs":[
		{"_id":"r","_rev":"1-a","v":"a"},
		{"_id":"r","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"v":"b"},
		{"_id":"r","_rev":"3-c","_revisions":{"start":3,"ids":["c","b","a"]},"v":"c"}]}`)

	want := []string{revs[2] + " available", revs[1] + " available", revs[0] + " available"}
	if got := revsInfoOf(t, c, "/a/n?revs_info=true"); !reflect.DeepEqual(got, want) {
		t.Fatalf("_revs_info = %v, want %v", got, want)
	}
	for i, r := range revs {
		d := c.must(http.StatusOK, http.MethodGet, "/a/n?rev="+r, nil)
		if m := d.json(t); m["_rev"] != r || m["v"] != float64(i+1) || d.header.Get("ETag") != `"`+r+`"` {
			t.Fatalf("GET ?rev=%s: %s", r, d.body)
		}
	}
	if got, want := revsInfoOf(t, c, "/a/r?revs_info=true"), []string{"3-c available", "2-b available", "1-a available"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("_revs_info of replicated history = %v, want %v", got, want)
	}
	if m := c.must(http.StatusOK, http.MethodGet, "/a/r?rev=1-a", nil).json(t); m["v"] != "a" {
		t.Fatalf("GET ?rev=1-a: %v", m)
	}
	if got := revsInfoOf(t, c, "/a/r?meta=true"); len(got) != 3 {
		t.Fatalf("meta=true: _revs_info %v", got)
	}
	// open_revs with explicit earlier revisions; latest=true still gives
	// the leaf.
	r := c.must(http.StatusOK, http.MethodGet, `/a/r?open_revs=["1-a","2-b"]`, nil)
	if string(r.body) != `[{"ok":{"_id":"r","_rev":"1-a","v":"a"}},{"ok":{"_id":"r","_rev":"2-b","v":"b"}}]`+"\n" {
		t.Fatalf("open_revs of earlier revisions: %s", r.body)
	}
	r = c.must(http.StatusOK, http.MethodGet, `/a/r?open_revs=["1-a"]&latest=true`, nil)
	if string(r.body) != `[{"ok":{"_id":"r","_rev":"3-c","v":"c"}}]`+"\n" {
		t.Fatalf("open_revs latest of a kept ancestor: %s", r.body)
	}

	// _compact: a database admin (alice on "a"), JSON or no content type.
	wantError(t, c.anon().do(http.MethodPost, "/a/_compact", nil), 401, "unauthorized")
	wantError(t, c.with(http.Header{"Content-Type": {"text/plain"}}).do(http.MethodPost, "/a/_compact", "x"), 415, "bad_content_type")
	wantError(t, c.do(http.MethodGet, "/a/_compact", nil), 405, "method_not_allowed")
	wantError(t, c.do(http.MethodPost, "/nope/_compact", nil), 404, "not_found")
	if m := c.as("alice", alicePass).must(http.StatusAccepted, http.MethodPost, "/a/_compact", map[string]any{}).json(t); m["ok"] != true || len(m) != 1 {
		t.Fatalf("_compact = %v", m)
	}
	want = []string{revs[2] + " available", revs[1] + " missing", revs[0] + " missing"}
	if got := revsInfoOf(t, c, "/a/n?revs_info=true"); !reflect.DeepEqual(got, want) {
		t.Fatalf("_revs_info after _compact = %v, want %v", got, want)
	}
	for _, r := range revs[:2] {
		wantError(t, c.do(http.MethodGet, "/a/n?rev="+r, nil), 404, "not_found")
	}
	if m := c.must(http.StatusOK, http.MethodGet, "/a/n?rev="+revs[2], nil).json(t); m["v"] != 3.0 {
		t.Fatalf("the leaf after _compact: %v", m)
	}
	r = c.must(http.StatusOK, http.MethodGet, `/a/r?open_revs=["1-a","3-c"]`, nil)
	if string(r.body) != `[{"missing":"1-a"},{"ok":{"_id":"r","_rev":"3-c","v":"c"}}]`+"\n" {
		t.Fatalf("open_revs after _compact: %s", r.body)
	}
}

// A deleted revision in the history is "deleted" while its body is kept.
func TestRevsInfoDeleted(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	r1 := c.putDoc("a", "d", map[string]any{"v": 1})
	r2 := str(c.must(http.StatusOK, http.MethodDelete, "/a/d?rev="+r1, nil).json(t)["rev"])
	wantError(t, c.do(http.MethodGet, "/a/d?revs_info=true", nil), 404, "not_found")
	if got, want := revsInfoOf(t, c, "/a/d?revs_info=true&rev="+r2), []string{r2 + " deleted", r1 + " available"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("_revs_info of a tombstone = %v, want %v", got, want)
	}
	wantError(t, c.do(http.MethodGet, "/a/d?revs_info=maybe", nil), 400, "query_parse_error")
}

func TestRevsLimit(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	c.must(http.StatusCreated, http.MethodPut, "/b", nil)
	if r := c.must(http.StatusOK, http.MethodGet, "/a/_revs_limit", nil); string(r.body) != "1000\n" || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET _revs_limit = %q %v, want CouchDB's default 1000", r.body, r.header)
	}
	for _, bad := range []string{"0", "-3", `"5"`, "2.5", "null", "99999999999"} {
		wantError(t, c.do(http.MethodPut, "/a/_revs_limit", bad), 400, "bad_request")
	}
	wantError(t, c.do(http.MethodPut, "/a/_revs_limit", "{"), 400, "bad_request")
	wantError(t, c.as("alice", alicePass).do(http.MethodPut, "/b/_revs_limit", "3"), 403, "forbidden")
	wantError(t, c.anon().do(http.MethodGet, "/a/_revs_limit", nil), 401, "unauthorized")

	var revs []string
	for i := range 5 {
		body := map[string]any{"v": i}
		if len(revs) > 0 {
			body["_rev"] = revs[len(revs)-1]
		}
		revs = append(revs, c.putDoc("a", "n", body))
	}
	if m := c.as("alice", alicePass).must(http.StatusOK, http.MethodPut, "/a/_revs_limit", "3").json(t); m["ok"] != true {
		t.Fatalf("PUT _revs_limit = %v", m)
	}
	if r := c.must(http.StatusOK, http.MethodGet, "/a/_revs_limit", nil); string(r.body) != "3\n" {
		t.Fatalf("GET _revs_limit after PUT 3 = %q", r.body)
	}
	if r := c.must(http.StatusOK, http.MethodGet, "/b/_revs_limit", nil); string(r.body) != "1000\n" {
		t.Fatalf("another database's _revs_limit = %q", r.body)
	}
	ids := func() int {
		d := c.must(http.StatusOK, http.MethodGet, "/a/n?revs=true", nil).json(t)
		return len(d["_revisions"].(map[string]any)["ids"].([]any))
	}
	if n := ids(); n != 5 {
		t.Fatalf("%d revisions before the next write, want 5 (stemmed at the next write, as CouchDB)", n)
	}
	c.putDoc("a", "n", map[string]any{"_rev": revs[4], "v": 5})
	if n := ids(); n != 3 {
		t.Fatalf("%d revisions after a write with _revs_limit 3", n)
	}
	// Replicated paths longer than the limit are stemmed when written.
	hs := make([]string, 10)
	for i := range hs {
		hs[i] = fmt.Sprintf("h%d", 10-i)
	}
	c.must(http.StatusCreated, http.MethodPost, "/a/_bulk_docs",
		`{"new_edits":false,"docs":[{"_id":"long","_rev":"10-h10","_revisions":{"start":10,"ids":["`+strings.Join(hs, `","`)+`"]}}]}`)
	d := c.must(http.StatusOK, http.MethodGet, "/a/long?revs=true", nil).json(t)
	if got := d["_revisions"].(map[string]any)["ids"].([]any); len(got) != 3 {
		t.Fatalf("replicated path of 10 kept %d revisions with _revs_limit 3", len(got))
	}
}
