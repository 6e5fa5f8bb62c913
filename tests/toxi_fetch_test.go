package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/activity"
	"github.com/livesync-go/livesync-go/engine/fetch"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/tests/internal/faultnet"
)

// wireLog records chunk requests (POST _all_docs with keys): when each
// started and ended, and its ids. One is kept at the 5xx proxy (what
// reached the server's side of the network) and one in the client's
// transport (the requests the fetcher made: net/http may send one again
// on a fresh connection when a kept-alive one is reset before any answer,
// since the adapter marks reads replayable).
type wireLog struct {
	mu   sync.Mutex
	reqs []*wireReq
	open map[*http.Request]*wireReq
}

type wireReq struct {
	start, end time.Time
	ids        []string
	status     int
}

func isChunkRead(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/_all_docs")
}

func chunkReadIDs(b []byte) []string {
	var body struct {
		Keys []string `json:"keys"`
	}
	_ = json.Unmarshal(b, &body)
	return body.Keys
}

func (w *wireLog) begin(r *http.Request, ids []string) {
	w.mu.Lock()
	wr := &wireReq{start: time.Now(), ids: ids}
	w.reqs = append(w.reqs, wr)
	w.open[r] = wr
	w.mu.Unlock()
}

func (w *wireLog) finish(r *http.Request, status int) {
	w.mu.Lock()
	if wr := w.open[r]; wr != nil {
		wr.end, wr.status = time.Now(), status
		delete(w.open, r)
	}
	w.mu.Unlock()
}

// newWireLog records the chunk requests that pass h.
func newWireLog(h *faultnet.HTTPProxy) *wireLog {
	w := &wireLog{open: map[*http.Request]*wireReq{}}
	h.OnRequest(func(r *http.Request) {
		if !isChunkRead(r) {
			return
		}
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		w.begin(r, chunkReadIDs(b))
	})
	h.OnDone(w.finish)
	return w
}

// clientLog is an http.RoundTripper that records the chunk requests a
// client makes before its transport sends them.
type clientLog struct {
	*wireLog
	next http.RoundTripper
}

func newClientLog() *clientLog {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32 // as the adapter's own pool
	return &clientLog{wireLog: &wireLog{open: map[*http.Request]*wireReq{}}, next: tr}
}

func (c *clientLog) RoundTrip(r *http.Request) (*http.Response, error) {
	if !isChunkRead(r) || r.GetBody == nil {
		return c.next.RoundTrip(r)
	}
	body, err := r.GetBody()
	if err != nil {
		return nil, err
	}
	b, _ := io.ReadAll(body)
	c.begin(r, chunkReadIDs(b))
	resp, err := c.next.RoundTrip(r)
	status := 0
	if err == nil {
		status = resp.StatusCode
	}
	c.finish(r, status)
	return resp, err
}

// snapshot returns the requests so far; an unfinished one ends now.
func (w *wireLog) snapshot() []wireReq {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]wireReq, len(w.reqs))
	for i, r := range w.reqs {
		out[i] = *r
		if out[i].end.IsZero() {
			out[i].end = time.Now()
		}
	}
	return out
}

// timesAsked is when each request carrying id started.
func (w *wireLog) timesAsked(id string) []time.Time {
	var out []time.Time
	for _, r := range w.snapshot() {
		if slices.Contains(r.ids, id) {
			out = append(out, r.start)
		}
	}
	return out
}

// checkWire fails t if one request carried an id twice or more than 100
// ids, or two overlapping requests carried the same id.
func (w *wireLog) checkWire(t *testing.T) {
	t.Helper()
	reqs := w.sorted()
	for i, r := range reqs {
		seen := map[string]bool{}
		for _, id := range r.ids {
			if seen[id] {
				t.Errorf("request %d carried %s twice", i, id)
			}
			seen[id] = true
		}
		if len(r.ids) > couchdb.MaxChunkKeys {
			t.Errorf("request %d carried %d ids", i, len(r.ids))
		}
		for j := i + 1; j < len(reqs) && reqs[j].start.Before(r.end); j++ {
			for _, id := range reqs[j].ids {
				if seen[id] {
					t.Errorf("%s was on the wire in two requests at once (%d and %d)", id, i, j)
				}
			}
		}
	}
}

// checkPacing fails t if two requests started less than minInterval
// apart, less 15 ms: the fetcher reserves a start before it builds the
// request, and the machine is shared with parallel tests.
func (w *wireLog) checkPacing(t *testing.T, minInterval time.Duration) {
	t.Helper()
	reqs := w.sorted()
	for i := 1; i < len(reqs); i++ {
		if gap := reqs[i].start.Sub(reqs[i-1].start); gap < minInterval-15*time.Millisecond {
			t.Errorf("requests %d and %d started %v apart, want at least %v", i-1, i, gap, minInterval)
		}
	}
}

func (w *wireLog) sorted() []wireReq {
	reqs := w.snapshot()
	slices.SortFunc(reqs, func(a, b wireReq) int { return a.start.Compare(b.start) })
	return reqs
}

// toxiChunks writes n plain chunks ("leaf" documents) to a fresh
// database and returns them by id.
func toxiChunks(t *testing.T, n int) (*couchdb.DB, map[string]string) {
	t.Helper()
	direct := freshDB(t, couchServer, nil)
	codec, err := livesync.New(livesync.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for i := range n * 4 {
		fmt.Fprintf(&text, "line %d of the note whose chunks are read on demand through a bad network\n", i)
	}
	_, cs, err := codec.FileDocs("toxi.md", []byte(text.String()), 1700000000000, 1700000000000)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	var docs []json.RawMessage
	for i, c := range cs {
		if _, dup := want[c.ID]; dup {
			continue
		}
		want[c.ID] = c.Data
		b, _ := json.Marshal(map[string]any{"_id": c.ID, "_rev": fmt.Sprintf("1-%032x", i+1), "type": "leaf", "data": c.Data})
		docs = append(docs, b)
	}
	upPush(t, direct, docs)
	return direct, want
}

// toxiRetrieval is engine/fetch's read path over the chunk source of db
// reached through toxiproxy and the HTTP proxy.
type toxiRetrieval struct {
	retrieval
	st engine.LocalChunks
}

const (
	toxiMinInterval = 50 * time.Millisecond
	toxiRetryStep   = 150 * time.Millisecond
	toxiRetryCap    = 300 * time.Millisecond
)

func newToxiRetrieval(t *testing.T, act *activity.Tracker, src engine.ChunkSource) toxiRetrieval {
	t.Helper()
	st := newMemoryStore(t)
	r := retrieval{act: act, claims: fetch.NewCoordinator()}
	var err error
	cfg := fetch.Config{MinInterval: toxiMinInterval, RetryStep: toxiRetryStep, RetryCap: toxiRetryCap}
	if r.f, err = fetch.New(cfg, fetch.Deps{Source: src, Local: st, Activity: act, Claims: r.claims}); err != nil {
		t.Fatal(err)
	}
	if r.layer, err = fetch.NewLayer(fetch.LayerConfig{}, fetch.LayerDeps{Local: st, Activity: act, Claims: r.claims, Fetcher: r.f}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.layer.Close(); r.f.Close(); r.claims.Close() })
	return toxiRetrieval{r, st}
}

// readAll reads ids through the layer and fails t unless each is found
// with its data.
func (r toxiRetrieval) readAll(t *testing.T, ids []string, want map[string]string) {
	t.Helper()
	res, err := r.layer.Get(ctxT(t), ids, fetch.ReadOptions{WaitForReady: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range res {
		if !x.OK || x.Chunk.Data != want[ids[i]] {
			t.Fatalf("%s after the fault healed: ok %v, err %v", ids[i], x.OK, x.Err)
		}
	}
}

// noMissing fails t if a result says the remote lacks a chunk it has, and
// returns how many reads failed.
func noMissing(t *testing.T, what string, res []fetch.Result) int {
	t.Helper()
	failed := 0
	for _, x := range res {
		if errors.Is(x.Err, fetch.ErrRemoteMissing) {
			t.Fatalf("%s: a chunk the server has ended as remote-missing: %v", what, x.Err)
		}
		if !x.OK {
			failed++
		}
	}
	return failed
}

// TestToxiFetchRules: on-demand chunk reads (engine/fetch over the CouchDB
// chunk source) through toxiproxy (latency 20±5 ms up, slicer down) and,
// behind it, the 5xx proxy, with every chunk request on the wire recorded.
//
//   - reset: every connection reset. Reads end failed, none as
//     remote-missing; healed, the same fetcher reads every chunk.
//   - 5xx: the first two requests answered 503 and 502. Exactly the ids of
//     those requests fail (never remote-missing); the rest arrive; healed,
//     all arrive.
//   - omission: three ids the server lacks, read while a finite
//     replication runs. They are asked again after the backoff (150 ms,
//     then 300 ms: each retry at least that long after the last ask), and
//     end remote-missing only after the replication ended (a current
//     final probe), never before.
//   - final probe fails: the same, but the network resets connections
//     when the replication ends: the final probe's transport error ends
//     the ids as failed, not remote-missing.
//
// Throughout: no request on the wire carries an id twice or more than 100
// ids, no id is in two requests on the wire at once, and the fetcher's
// requests start at least 50 ms apart (a request net/http sends again
// after a reset is counted, not paced: it is the same request).
func TestToxiFetchRules(t *testing.T) {
	t.Parallel()
	direct, want := toxiChunks(t, 250)
	ids := make([]string, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	e := couchServer(t)
	// The client, toxiproxy, the 5xx proxy (which records the wire), the
	// server: the client sees the TCP faults themselves.
	h := toxiHTTP(t, e.url)
	wire := newWireLog(h)
	p := toxiProxy(t, hostOf(t, h.URL()))
	toxiMust(t, p.Latency("latency", faultnet.Up, 20*time.Millisecond, 5*time.Millisecond))
	toxiMust(t, p.Slicer("slicer", faultnet.Down, 1024, 512, 50*time.Microsecond))
	client := newClientLog()
	db := openDB(t, couchServer, direct.Name(), false, func(c *couchdb.Config) {
		c.URL, c.HTTPClient = p.URL(), &http.Client{Transport: client}
	})
	src := db.ChunkSource(nil)
	act := activity.New(nil)
	t.Cleanup(act.Close)
	t.Logf("%d chunks on the server", len(ids))

	t.Run("reset", func(t *testing.T) {
		r := newToxiRetrieval(t, act, src)
		toxiMust(t, p.ResetPeer("reset", faultnet.Down, 0))
		res, err := r.layer.Get(ctxT(t), ids, fetch.ReadOptions{WaitForReady: true})
		if err != nil {
			t.Fatal(err)
		}
		if failed := noMissing(t, "reset", res); failed != len(ids) {
			t.Errorf("%d of %d reads failed through resets", failed, len(ids))
		}
		toxiMust(t, p.Remove("reset"))
		r.readAll(t, ids, want)
		if s := r.f.Stats(); s.RemoteMissing != 0 || s.Failures != uint64(len(ids)) || s.Delivered != uint64(len(ids)) {
			t.Errorf("fetcher stats %+v", s)
		}
	})

	t.Run("5xx", func(t *testing.T) {
		r := newToxiRetrieval(t, act, src)
		before := len(wire.snapshot())
		h.Burst(2, func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/_all_docs") }, 503, 502)
		res, err := r.layer.Get(ctxT(t), ids, fetch.ReadOptions{WaitForReady: true})
		if err != nil {
			t.Fatal(err)
		}
		failedIDs := 0
		for _, q := range wire.snapshot()[before:] {
			if q.status >= 500 {
				failedIDs += len(q.ids)
			}
		}
		if failed := noMissing(t, "5xx", res); failed != failedIDs || failed == 0 {
			t.Errorf("%d reads failed, the 5xx answers carried %d ids", failed, failedIDs)
		}
		r.readAll(t, ids, want)
	})

	t.Run("omission", func(t *testing.T) { testToxiOmission(t, act, src, client.wireLog, p, false) })
	t.Run("final_probe_fails", func(t *testing.T) { testToxiOmission(t, act, src, client.wireLog, p, true) })
	wire.checkWire(t)
	client.checkPacing(t, toxiMinInterval)
	sent, onWire := len(client.snapshot()), len(wire.snapshot())
	t.Logf("%d chunk requests sent, %d reached the server's side (%d sent again by net/http after a reset)", sent, onWire, onWire-sent)
	if onWire < sent {
		t.Errorf("fewer requests on the wire than sent")
	}
}

// testToxiOmission reads three ids the server lacks while a finite
// replication runs; when the client has asked for them three times, the
// replication ends (with failProbe, after every connection is set to be
// reset).
func testToxiOmission(t *testing.T, act *activity.Tracker, src engine.ChunkSource, sent *wireLog, p *faultnet.Proxy, failProbe bool) {
	r := newToxiRetrieval(t, act, src)
	absent := []string{"h:toxiabsent1" + t.Name()[len(t.Name())-3:], "h:toxiabsent2" + t.Name()[len(t.Name())-3:], "h:toxiabsent3" + t.Name()[len(t.Name())-3:]}
	ctx := ctxT(t)
	release := make(chan struct{})
	finiteDone := make(chan time.Time, 1)
	go func() {
		_ = act.RunFinite(ctx, "pull", func(context.Context) error { <-release; return nil })
		finiteDone <- time.Now()
	}()
	pollFor(t, "the finite replication", 5*time.Second, func() bool { return act.State().Finite > 0 })
	type outcome struct {
		res []fetch.Result
		at  time.Time
	}
	got := make(chan outcome, 1)
	go func() {
		res, err := r.layer.Get(ctx, absent, fetch.ReadOptions{WaitForReady: true})
		if err != nil {
			t.Error(err)
		}
		got <- outcome{res, time.Now()}
	}()
	pollFor(t, "three asks of each absent id", 10*time.Second, func() bool {
		select {
		case o := <-got:
			t.Fatalf("the read ended while the replication ran: %+v", o.res)
		default:
		}
		return len(sent.timesAsked(absent[0])) >= 3
	})
	if failProbe {
		toxiMust(t, p.ResetPeer("probe", faultnet.Down, 0))
		defer func() { toxiMust(t, p.Remove("probe")) }()
	}
	close(release)
	ended := <-finiteDone
	o := <-got
	asked := sent.timesAsked(absent[0])
	for i := 1; i < len(asked)-1; i++ { // the last ask may be the final probe: it does not wait
		if gap, min := asked[i].Sub(asked[i-1]), min(time.Duration(i)*toxiRetryStep, toxiRetryCap); gap < min-15*time.Millisecond {
			t.Errorf("retry %d of %s came %v after the previous ask, want at least %v", i, absent[0], gap, min)
		}
	}
	if o.at.Before(ended) {
		t.Errorf("the read ended before the replication")
	}
	for i, x := range o.res {
		switch {
		case x.OK:
			t.Errorf("%s: found", absent[i])
		case failProbe && errors.Is(x.Err, fetch.ErrRemoteMissing):
			t.Errorf("%s: remote-missing from a final probe that failed in transport", absent[i])
		case failProbe && !isTransportErr(x.Err):
			t.Errorf("%s: %v, want the final probe's transport error", absent[i], x.Err)
		case !failProbe && !errors.Is(x.Err, fetch.ErrRemoteMissing):
			t.Errorf("%s: %v, want remote-missing after the final probe", absent[i], x.Err)
		}
	}
	t.Logf("asked %d times (%v); ended %v after the replication: %v", len(asked), gaps(asked), o.at.Sub(ended).Round(time.Millisecond), o.res[0].Err)
}

func isTransportErr(err error) bool {
	var e *engine.Error
	return errors.As(err, &e) && e.Stage == engine.StageTransport
}

func gaps(ts []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(ts); i++ {
		out = append(out, ts[i].Sub(ts[i-1]).Round(time.Millisecond))
	}
	return out
}
