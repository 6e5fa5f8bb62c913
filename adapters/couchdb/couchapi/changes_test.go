package couchapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// seedChanges writes 4 notes (seqs 1-4), 3 chunks (5-7), a conflicted
// document (written twice: 8, then 9) and a deleted one (10).
func seedChanges(t *testing.T, c *client) {
	t.Helper()
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	var docs []string
	for i := range 4 {
		docs = append(docs, fmt.Sprintf(`{"_id":"note-%d","_rev":"1-n%d","type":"plain"}`, i, i))
	}
	for i := range 3 {
		docs = append(docs, fmt.Sprintf(`{"_id":"h:c%d","_rev":"1-c%d","type":"leaf","data":"d%d"}`, i, i, i))
	}
	docs = append(docs,
		`{"_id":"conf","_rev":"1-a","type":"plain","v":"a"}`,
		`{"_id":"conf","_rev":"1-b","type":"plain","v":"b"}`,
		`{"_id":"gone","_rev":"2-g","_revisions":{"start":2,"ids":["g","f"]},"_deleted":true,"type":"plain"}`)
	c.must(http.StatusCreated, http.MethodPost, "/a/_bulk_docs", `{"new_edits":false,"docs":[`+strings.Join(docs, ",")+`]}`)
}

type changesAnswer struct {
	Results []struct {
		Seq     string `json:"seq"`
		ID      string `json:"id"`
		Changes []struct {
			Rev string `json:"rev"`
		} `json:"changes"`
		Deleted bool           `json:"deleted"`
		Doc     map[string]any `json:"doc"`
	} `json:"results"`
	LastSeq string `json:"last_seq"`
	Pending *int64 `json:"pending"`
}

func (a changesAnswer) ids() string {
	var s []string
	for _, r := range a.Results {
		s = append(s, r.ID)
	}
	return strings.Join(s, ",")
}

func getChanges(t *testing.T, c *client, method, path string, body any) changesAnswer {
	t.Helper()
	r := c.must(http.StatusOK, method, path, body)
	var a changesAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatalf("%s: %v: %s", path, err, r.body)
	}
	if a.Pending == nil {
		t.Fatalf("%s: no pending: %s", path, r.body)
	}
	return a
}

func TestChangesNormal(t *testing.T) {
	_, c := newTestServer(t, nil)
	seedChanges(t, c)
	all := getChanges(t, c, http.MethodGet, "/a/_changes", nil)
	if all.ids() != "note-0,note-1,note-2,note-3,h:c0,h:c1,h:c2,conf,gone" || all.LastSeq != "10" || *all.Pending != 0 {
		t.Fatalf("all: %s last %s pending %d", all.ids(), all.LastSeq, *all.Pending)
	}
	r := all.Results
	if r[7].Changes[0].Rev != "1-b" || len(r[7].Changes) != 1 || !r[8].Deleted || r[0].Seq != "1" || r[0].Doc != nil {
		t.Fatalf("rows %+v", r)
	}
	// style=all_docs lists every leaf, winner first.
	ad := getChanges(t, c, http.MethodGet, "/a/_changes?style=all_docs&since=7", nil)
	if ad.ids() != "conf,gone" || len(ad.Results[0].Changes) != 2 || ad.Results[0].Changes[1].Rev != "1-a" {
		t.Fatalf("all_docs %+v", ad.Results)
	}
	// Paging with limit: pending says more remain (an upper bound: the
	// writes after last_seq, 6, for 5 documents), until the end.
	p1 := getChanges(t, c, http.MethodGet, "/a/_changes?limit=4", nil)
	if p1.ids() != "note-0,note-1,note-2,note-3" || p1.LastSeq != "4" || *p1.Pending != 6 {
		t.Fatalf("page 1: %s %s %d", p1.ids(), p1.LastSeq, *p1.Pending)
	}
	p2 := getChanges(t, c, http.MethodGet, "/a/_changes?limit=5&since="+p1.LastSeq, nil)
	if p2.ids() != "h:c0,h:c1,h:c2,conf,gone" || p2.LastSeq != "10" || *p2.Pending != 0 {
		t.Fatalf("page 2: %s %s %d", p2.ids(), p2.LastSeq, *p2.Pending)
	}
	// LiveSync's Fast Fetch probe: limit=1, results + pending.
	probe := getChanges(t, c, http.MethodGet, "/a/_changes?feed=normal&since=8&limit=1&include_docs=false", nil)
	if len(probe.Results) != 1 || *probe.Pending != 1 {
		t.Fatalf("probe %+v", probe)
	}
	probe = getChanges(t, c, http.MethodGet, "/a/_changes?feed=normal&since=9&limit=1&include_docs=false", nil)
	if len(probe.Results) != 1 || *probe.Pending != 0 {
		t.Fatalf("probe %+v", probe)
	}
	// limit=0: no rows, the count in pending, last_seq stays.
	z := getChanges(t, c, http.MethodGet, "/a/_changes?limit=0&since=2", nil)
	if len(z.Results) != 0 || *z.Pending != 8 || z.LastSeq != "2" {
		t.Fatalf("limit=0: %+v %d", z, *z.Pending)
	}
	if h := getChanges(t, c, http.MethodGet, "/a/_changes?limit=999999999999999999999", nil); len(h.Results) != 9 {
		t.Fatalf("huge limit: %d rows", len(h.Results))
	}
	// since=now: nothing, at the end.
	if n := getChanges(t, c, http.MethodGet, "/a/_changes?since=now", nil); len(n.Results) != 0 || n.LastSeq != "10" {
		t.Fatalf("since=now %+v", n)
	}
	// include_docs with conflicts; deleted documents come with their tombstone.
	d := getChanges(t, c, http.MethodGet, "/a/_changes?include_docs=true&conflicts=true&since=7", nil)
	if d.Results[0].Doc["_rev"] != "1-b" || fmt.Sprint(d.Results[0].Doc["_conflicts"]) != "[1-a]" || d.Results[1].Doc["_deleted"] != true {
		t.Fatalf("include_docs %+v", d.Results)
	}
	// readChunksOnline: the selector in the POST body; last_seq passes the skipped chunks.
	sel := getChanges(t, c, http.MethodPost, "/a/_changes?filter=_selector&style=all_docs", map[string]any{"selector": map[string]any{"type": map[string]any{"$ne": "leaf"}}})
	if sel.ids() != "note-0,note-1,note-2,note-3,conf,gone" || sel.LastSeq != "10" {
		t.Fatalf("selector: %s %s", sel.ids(), sel.LastSeq)
	}
	sel = getChanges(t, c, http.MethodPost, "/a/_changes?filter=_selector&since=4", map[string]any{"selector": map[string]any{"type": "leaf"}})
	if sel.ids() != "h:c0,h:c1,h:c2" || sel.LastSeq != "10" {
		t.Fatalf("selector from 4: %s %s", sel.ids(), sel.LastSeq)
	}
	// _doc_ids in the body or the query; _design.
	if a := getChanges(t, c, http.MethodPost, "/a/_changes?filter=_doc_ids", map[string]any{"doc_ids": []string{"conf", "note-1", "nope"}}); a.ids() != "note-1,conf" {
		t.Fatalf("doc_ids: %s", a.ids())
	}
	if a := getChanges(t, c, http.MethodGet, `/a/_changes?filter=_doc_ids&doc_ids=["h:c2"]`, nil); a.ids() != "h:c2" {
		t.Fatalf("doc_ids query: %s", a.ids())
	}
	c.putDoc("a", "_design/x", map[string]any{})
	if a := getChanges(t, c, http.MethodGet, "/a/_changes?filter=_design", nil); a.ids() != "_design/x" || a.LastSeq != "11" {
		t.Fatalf("_design: %s %s", a.ids(), a.LastSeq)
	}
	// A longpoll with changes available answers at once, like a normal feed.
	if a := getChanges(t, c, http.MethodGet, "/a/_changes?feed=longpoll&since=8", nil); a.ids() != "conf,gone,_design/x" {
		t.Fatalf("longpoll with changes: %s", a.ids())
	}
	// Query parameters CouchDB accepts and this server ignores.
	getChanges(t, c, http.MethodGet, "/a/_changes?seq_interval=10&attachments=true&revs=true&conflicts=true", nil)
	// An empty POST body is fine.
	getChanges(t, c, http.MethodPost, "/a/_changes", "")
}

// streamWriter is a ResponseWriter that records what was flushed and when
// (in a synctest bubble, on the virtual clock).
type streamWriter struct {
	mu      sync.Mutex
	header  http.Header
	status  int
	buf     bytes.Buffer
	flushed int
	start   time.Time
	flushes []flush
}

type flush struct {
	at   time.Duration
	data string
}

func newStreamWriter() *streamWriter {
	return &streamWriter{header: http.Header{}, start: time.Now()}
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == 0 {
		w.status = code
	}
}

func (w *streamWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.buf.Write(b)
}

func (w *streamWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	data := w.buf.String()[w.flushed:]
	w.flushed = w.buf.Len()
	w.flushes = append(w.flushes, flush{time.Since(w.start), data})
}

func (w *streamWriter) body() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// flushTimes lists when something was flushed, and what (heartbeats as
// "\n", rows by id).
func (w *streamWriter) flushLog() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, f := range w.flushes {
		out = append(out, fmt.Sprintf("%v:%q", f.at, f.data))
	}
	return out
}

// serve runs one request in the background; done closes when the
// handler returns. An aborted answer (http.ErrAbortHandler) is recorded.
func serve(s *Server, req *http.Request) (*streamWriter, chan struct{}) {
	w := newStreamWriter()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil && p != http.ErrAbortHandler {
				panic(p)
			}
		}()
		s.ServeHTTP(w, req)
	}()
	return w, done
}

func feedRequest(ctx context.Context, path string) *http.Request {
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	req.SetBasicAuth("admin", adminPass)
	return req
}

func isDone(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// bubbleServer makes a server inside the current synctest bubble, so its
// stores' channels and timers are the bubble's.
func bubbleServer(t *testing.T) (*Server, *client) {
	return newTestServer(t, nil)
}

func TestLongpollWaitsForAChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, c := bubbleServer(t)
		seedChanges(t, c)
		w, done := serve(s, feedRequest(t.Context(), "/a/_changes?feed=longpoll&since=now&timeout=10000"))
		synctest.Wait()
		if isDone(done) {
			t.Fatalf("longpoll answered before any change: %s", w.body())
		}
		time.Sleep(3 * time.Second)
		c.putDoc("a", "late", map[string]any{"v": 1})
		synctest.Wait()
		if !isDone(done) {
			t.Fatal("longpoll did not answer the change")
		}
		var a changesAnswer
		if err := json.Unmarshal([]byte(w.body()), &a); err != nil || a.ids() != "late" || a.LastSeq != "11" {
			t.Fatalf("answer %q (%v)", w.body(), err)
		}
		if got := w.flushLog(); len(got) != 1 || !strings.HasPrefix(got[0], "3s:") {
			t.Fatalf("flushes %v, want one at 3s", got)
		}
	})
}

func TestLongpollTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, c := bubbleServer(t)
		seedChanges(t, c)
		// A selector that nothing new matches: the feed waits past the chunk.
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/a/_changes?feed=longpoll&since=now&timeout=5000&filter=_selector",
			strings.NewReader(`{"selector":{"type":"plain"}}`))
		req.SetBasicAuth("admin", adminPass)
		req.Header.Set("Content-Type", "application/json")
		w, done := serve(s, req)
		time.Sleep(2 * time.Second)
		c.must(http.StatusCreated, http.MethodPost, "/a/_bulk_docs", `{"new_edits":false,"docs":[{"_id":"h:new","_rev":"1-x","type":"leaf"}]}`)
		synctest.Wait()
		if isDone(done) {
			t.Fatal("a change the selector rejects ended the longpoll")
		}
		time.Sleep(3*time.Second - time.Nanosecond)
		synctest.Wait()
		if isDone(done) {
			t.Fatal("answered before the timeout")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !isDone(done) {
			t.Fatal("no answer at the timeout")
		}
		if got := w.body(); got != "{\"results\":[\n\n],\n\"last_seq\":\"11\",\"pending\":0}\n" {
			t.Fatalf("timeout answer %q", got)
		}
	})
}

func TestLongpollHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, c := bubbleServer(t)
		seedChanges(t, c)
		w, done := serve(s, feedRequest(t.Context(), "/a/_changes?feed=longpoll&since=now&heartbeat=1000&timeout=2000"))
		// With a heartbeat the feed outlives both timeout and the server's
		// 60 s changes timeout.
		time.Sleep(90*time.Second + 500*time.Millisecond)
		synctest.Wait()
		if isDone(done) {
			t.Fatal("a heartbeat longpoll ended without a change")
		}
		c.putDoc("a", "late", map[string]any{"v": 1})
		synctest.Wait()
		if !isDone(done) {
			t.Fatal("no answer after the change")
		}
		log := w.flushLog()
		if len(log) != 91 || log[0] != `1s:"{\"results\":[\n\n"` || log[1] != `2s:"\n"` || log[89] != `1m30s:"\n"` || !strings.HasPrefix(log[90], `1m30.5s:"{\"seq\":\"11\"`) {
			t.Fatalf("flushes (%d) %v … %v", len(log), log[:3], log[len(log)-2:])
		}
		var a changesAnswer
		if err := json.Unmarshal([]byte(w.body()), &a); err != nil || a.ids() != "late" {
			t.Fatalf("answer with heartbeats is not valid JSON: %v %q", err, w.body())
		}
	})
}

func TestContinuousFeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, c := bubbleServer(t)
		seedChanges(t, c)
		ctx, disconnect := context.WithCancel(t.Context())
		w, done := serve(s, feedRequest(ctx, "/a/_changes?feed=continuous&since=7&heartbeat=2000&include_docs=true"))
		time.Sleep(time.Second)
		c.putDoc("a", "late", map[string]any{"v": 1})
		time.Sleep(4500 * time.Millisecond)
		synctest.Wait()
		want := []string{
			`0s:"{\"seq\":\"9\"`, `1s:"{\"seq\":\"11\",\"id\":\"late\"`, `3s:"\n"`, `5s:"\n"`,
		}
		log := w.flushLog()
		if len(log) != len(want) {
			t.Fatalf("flushes %v", log)
		}
		for i := range want {
			if !strings.HasPrefix(log[i], want[i]) {
				t.Fatalf("flush %d = %s, want %s…", i, log[i], want[i])
			}
		}
		lines := strings.Split(strings.TrimSpace(w.body()), "\n")
		if len(lines) != 3 || !strings.Contains(lines[0], `"id":"conf"`) || !strings.Contains(lines[1], `"id":"gone","changes":[{"rev":"2-g"}],"deleted":true,"doc":{`) {
			t.Fatalf("lines %q", lines)
		}
		// The client goes away: the handler returns at once, nothing leaks
		// (synctest.Test fails on goroutines left behind).
		disconnect()
		synctest.Wait()
		if !isDone(done) {
			t.Fatal("the feed outlived its client")
		}
		if r := w.status; r != http.StatusOK || w.header.Get("Content-Type") != "application/json" {
			t.Fatalf("status %d, header %v", r, w.header)
		}
	})
}

func TestContinuousLimitAndTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, c := bubbleServer(t)
		seedChanges(t, c)
		// limit: two rows exist, the third arrives at 1 s and ends the feed.
		w, done := serve(s, feedRequest(t.Context(), "/a/_changes?feed=continuous&since=7&limit=3"))
		time.Sleep(time.Second)
		c.putDoc("a", "third", map[string]any{})
		synctest.Wait()
		if !isDone(done) {
			t.Fatal("limit did not end the feed")
		}
		lines := strings.Split(strings.TrimSpace(w.body()), "\n")
		if len(lines) != 4 || lines[3] != `{"last_seq":"11","pending":0}` {
			t.Fatalf("lines %q", lines)
		}
		// timeout without heartbeat: ends 4 s after the last change.
		w, done = serve(s, feedRequest(t.Context(), "/a/_changes?feed=continuous&since=11&timeout=4000"))
		time.Sleep(2 * time.Second)
		c.putDoc("a", "fourth", map[string]any{})
		time.Sleep(4*time.Second - time.Nanosecond)
		synctest.Wait()
		if isDone(done) {
			t.Fatal("ended before the timeout")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !isDone(done) {
			t.Fatal("did not end at the timeout")
		}
		lines = strings.Split(strings.TrimSpace(w.body()), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], `"id":"fourth"`) || lines[1] != `{"last_seq":"12","pending":0}` {
			t.Fatalf("lines %q", lines)
		}
		// limit=0 ends at once with the pending count.
		w, done = serve(s, feedRequest(t.Context(), "/a/_changes?feed=continuous&since=9&limit=0"))
		synctest.Wait()
		if !isDone(done) || strings.TrimSpace(w.body()) != `{"last_seq":"9","pending":3}` {
			t.Fatalf("limit=0: %q", w.body())
		}
	})
}

// Close ends every feed the way a timeout would, waits for them, and
// refuses later requests.
func TestCloseEndsFeeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, c := bubbleServer(t)
		seedChanges(t, c)
		lw, ldone := serve(s, feedRequest(t.Context(), "/a/_changes?feed=longpoll&since=now&heartbeat=1000"))
		cw, cdone := serve(s, feedRequest(t.Context(), "/a/_changes?feed=continuous&since=now&heartbeat=1000"))
		pw, pdone := serve(s, feedRequest(t.Context(), "/a/_changes?feed=longpoll&since=now"))
		time.Sleep(1500 * time.Millisecond)
		closed := make(chan struct{})
		go func() { s.Close(); close(closed) }()
		synctest.Wait()
		if !isDone(closed) || !isDone(ldone) || !isDone(cdone) || !isDone(pdone) {
			t.Fatal("Close did not end the feeds")
		}
		var a changesAnswer
		if err := json.Unmarshal([]byte(lw.body()), &a); err != nil || a.LastSeq != "10" {
			t.Fatalf("longpoll after Close: %q %v", lw.body(), err)
		}
		if err := json.Unmarshal([]byte(pw.body()), &a); err != nil || a.LastSeq != "10" {
			t.Fatalf("longpoll (no heartbeat) after Close: %q %v", pw.body(), err)
		}
		if got := cw.body(); !strings.HasSuffix(got, "\n{\"last_seq\":\"10\",\"pending\":0}\n") {
			t.Fatalf("continuous after Close: %q", got)
		}
		wantError(t, c.do(http.MethodGet, "/a", nil), 503, "service_unavailable")
	})
}

// Deleting the database ends its feeds.
func TestDeleteDatabaseEndsFeeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, c := bubbleServer(t)
		seedChanges(t, c)
		_, done := serve(s, feedRequest(t.Context(), "/a/_changes?feed=continuous&since=now&heartbeat=1000"))
		w2, done2 := serve(s, feedRequest(t.Context(), "/a/_changes?feed=longpoll&since=now"))
		time.Sleep(500 * time.Millisecond)
		c.must(http.StatusOK, http.MethodDelete, "/a", nil)
		synctest.Wait()
		if !isDone(done) || !isDone(done2) {
			t.Fatal("feeds outlived their database")
		}
		wantError(t, resp{w2.status, w2.header, []byte(w2.body())}, 404, "not_found")
	})
}

// pending is an upper bound while changes remain and exactly 0 at the end
// (LiveSync's Fast Fetch stops when results + pending is 0).
func TestChangesPendingSeqs(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	for i := range 5 {
		c.putDoc("a", "d"+strconv.Itoa(i), map[string]any{})
	}
	since := "0"
	for range 10 {
		a := getChanges(t, c, http.MethodGet, "/a/_changes?limit=2&since="+since, nil)
		if int64(len(a.Results))+*a.Pending == 0 {
			return
		}
		if len(a.Results) == 0 {
			t.Fatalf("pending %d but no rows after %s", *a.Pending, since)
		}
		since = a.LastSeq
	}
	t.Fatal("the feed never ended")
}
