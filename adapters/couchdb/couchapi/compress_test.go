package couchapi

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// seedCompress writes 40 small documents and one of about 3 KiB into
// database "a", so that most answers about them exceed CompressMinBytes.
func seedCompress(t testing.TB, c *client) {
	t.Helper()
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	var docs []string
	for i := range 40 {
		docs = append(docs, fmt.Sprintf(`{"_id":"note-%02d","_rev":"1-n%d","type":"plain","path":"folder/note %d.md"}`, i, i, i))
	}
	docs = append(docs, fmt.Sprintf(`{"_id":"big","_rev":"1-b","type":"leaf","data":"%s"}`, strings.Repeat("chunk data ", 300)))
	c.must(http.StatusCreated, http.MethodPost, "/a/_bulk_docs", `{"new_edits":false,"docs":[`+strings.Join(docs, ",")+`]}`)
}

func gunzip(t testing.TB, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("broken gzip: %v", err)
	}
	return out
}

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sameJSON(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("not JSON: %v: %.200q", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("not JSON: %v: %.200q", err, b)
	}
	return reflect.DeepEqual(x, y)
}

func hasVary(h http.Header) bool {
	for _, v := range h.Values("Vary") {
		if strings.Contains(v, "Accept-Encoding") {
			return true
		}
	}
	return false
}

// Compressed answers decode to the same JSON as uncompressed ones;
// small answers stay plain with their length.
func TestCompressedAnswers(t *testing.T) {
	_, c := newTestServer(t, nil)
	seedCompress(t, c)
	var ids, keys, conflicts []string
	for i := range 40 {
		ids = append(ids, fmt.Sprintf(`"note-%02d":["2-x","1-n%d"]`, i, i))
		keys = append(keys, fmt.Sprintf(`"note-%02d"`, i))
		conflicts = append(conflicts, fmt.Sprintf(`{"_id":"note-%02d","_rev":"1-wrong"}`, i))
	}
	revsDiff := "{" + strings.Join(ids, ",") + "}"
	bulkGet := `{"docs":[{"id":"big"},{"id":"note-01"},{"id":"note-02"}]}`
	for _, tc := range []struct {
		name, method, path, body string
		gzip                     bool // compressed for a client that accepts gzip
	}{
		{"_all_docs with docs (streamed)", http.MethodGet, "/a/_all_docs?include_docs=true", "", true},
		{"_all_docs keys", http.MethodPost, "/a/_all_docs", `{"keys":[` + strings.Join(keys, ",") + `]}`, true},
		{"_all_docs, small (streamed)", http.MethodGet, "/a/_all_docs?limit=1", "", false},
		{"_bulk_get", http.MethodPost, "/a/_bulk_get?revs=true", bulkGet, true},
		{"document", http.MethodGet, "/a/big", "", true},
		{"open_revs", http.MethodGet, "/a/big?open_revs=all", "", true},
		{"small document", http.MethodGet, "/a/note-01", "", false},
		{"normal _changes", http.MethodGet, "/a/_changes?include_docs=true", "", true},
		{"longpoll _changes with rows: answered at once", http.MethodGet, "/a/_changes?feed=longpoll", "", false},
		{"small _changes (flushed)", http.MethodGet, "/a/_changes?limit=1", "", false},
		{"_revs_diff", http.MethodPost, "/a/_revs_diff", revsDiff, true},
		{"_bulk_docs answer (conflicts)", http.MethodPost, "/a/_bulk_docs", `{"docs":[` + strings.Join(conflicts, ",") + `]}`, true},
		{"_up", http.MethodGet, "/_up", "", false},
		{"error", http.MethodGet, "/a/nope", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain := c.do(tc.method, tc.path, tc.body)
			gz := c.with(http.Header{"Accept-Encoding": {"gzip"}}).do(tc.method, tc.path, tc.body)
			if plain.status != gz.status {
				t.Fatalf("status %d plain, %d gzip", plain.status, gz.status)
			}
			if ce := plain.header.Get("Content-Encoding"); ce != "" {
				t.Fatalf("compressed for a client that did not ask: %q", ce)
			}
			if feed := strings.Contains(tc.path, "longpoll"); feed != !hasVary(gz.header) || feed != !hasVary(plain.header) {
				t.Fatalf("Vary: Accept-Encoding on a feed, or missing elsewhere: %v / %v", plain.header, gz.header)
			}
			body := gz.body
			if tc.gzip {
				if gz.header.Get("Content-Encoding") != "gzip" || gz.header.Get("Content-Length") != "" {
					t.Fatalf("header %v", gz.header)
				}
				body = gunzip(t, gz.body)
				if len(gz.body) >= len(body) {
					t.Errorf("compressed %d bytes into %d", len(body), len(gz.body))
				}
			} else {
				if ce := gz.header.Get("Content-Encoding"); ce != "" {
					t.Fatalf("a small answer (%d bytes) was compressed", len(gz.body))
				}
				if len(gz.body) >= CompressMinBytes && !strings.Contains(tc.path, "longpoll") {
					t.Fatalf("%d bytes: the test case should compress", len(gz.body))
				}
			}
			if cl := gz.header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(gz.body)) {
				t.Fatalf("Content-Length %s for %d bytes", cl, len(gz.body))
			}
			if !sameJSON(t, plain.body, body) {
				t.Fatalf("answers differ:\nplain %.300s\ngzip  %.300s", plain.body, body)
			}
		})
	}
	// multipart/mixed (kivik) is compressed too; its boundary is random.
	gz := c.with(http.Header{"Accept-Encoding": {"gzip"}, "Accept": {"multipart/mixed"}}).must(http.StatusOK, http.MethodGet, "/a/big?open_revs=all", nil)
	if gz.header.Get("Content-Encoding") != "gzip" || !strings.Contains(string(gunzip(t, gz.body)), `"_id":"big"`) {
		t.Fatalf("multipart: %v", gz.header)
	}
}

// Only clients that accept gzip get it, and CompressionOff never
// compresses.
func TestCompressionNegotiation(t *testing.T) {
	_, c := newTestServer(t, nil)
	seedCompress(t, c)
	_, off := newTestServer(t, func(cfg *Config) { cfg.Compression = CompressionOff })
	seedCompress(t, off)
	for _, tc := range []struct {
		accept string
		want   bool
	}{
		{"", false},
		{"gzip", true},
		{"GZIP", true},
		{"x-gzip", true},
		{"deflate, gzip;q=0.5, br", true},
		{"gzip;q=0", false},
		{"gzip; q=0.000", false},
		{"gzip;q=nonsense", false},
		{"deflate, br", false},
		{"identity", false},
		{"*", true},
		{"*;q=0", false},
		{"gzip;q=0, *", false},
		{"br, *;q=0.1", true},
	} {
		t.Run(tc.accept, func(t *testing.T) {
			h := http.Header{}
			if tc.accept != "" {
				h.Set("Accept-Encoding", tc.accept)
			}
			r := c.with(h).must(http.StatusOK, http.MethodGet, "/a/_all_docs?include_docs=true", nil)
			if got := r.header.Get("Content-Encoding") == "gzip"; got != tc.want {
				t.Fatalf("compressed %v, want %v", got, tc.want)
			}
			r = off.with(h).must(http.StatusOK, http.MethodGet, "/a/_all_docs?include_docs=true", nil)
			if r.header.Get("Content-Encoding") != "" || hasVary(r.header) || !json.Valid(r.body) {
				t.Fatalf("CompressionOff: %v", r.header)
			}
		})
	}
	if err := (Config{Databases: NewMemoryDatabases(), AllowAnonymousRead: true, Compression: 7}).Validate(); err == nil {
		t.Fatal("an unknown Compression was accepted")
	}
}

// HEAD answers are never compressed: no body, the plain answer's length.
func TestCompressionHead(t *testing.T) {
	_, c := newTestServer(t, nil)
	seedCompress(t, c)
	gz := c.with(http.Header{"Accept-Encoding": {"gzip"}})
	for _, path := range []string{"/a/big", "/a", "/a/_changes?include_docs=true", "/a/_all_docs?include_docs=true"} {
		plain := c.must(http.StatusOK, http.MethodGet, path, nil)
		head := gz.must(http.StatusOK, http.MethodHead, path, nil)
		if len(head.body) != 0 || head.header.Get("Content-Encoding") != "" {
			t.Fatalf("HEAD %s: %v %q", path, head.header, head.body)
		}
		if cl := head.header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(plain.body)) {
			t.Fatalf("HEAD %s: Content-Length %s, GET sends %d bytes", path, cl, len(plain.body))
		}
		if !hasVary(head.header) {
			t.Fatalf("HEAD %s: no Vary", path)
		}
	}
}

// A continuous feed asked for with Accept-Encoding: gzip is sent plain,
// and each row and heartbeat is flushed when it is written.
func TestCompressionSkipsFeeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, c := bubbleServer(t)
		seedChanges(t, c)
		big := strings.Repeat("x", 2*CompressMinBytes)
		ctx, disconnect := context.WithCancel(t.Context())
		req := feedRequest(ctx, "/a/_changes?feed=continuous&since=9&heartbeat=2000&include_docs=true")
		req.Header.Set("Accept-Encoding", "gzip")
		w, done := serve(s, req)
		time.Sleep(time.Second)
		c.putDoc("a", "late", map[string]any{"v": big})
		time.Sleep(4500 * time.Millisecond)
		synctest.Wait()
		want := []string{`0s:"{\"seq\":\"10\"`, `1s:"{\"seq\":\"11\",\"id\":\"late\"`, `3s:"\n"`, `5s:"\n"`}
		log := w.flushLog()
		if len(log) != len(want) {
			t.Fatalf("flushes %v", log)
		}
		for i := range want {
			if !strings.HasPrefix(log[i], want[i]) {
				t.Fatalf("flush %d = %.80s, want %s…", i, log[i], want[i])
			}
		}
		disconnect()
		synctest.Wait()
		if !isDone(done) {
			t.Fatal("the feed outlived its client")
		}
		if ce := w.header.Get("Content-Encoding"); ce != "" {
			t.Fatalf("continuous feed compressed: %q", ce)
		}

		// A longpoll with heartbeats, likewise.
		req = feedRequest(t.Context(), "/a/_changes?feed=longpoll&since=now&heartbeat=1000")
		req.Header.Set("Accept-Encoding", "gzip")
		w, done = serve(s, req)
		time.Sleep(2500 * time.Millisecond)
		c.putDoc("a", "later", map[string]any{"v": big})
		synctest.Wait()
		if !isDone(done) {
			t.Fatal("longpoll did not answer")
		}
		log = w.flushLog()
		if len(log) != 3 || log[0] != `1s:"{\"results\":[\n\n"` || log[1] != `2s:"\n"` || !strings.HasPrefix(log[2], `2.5s:"{\"seq\":\"12\"`) {
			t.Fatalf("longpoll flushes %v", log)
		}
		if ce := w.header.Get("Content-Encoding"); ce != "" || !json.Valid([]byte(w.body())) {
			t.Fatalf("longpoll: %q %q", ce, w.body())
		}
	})
}

// Over a real connection: a client that asks for gzip reads a continuous
// feed line by line, each before the next change exists; Go's transport
// decompresses a compressed answer transparently.
func TestCompressionOverHTTP(t *testing.T) {
	s, c := newTestServer(t, nil)
	seedCompress(t, c)
	ts := httptest.NewServer(s)
	defer ts.Close()

	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/a/_all_docs?include_docs=true", nil)
	req.SetBasicAuth("admin", adminPass)
	res, err := ts.Client().Do(req) // the transport adds Accept-Encoding: gzip
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !res.Uncompressed || !sameJSON(t, b, c.must(http.StatusOK, http.MethodGet, "/a/_all_docs?include_docs=true", nil).body) {
		t.Fatalf("uncompressed %v: %.200s", res.Uncompressed, b)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/a/_changes?feed=continuous&since=now&heartbeat=100", nil)
	req.SetBasicAuth("admin", adminPass)
	req.Header.Set("Accept-Encoding", "gzip") // set by hand: the transport does not decompress
	res, err = ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ce := res.Header.Get("Content-Encoding"); ce != "" {
		t.Fatalf("feed compressed: %q", ce)
	}
	rd := bufio.NewReader(res.Body)
	line := func() string {
		l, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("feed: %v", err)
		}
		return l
	}
	if l := line(); l != "\n" {
		t.Fatalf("first line %q, want a heartbeat", l)
	}
	for i := range 3 {
		id := fmt.Sprintf("live-%d", i)
		c.putDoc("a", id, map[string]any{"data": strings.Repeat("y", 4096)})
		l := line()
		for l == "\n" {
			l = line()
		}
		if !strings.Contains(l, `"id":"`+id+`"`) {
			t.Fatalf("row %d: %q", i, l)
		}
	}
}

// Request bodies sent with Content-Encoding: gzip are decompressed, with
// the request limit applied to the decompressed size.
func TestCompressedRequests(t *testing.T) {
	s, c := newTestServer(t, func(cfg *Config) { cfg.MaxRequestBytes = 64 << 10 })
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	send := func(method, path string, body []byte, encoding string, chunked bool) resp {
		t.Helper()
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		if chunked {
			rd = chunkedReader{rd}
		}
		req := httptest.NewRequest(method, path, rd)
		req.SetBasicAuth("admin", adminPass)
		req.Header.Set("Content-Type", "application/json")
		if encoding != "" {
			req.Header.Set("Content-Encoding", encoding)
		}
		if chunked {
			req.ContentLength = -1
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return resp{rec.Code, rec.Header(), rec.Body.Bytes()}
	}
	docs := []byte(`{"docs":[{"_id":"x","v":1},{"_id":"y","v":2}]}`)
	if r := send(http.MethodPost, "/a/_bulk_docs", gzipBytes(t, docs), "gzip", false); r.status != http.StatusCreated {
		t.Fatalf("gzip _bulk_docs: %d %s", r.status, r.body)
	}
	if r := send(http.MethodPut, "/a/z", gzipBytes(t, []byte(`{"v":3}`)), "x-gzip", true); r.status != http.StatusCreated {
		t.Fatalf("x-gzip PUT: %d %s", r.status, r.body)
	}
	if r := send(http.MethodPut, "/a/w", []byte(`{"v":4}`), "identity", false); r.status != http.StatusCreated {
		t.Fatalf("identity PUT: %d %s", r.status, r.body)
	}
	for _, id := range []string{"x", "y", "z", "w"} {
		c.must(http.StatusOK, http.MethodGet, "/a/"+id, nil)
	}
	seq := c.must(http.StatusOK, http.MethodGet, "/a", nil).json(t)["update_seq"]

	// A gzip bomb: 20 KiB that inflate to 20 MiB.
	bomb := gzipBytes(t, []byte(`{"docs":[{"_id":"bomb","data":"`+strings.Repeat("0", 20<<20)+`"}]}`))
	if len(bomb) > 64<<10 {
		t.Fatalf("bomb of %d bytes", len(bomb))
	}
	for _, chunked := range []bool{false, true} {
		wantError(t, send(http.MethodPost, "/a/_bulk_docs", bomb, "gzip", chunked), 413, "too_large")
	}
	wantError(t, send(http.MethodPut, "/a/bomb", bomb, "gzip", false), 413, "too_large")
	// A compressed body over the limit before decompression.
	noise := make([]byte, 100<<10)
	rand.Read(noise)
	wantError(t, send(http.MethodPost, "/a/_bulk_docs", gzipBytes(t, noise), "gzip", true), 413, "too_large")
	// Broken, truncated or mislabelled bodies.
	good := gzipBytes(t, docs)
	wantError(t, send(http.MethodPost, "/a/_bulk_docs", good[:len(good)-5], "gzip", false), 400, "bad_request")
	wantError(t, send(http.MethodPost, "/a/_bulk_docs", docs, "gzip", false), 400, "bad_request")
	wantError(t, send(http.MethodPost, "/a/_bulk_docs", append(append([]byte{}, good...), "junk"...), "gzip", false), 400, "bad_request")
	wantError(t, send(http.MethodPost, "/a/_bulk_docs", docs, "br", false), 415, "bad_content_type")
	wantError(t, send(http.MethodPost, "/a/_bulk_docs", docs, "gzip, br", false), 415, "bad_content_type")
	if r := c.do(http.MethodGet, "/a/bomb", nil); r.status != http.StatusNotFound {
		t.Fatalf("bomb stored: %d", r.status)
	}
	if got := c.must(http.StatusOK, http.MethodGet, "/a", nil).json(t)["update_seq"]; got != seq {
		t.Fatalf("refused requests wrote: update_seq %v, was %v", got, seq)
	}
	// Bodiless requests ignore the header.
	if r := send(http.MethodGet, "/a/x", nil, "br", false); r.status != http.StatusOK {
		t.Fatalf("GET with Content-Encoding: %d", r.status)
	}
}

func FuzzCompressedRequest(f *testing.F) {
	s := fuzzServer(f)
	gz := func(s string) []byte { return gzipBytes(f, []byte(s)) }
	good := gz(`{"docs":[{"_id":"x","v":1}]}`)
	for _, seed := range [][]byte{
		good, good[:len(good)/2], gz(""), gz("{"), gz(`{"docs":[{"_id":"` + strings.Repeat("a", 2<<20) + `"}]}`),
		append(append([]byte{}, good...), good...), {0x1f, 0x8b}, nil,
	} {
		f.Add(seed, "/a/_bulk_docs")
		f.Add(seed, "/a/_revs_diff")
	}
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		if path != "/a/_bulk_docs" && path != "/a/_revs_diff" && path != "/a/_bulk_get" && path != "/a/_all_docs" {
			path = "/a/_bulk_docs"
		}
		fuzzRequest(t, s, http.MethodPost, path, string(body), http.Header{"Content-Encoding": {"gzip"}})
	})
}

// FuzzAcceptEncoding checks that any Accept-Encoding gets the same JSON,
// compressed exactly when acceptsGzip says so.
func FuzzAcceptEncoding(f *testing.F) {
	dbs := NewMemoryDatabases()
	f.Cleanup(func() { dbs.Close() })
	cfg := testConfig(dbs)
	s, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	c := &client{t: f, h: s, user: "admin", pass: adminPass}
	seedCompress(f, c)
	plain := c.must(http.StatusOK, http.MethodGet, "/a/_all_docs?include_docs=true", nil).body
	for _, seed := range []string{"gzip", "gzip;q=0", "*", "br, *;q=0", "x-gzip;q=1.0;level=9", ";;,,", "gzip;q=1e-400"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, ae string) {
		c := &client{t: t, h: s, user: "admin", pass: adminPass}
		r := c.with(http.Header{"Accept-Encoding": {ae}}).must(http.StatusOK, http.MethodGet, "/a/_all_docs?include_docs=true", nil)
		body := r.body
		if gz := r.header.Get("Content-Encoding") == "gzip"; gz != acceptsGzip([]string{ae}) {
			t.Fatalf("%q: compressed %v", ae, gz)
		} else if gz {
			body = gunzip(t, body)
		}
		if !bytes.Equal(body, plain) {
			t.Fatalf("%q: answer differs", ae)
		}
	})
}
