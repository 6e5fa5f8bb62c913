package couchapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// chunkedReader hides the length of a body so the request is sent with
// chunked transfer encoding.
type chunkedReader struct{ io.Reader }

func TestRequestTooLarge(t *testing.T) {
	_, c := newTestServer(t, func(cfg *Config) { cfg.MaxRequestBytes = 2000; cfg.MaxDocumentBytes = 1000 })
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	big := fmt.Sprintf(`{"new_edits":false,"docs":[{"_id":"big","_rev":"1-a","data":"%s"}]}`, strings.Repeat("x", 5000))
	// Declared length over the limit: refused before the body is read.
	wantError(t, c.do(http.MethodPost, "/a/_bulk_docs", big), 413, "too_large")
	// Chunked body over the limit: refused while reading, nothing stored.
	req := httptest.NewRequest(http.MethodPost, "/a/_bulk_docs", chunkedReader{strings.NewReader(big)})
	req.SetBasicAuth("admin", adminPass)
	req.Header.Set("Content-Type", "application/json")
	if req.ContentLength != 0 && req.ContentLength != -1 {
		t.Fatalf("content length %d", req.ContentLength)
	}
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	wantError(t, resp{rec.Code, rec.Header(), rec.Body.Bytes()}, 413, "too_large")
	for _, path := range []string{"/a/big", "/a/_local/big"} {
		if r := c.do(http.MethodGet, path, nil); r.status != 404 {
			t.Fatalf("%s stored: %d", path, r.status)
		}
	}
	if info := c.must(http.StatusOK, http.MethodGet, "/a", nil).json(t); info["update_seq"] != "0" {
		t.Fatalf("something was written: %v", info)
	}
	// One document over MaxDocumentBytes in a request under the limit.
	doc := fmt.Sprintf(`{"docs":[{"_id":"small","v":1},{"_id":"d","data":"%s"}]}`, strings.Repeat("y", 1200))
	r := c.do(http.MethodPost, "/a/_bulk_docs", doc)
	wantError(t, r, 413, "document_too_large")
	if r.json(t)["reason"] != "d" {
		t.Fatalf("reason %s", r.body)
	}
	wantError(t, c.do(http.MethodGet, "/a/small", nil), 404, "not_found")
	wantError(t, c.do(http.MethodPut, "/a/d", fmt.Sprintf(`{"data":"%s"}`, strings.Repeat("y", 1200))), 413, "document_too_large")
	wantError(t, c.do(http.MethodPut, "/a/_local/d", fmt.Sprintf(`{"data":"%s"}`, strings.Repeat("y", 1200))), 413, "document_too_large")
	// Other routes are limited too.
	wantError(t, c.do(http.MethodPost, "/a/_all_docs", fmt.Sprintf(`{"keys":["%s"]}`, strings.Repeat("k", 3000))), 413, "too_large")
}

// Malformed input is a 400 in CouchDB's shape, never a 500 or a panic.
func TestMalformedInput(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	c.putDoc("a", "d", map[string]any{"v": 1})
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/a/_bulk_docs", ""},
		{"POST", "/a/_bulk_docs", "null"},
		{"POST", "/a/_bulk_docs", `"docs"`},
		{"POST", "/a/_bulk_docs", `{"docs":[{"_id":"x","_revisions":5,"_rev":"1-a"}],"new_edits":false}`},
		{"POST", "/a/_bulk_docs", `{"docs":[{"_id":"x","_revisions":{"start":1,"ids":["a","b"]},"_rev":"1-a"}],"new_edits":false}`},
		{"POST", "/a/_bulk_docs", `{"docs":[{"_id":"x","_revisions":{"start":1,"ids":["b"]},"_rev":"1-a"}],"new_edits":false}`},
		{"POST", "/a/_bulk_docs", `{"docs":[{"_id":"x","_revisions":{"start":2,"ids":["a",""]},"_rev":"2-a"}],"new_edits":false}`},
		{"POST", "/a/_bulk_docs", `{"docs":[{"_id":"x","_revisions":{"start":2,"ids":["a",7]},"_rev":"2-a"}],"new_edits":false}`},
		{"POST", "/a/_bulk_docs", `{"docs":[{"_id":"x","_deleted":"yes","_rev":"2-a"}],"new_edits":false}`},
		{"POST", "/a/_bulk_get", "[]"},
		{"POST", "/a/_bulk_get", `{"docs":[{"id":"d","rev":"1-"}]`},
		{"POST", "/a/_revs_diff", `{"d":{}}`},
		{"POST", "/a/_all_docs", `{"keys":[1,2]}`},
		{"POST", "/a/_changes?filter=_selector", `{"selector":[]}`},
		{"POST", "/a/_changes?filter=_selector", `{"selector":{"a":{"$regex":"x"}}}`},
		{"POST", "/a/_changes?filter=_selector", `{"selector":{"a.b":1}}`},
		{"POST", "/a/_changes?filter=_doc_ids", `{"doc_ids":"d"}`},
		{"GET", "/a/_changes?filter=_selector", ""},
		{"GET", "/a/_changes?since=abc", ""},
		{"GET", "/a/_changes?since=-1", ""},
		{"GET", "/a/_changes?limit=-1", ""},
		{"GET", "/a/_changes?limit=1.5", ""},
		{"GET", "/a/_changes?heartbeat=0", ""},
		{"GET", "/a/_changes?heartbeat=x", ""},
		{"GET", "/a/_changes?timeout=-5", ""},
		{"GET", "/a/_changes?feed=eventsource", ""},
		{"GET", "/a/_changes?style=weird", ""},
		{"GET", "/a/_changes?filter=ddoc/f", ""},
		{"GET", "/a/_changes?descending=true", ""},
		{"GET", "/a/_changes?include_docs=yes", ""},
		{"GET", "/a/d?rev=x", ""},
		{"GET", "/a/d?rev=1-", ""},
		{"GET", "/a/d?revs=2", ""},
		{"GET", "/a/d?open_revs=[", ""},
		{"PUT", "/a/d2", "{"},
		{"PUT", "/a/d2", `{"_rev":5}`},
		{"PUT", "/a/d2?rev=abc-def", `{}`},
		{"DELETE", "/a/d?rev=x", ""},
		{"PUT", "/a/_local/x", `{"_rev":[]}`},
		{"GET", "/a/%FF", ""},
		{"POST", "/_session", "{"},
		{"POST", "/_session", `{"name":1,"password":2}`},
		{"GET", "/a/_all_docs?startkey=%22a", ""},
		{"GET", "/a/_all_docs?endkey={}", ""},
	} {
		r := c.do(tc.method, tc.path, tc.body)
		if r.status < 400 || r.status >= 500 {
			t.Errorf("%s %s %q: status %d: %s", tc.method, tc.path, tc.body, r.status, r.body)
			continue
		}
		wantError(t, r, r.status, "")
	}
}

func TestMemoryDatabases(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryDatabases()
	if err := m.Create(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := m.Create(ctx, "a"); !errors.Is(err, ErrExists) {
		t.Fatal(err)
	}
	if err := m.Create(ctx, "B"); !errors.Is(err, ErrIllegalName) {
		t.Fatal(err)
	}
	st, _ := m.Open(ctx, "a")
	if err := m.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Info(ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, "a"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatal(err)
	}
	m.Close()
	if _, err := m.List(ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatal(err)
	}
}
