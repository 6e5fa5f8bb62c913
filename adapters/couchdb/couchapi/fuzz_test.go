package couchapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// fuzzServer is a server over memory databases with a seeded database
// "a" (documents with conflicts, a tombstone, chunks, _local docs) and
// anonymous access, so every request reaches the handlers.
func fuzzServer(f *testing.F) *Server {
	dbs := NewMemoryDatabases()
	f.Cleanup(func() { dbs.Close() })
	cfg := testConfig(dbs)
	cfg.AllowAnonymousRead, cfg.AllowAnonymousWrite = true, true
	cfg.ChangesTimeout = 5 * time.Millisecond
	cfg.MaxRequestBytes = 1 << 20
	s, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	c := &client{t: f, h: s, user: "admin", pass: adminPass}
	for _, r := range []struct{ method, path, body string }{
		{"PUT", "/a", ""},
		{"POST", "/a/_bulk_docs", `{"new_edits":false,"docs":[
			{"_id":"d","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"type":"plain"},
			{"_id":"d","_rev":"2-c","_revisions":{"start":2,"ids":["c","a"]},"type":"plain"},
			{"_id":"h:1","_rev":"1-x","type":"leaf","data":"abc"},
			{"_id":"gone","_rev":"3-z","_revisions":{"start":3,"ids":["z","y","x"]},"_deleted":true},
			{"_id":"_design/v","_rev":"1-v"},
			{"_id":"a/b+c%d","_rev":"1-u","type":"plain"}]}`},
		{"PUT", "/a/_local/cp", `{"last_seq":"3"}`},
	} {
		if res := c.do(r.method, r.path, r.body); res.status >= 300 {
			f.Fatalf("seed %s %s: %d %s", r.method, r.path, res.status, res.body)
		}
	}
	return s
}

// fuzzRequest sends one request and checks the answer: never a server
// error, never a panic, a CouchDB-shaped error for 4xx, valid JSON for a
// complete JSON answer.
func fuzzRequest(t *testing.T, s *Server, method, target, body string, header http.Header) {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return // net/http itself refuses such a request line
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, method, "/", strings.NewReader(body))
	req.URL = u
	req.RequestURI = target
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	aborted := false
	func() {
		defer func() {
			if p := recover(); p != nil {
				if p != http.ErrAbortHandler {
					panic(p)
				}
				aborted = true
			}
		}()
		s.ServeHTTP(rec, req)
	}()
	cut := ctx.Err() != nil
	if aborted && !cut {
		t.Fatalf("%s %s %q: answer aborted", method, target, body)
	}
	if rec.Code >= 500 && !(rec.Code == 503 && cut) {
		t.Fatalf("%s %s %q: status %d: %s", method, target, body, rec.Code, rec.Body.Bytes())
	}
	ct := rec.Header().Get("Content-Type")
	if method == http.MethodHead || cut || ct != "application/json" {
		return
	}
	b := rec.Body.Bytes()
	if feed := u.Query().Get("feed"); strings.HasSuffix(u.Path, "/_changes") && (feed == "continuous" || feed == "live") {
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Fatalf("%s %s: invalid continuous line %q", method, target, line)
			}
		}
		return
	}
	if !json.Valid(b) {
		t.Fatalf("%s %s %q: invalid JSON answer (%d): %q", method, target, body, rec.Code, b)
	}
	if rec.Code >= 400 {
		var e struct{ Error, Reason string }
		if json.Unmarshal(b, &e) != nil || e.Error == "" || e.Reason == "" {
			t.Fatalf("%s %s: error answer not in CouchDB's shape: %s", method, target, b)
		}
	}
}

func FuzzBulkDocs(f *testing.F) {
	s := fuzzServer(f)
	for _, seed := range []string{
		`{"docs":[{"_id":"x","v":1}]}`,
		`{"new_edits":false,"docs":[{"_id":"d","_rev":"3-q","_revisions":{"start":3,"ids":["q","b","a"]}}]}`,
		`{"docs":[{"_id":"d","_rev":"2-b","_deleted":true}]}`,
		`{"docs":[{"_id":"_local/z","v":1},{"_id":"_design/q"},{"_id":"_bad"}]}`,
		`{"docs":[{"_rev":"1-"},{"_rev":"abc-def"}],"new_edits":false}`,
		`{"docs":[1,"x",null,[]]}`,
		`{"docs":[{"_id":"x","_revisions":{"start":-1,"ids":[]}}],"new_edits":false}`,
		`[]`, `null`, ``, `{"docs":`,
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, body string, gzipHint bool) {
		target := "/a/_bulk_docs"
		if gzipHint {
			target += "?batch=ok"
		}
		fuzzRequest(t, s, http.MethodPost, target, body, nil)
	})
}

func FuzzChanges(f *testing.F) {
	s := fuzzServer(f)
	for _, seed := range []struct{ query, body string }{
		{"style=all_docs&since=0&limit=2", ""},
		{"feed=longpoll&since=now&heartbeat=1", ""},
		{"feed=continuous&since=1&include_docs=true&conflicts=true&timeout=1", ""},
		{"filter=_selector", `{"selector":{"type":{"$ne":"leaf"}}}`},
		{"filter=_selector", `{"selector":{"$and":[{"type":{"$in":["plain"]}},{"_id":{"$exists":true}}]}}`},
		{"filter=_doc_ids&doc_ids=[\"d\"]", ""},
		{"filter=_design&limit=0", ""},
		{"since=-1&limit=99999999999999999999999", "[]"},
		{"heartbeat=true&feed=live&timeout=0", ""},
		{"since=now&feed=longpoll&timeout=1", ""},
	} {
		f.Add(seed.query, seed.body, true)
		f.Add(seed.query, seed.body, false)
	}
	f.Fuzz(func(t *testing.T, query, body string, post bool) {
		method := http.MethodGet
		if post {
			method = http.MethodPost
		}
		fuzzRequest(t, s, method, "/a/_changes?"+query, body, nil)
	})
}

func FuzzAllDocsKeys(f *testing.F) {
	s := fuzzServer(f)
	for _, seed := range []struct{ query, body string }{
		{"include_docs=true", `{"keys":["d","gone","nope","a/b+c%d","_design/v"]}`},
		{"include_docs=true&conflicts=true&descending=true", `{"keys":["d"]}`},
		{`startkey="a"&endkey="z"&limit=2&skip=1`, ``},
		{`startkey="z"&endkey="a"&descending=true&inclusive_end=false`, ``},
		{`keys=["d"]&key="x"`, ``},
		{`limit=-1`, `{"keys":null}`},
		{``, `{"keys":[1,{}]}`},
		{`update_seq=true`, `{"include_docs":true,"limit":1}`},
	} {
		f.Add(seed.query, seed.body)
	}
	f.Fuzz(func(t *testing.T, query, body string) {
		method := http.MethodGet
		if body != "" {
			method = http.MethodPost
		}
		fuzzRequest(t, s, method, "/a/_all_docs?"+query, body, nil)
	})
}

func FuzzBulkGet(f *testing.F) {
	s := fuzzServer(f)
	for _, seed := range []struct{ query, body string }{
		{"revs=true&latest=true", `{"docs":[{"id":"d","rev":"2-b"},{"id":"d","rev":"1-a"},{"id":"d"},{"id":"gone","rev":"3-z"}]}`},
		{"revs=true", `{"docs":[{"id":"nope"},{"id":"d","rev":"x"},{"rev":"1-a"},5,null,{"id":7}]}`},
		{"", `{"docs":[{"id":"_local/cp"},{"id":"_design/v","atts_since":["1-a"]}]}`},
		{"open_revs=all", `{"docs":[]}`},
		{"latest=maybe", `{"docs":{}}`},
	} {
		f.Add(seed.query, seed.body)
	}
	f.Fuzz(func(t *testing.T, query, body string) {
		fuzzRequest(t, s, http.MethodPost, "/a/_bulk_get?"+query, body, nil)
	})
}

func FuzzRevsDiff(f *testing.F) {
	s := fuzzServer(f)
	for _, seed := range []string{`{"d":["2-b","3-x"],"e":["1-a"]}`, `{"d":[]}`, `{"d":["x"]}`, `{"":["1-a"]}`, `[]`, `{"d":null}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		fuzzRequest(t, s, http.MethodPost, "/a/_revs_diff", body, nil)
	})
}

// FuzzDocumentRequest covers document, _local and open_revs requests with
// any path, query and body.
func FuzzDocumentRequest(f *testing.F) {
	s := fuzzServer(f)
	for _, seed := range []struct{ method, path, query, body string }{
		{"GET", "/a/d", "open_revs=all&revs=true&latest=true", ""},
		{"GET", "/a/d", `open_revs=["2-b","9-x","1-a"]&latest=true`, ""},
		{"GET", "/a/d", "rev=2-c&revs=true&conflicts=true&meta=true", ""},
		{"GET", "/a/gone", "", ""},
		{"PUT", "/a/new", "", `{"v":1}`},
		{"PUT", "/a/d", "rev=2-b", `{"_rev":"2-c"}`},
		{"PUT", "/a/x", "new_edits=false", `{"_rev":"1-a","_revisions":{"start":1,"ids":["a"]}}`},
		{"DELETE", "/a/d", "rev=2-b", ""},
		{"PUT", "/a/_local/cp", "", `{"_rev":"0-1","last_seq":"4"}`},
		{"DELETE", "/a/_local/cp", "rev=0-1", ""},
		{"GET", "/a/a%2Fb%2Bc%25d", "", ""},
		{"PUT", "/a/_design/v", "", `{}`},
		{"POST", "/a", "", `{"_id":"p"}`},
		{"GET", "/a/_design/v/_view/x", "", ""},
		{"HEAD", "/a/d", "", ""},
		{"PUT", "/b%20c", "", ""},
		{"GET", "/_node/_local/_config/cors", "", ""},
		{"POST", "/_session", "", `{"name":"admin","password":"x"}`},
	} {
		f.Add(seed.method, seed.path, seed.query, seed.body)
	}
	methods := map[string]bool{"GET": true, "HEAD": true, "PUT": true, "POST": true, "DELETE": true, "OPTIONS": true, "COPY": true}
	f.Fuzz(func(t *testing.T, method, path, query, body string) {
		if !methods[method] || !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?# \t\r\n") {
			return
		}
		target := path
		if query != "" {
			target += "?" + query
		}
		fuzzRequest(t, s, method, target, body, nil)
	})
}

// FuzzAuthHeaders covers the Authorization and Cookie parsers.
func FuzzAuthHeaders(f *testing.F) {
	dbs := NewMemoryDatabases()
	f.Cleanup(func() { dbs.Close() })
	s, err := New(testConfig(dbs))
	if err != nil {
		f.Fatal(err)
	}
	c := &client{t: f, h: s}
	cookie := sessionFrom(f, c.do(http.MethodPost, "/_session", map[string]string{"name": "admin", "password": adminPass}))
	for _, seed := range []struct{ auth, cookie string }{
		{"Basic YWRtaW46YWRtaW4tc2VjcmV0", ""},
		{"Basic !!", ""},
		{"Bearer x.y.z", ""},
		{"", "AuthSession=" + cookie},
		{"", "AuthSession=YWxpY2U6MDow"},
		{"", "AuthSession=%%%"},
		{"basic Og==", "AuthSession="},
	} {
		f.Add(seed.auth, seed.cookie)
	}
	f.Fuzz(func(t *testing.T, auth, cookie string) {
		h := http.Header{}
		if auth != "" {
			h.Set("Authorization", auth)
		}
		if cookie != "" {
			h.Set("Cookie", cookie)
		}
		fuzzRequest(t, s, http.MethodGet, "/_session", "", h)
		fuzzRequest(t, s, http.MethodGet, "/_all_dbs", "", h)
	})
}
