package couchapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// open_revs=all and _bulk_get by id answer every leaf, deleted ones
// included, winner first, as CouchDB does (they are read with one
// store.GetRevs call now; the Store port used to list only the winner and
// its non-deleted conflicts).
func TestOpenRevsAllLeavesDeletedIncluded(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	c.must(http.StatusCreated, http.MethodPost, "/a/_bulk_docs", `{"new_edits":false,"docs":[
		{"_id":"d","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"v":"b"},
		{"_id":"d","_rev":"3-c","_revisions":{"start":3,"ids":["c","x","a"]},"_deleted":true,"v":"c"}]}`)
	r := c.must(http.StatusOK, http.MethodGet, "/a/d?open_revs=all", nil)
	if want := `[{"ok":{"_id":"d","_rev":"2-b","v":"b"}},{"ok":{"_id":"d","_rev":"3-c","_deleted":true,"v":"c"}}]` + "\n"; string(r.body) != want {
		t.Fatalf("open_revs=all = %s, want %s", r.body, want)
	}
	r = c.must(http.StatusOK, http.MethodPost, "/a/_bulk_get", `{"docs":[{"id":"d"}]}`)
	if !strings.Contains(string(r.body), `"_rev":"2-b"`) || !strings.Contains(string(r.body), `"_rev":"3-c"`) {
		t.Fatalf("_bulk_get by id = %s", r.body)
	}
}

// One request names at most MaxOpenRevs revisions.
func TestOpenRevsCap(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	revs := make([]string, MaxOpenRevs+1)
	refs := make([]map[string]string, len(revs))
	for i := range revs {
		revs[i] = fmt.Sprintf("1-%032x", i)
		refs[i] = map[string]string{"id": "d", "rev": revs[i]}
	}
	list, _ := json.Marshal(revs)
	wantError(t, c.do(http.MethodGet, "/a/d?open_revs="+url.QueryEscape(string(list)), nil), 400, "bad_request")
	body, _ := json.Marshal(map[string]any{"docs": refs})
	wantError(t, c.do(http.MethodPost, "/a/_bulk_get", string(body)), 400, "bad_request")
	// At the cap it is answered (every revision missing).
	list, _ = json.Marshal(revs[:MaxOpenRevs])
	if l := c.must(http.StatusOK, http.MethodGet, "/a/d?open_revs="+url.QueryEscape(string(list)), nil).list(t); len(l) != MaxOpenRevs {
		t.Fatalf("open_revs of %d revisions answered %d", MaxOpenRevs, len(l))
	}
}
