package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
)

// Reading a document with many conflicting leaves must be linear. Each
// revision open_revs or _bulk_get named used to be a separate store read
// of the whole revision tree, so n leaves cost O(n²): 10,000 planted
// leaves made one GET ?open_revs=all take 160 s of a core, paid again by every client
// that replicates the document. Against the built binary: reading 10,000
// leaves must take about 10x the time of 1,000 (within 25x; n log n is
// about 13x, quadratic 100x), by open_revs=all, open_revs=[list] and
// _bulk_get (by id, and by every revision with revs and latest as
// PouchDB asks).
func TestRelayManyLeavesReadLinear(t *testing.T) {
	r := startStoreRelay(t)
	r.must(http.StatusCreated, http.MethodPut, "/hostile", nil)
	small, big := plantLeaves(r, "thousand", 1000), plantLeaves(r, "ten-thousand", 10_000)

	reads := []leafRead{
		{name: "open_revs=all", method: http.MethodGet, url: "/hostile/%s?open_revs=all"},
		{name: "open_revs=[list]", method: http.MethodGet, url: "/hostile/%s?latest=true&open_revs=%s"},
		{name: "_bulk_get by id", method: http.MethodPost, url: "/hostile/_bulk_get",
			body: func(id string, _ []string) []byte { return []byte(`{"docs":[{"id":"` + id + `"}]}`) }},
		{name: "_bulk_get by revision", method: http.MethodPost, url: "/hostile/_bulk_get?revs=true&latest=true", body: leafBulkBody},
	}
	const ratio = 25
	for _, rd := range reads {
		fast, slow := time.Hour, time.Hour
		ok := true
		for i := range 6 { // the first is a warm-up
			took, done := rd.do(t, r, "thousand", small, 10*time.Minute)
			if ok = ok && done; i > 0 {
				fast = min(fast, took)
			}
		}
		// A quadratic read would take minutes: stop it past the ratio.
		limit := max(ratio*fast, 2*time.Second)
		for range 5 {
			if !ok {
				break
			}
			took, done := rd.do(t, r, "ten-thousand", big, limit)
			ok = ok && done
			slow = min(slow, took)
		}
		if !ok {
			continue
		}
		t.Logf("%s: 1,000 leaves %v, 10,000 leaves %v (x%.1f)", rd.name, fast, slow, float64(slow)/float64(fast))
		if slow > ratio*fast {
			t.Errorf("%s of 10,000 leaves took %v, %.1fx the %v of 1,000: not linear", rd.name, slow, float64(slow)/float64(fast), fast)
		}
	}

	// One request names at most couchapi.MaxOpenRevs revisions.
	over := append(append([]string{}, big...), "2-"+strings.Repeat("f", 32))
	if n := len(over); n <= couchapi.MaxOpenRevs {
		t.Fatalf("%d revisions do not exceed MaxOpenRevs %d", n, couchapi.MaxOpenRevs)
	}
	if status, out := r.do(http.MethodGet, "/hostile/ten-thousand?open_revs="+leafRevList(over), nil); status != http.StatusBadRequest {
		t.Errorf("open_revs of %d revisions: %d %s, want 400", len(over), status, trimBody(out))
	}
	if status, out := r.do(http.MethodPost, "/hostile/_bulk_get", leafBulkBody("ten-thousand", over)); status != http.StatusBadRequest {
		t.Errorf("_bulk_get of %d revisions: %d %s, want 400", len(over), status, trimBody(out))
	}
}

// plantLeaves stores n conflicting leaves of document id in database
// hostile with one new_edits:false _bulk_docs and returns their
// revisions.
func plantLeaves(r *storeRelay, id string, n int) []string {
	var b bytes.Buffer
	revs := make([]string, n)
	b.WriteString(`{"new_edits":false,"docs":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		revs[i] = fmt.Sprintf("1-%032x", i)
		fmt.Fprintf(&b, `{"_id":%q,"_rev":%q,"x":%d}`, id, revs[i], i)
	}
	b.WriteString("]}")
	r.must(http.StatusCreated, http.MethodPost, "/hostile/_bulk_docs", b.Bytes())
	return revs
}

// leafRead is one way to read every leaf of a document: a request whose
// url has the document id for its first %s and the revision list for a
// second one, with the body made by body (nil: none).
type leafRead struct {
	name        string
	method, url string
	body        func(id string, revs []string) []byte
}

// leafRevList is revs as an open_revs query value.
func leafRevList(revs []string) string {
	b, _ := json.Marshal(revs)
	return url.QueryEscape(string(b))
}

// leafBulkBody is a _bulk_get body naming every revision of revs of id.
func leafBulkBody(id string, revs []string) []byte {
	refs := make([]map[string]string, len(revs))
	for i, rev := range revs {
		refs[i] = map[string]string{"id": id, "rev": rev}
	}
	b, _ := json.Marshal(map[string]any{"docs": refs})
	return b
}

// do reads id's leaves once, checks that all n came back, and returns
// the time taken; a request slower than limit is an error (false).
func (rd leafRead) do(t *testing.T, r *storeRelay, id string, revs []string, limit time.Duration) (time.Duration, bool) {
	t.Helper()
	u := r.env.url + rd.url
	if strings.Count(rd.url, "%s") == 2 {
		u = fmt.Sprintf(u, id, leafRevList(revs))
	} else if strings.Contains(rd.url, "%s") {
		u = fmt.Sprintf(u, id)
	}
	var body io.Reader
	if rd.body != nil {
		body = bytes.NewReader(rd.body(id, revs))
	}
	req, err := http.NewRequest(rd.method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(r.env.user, r.env.password)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := (&http.Client{Timeout: limit}).Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the long URL
		}
		t.Errorf("%s of %d leaves: %v (limit %v): not linear", rd.name, len(revs), err, limit)
		return 0, false
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s of %d leaves: %d %s %v", rd.name, len(revs), resp.StatusCode, trimBody(out), err)
	}
	if got := bytes.Count(out, []byte(`"_rev":`)); got != len(revs) {
		t.Fatalf("%s of %d leaves answered %d revisions", rd.name, len(revs), got)
	}
	return took, true
}
