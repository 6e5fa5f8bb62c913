//go:build !js

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/wasm/workers/internal/sqlitexec"
)

// upstreamServer is a CouchDB-protocol server (couchapi over memory) as
// an upstream, with a log of the hunt's requests to it.
type upstreamServer struct {
	t   *testing.T
	url string
	api *couchapi.Server

	// slow delays every request that is not the hunt's by this much.
	slow time.Duration

	mu       sync.Mutex
	hunts    []time.Time // starts of the hunt's requests (POST _all_docs with keys)
	inFlight int
	maxIn    int
	requests int
}

const (
	upDB       = "up"
	upPassword = "up-secret-password"
)

func newUpstream(t *testing.T) *upstreamServer {
	t.Helper()
	api, err := couchapi.New(couchapi.Config{Databases: couchapi.NewMemoryDatabases(),
		Users: []couchapi.User{{Name: "admin", Password: upPassword, Admin: true}}, PasswordIterations: 1000})
	if err != nil {
		t.Fatal(err)
	}
	u := &upstreamServer{t: t, api: api}
	srv := httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { api.Close() })
	u.url = srv.URL
	u.ok("PUT", "/"+upDB, nil)
	return u
}

func (u *upstreamServer) serve(w http.ResponseWriter, r *http.Request) {
	hunt := r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/_all_docs")
	u.mu.Lock()
	u.requests++
	if hunt {
		u.hunts = append(u.hunts, time.Now())
		u.inFlight++
		u.maxIn = max(u.maxIn, u.inFlight)
	}
	u.mu.Unlock()
	if !hunt && u.slow > 0 {
		select {
		case <-time.After(u.slow):
		case <-r.Context().Done():
		}
	}
	u.api.ServeHTTP(w, r)
	if hunt {
		u.mu.Lock()
		u.inFlight--
		u.mu.Unlock()
	}
}

// huntLog returns the starts of the hunt's requests and the most in
// flight at once.
func (u *upstreamServer) huntLog() ([]time.Time, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.hunts), u.maxIn
}

func (u *upstreamServer) client() jsonClient {
	return jsonClient{t: u.t, url: u.url, user: "admin", password: upPassword}
}

func (u *upstreamServer) do(method, path string, body any) (int, []byte) {
	u.t.Helper()
	return u.client().do(method, path, body)
}

func (u *upstreamServer) ok(method, path string, body any) []byte {
	u.t.Helper()
	return u.client().ok(method, path, body)
}

func (u *upstreamServer) push(docs ...json.RawMessage) {
	u.t.Helper()
	u.ok("POST", "/"+upDB+"/_bulk_docs", map[string]any{"docs": docs, "new_edits": false})
}

func (u *upstreamServer) has(id string) bool {
	u.t.Helper()
	code, _ := u.do("GET", "/"+upDB+"/"+url.PathEscape(id), nil)
	return code == 200
}

// upstreamsVar is LIVESYNC_UPSTREAMS naming u for the test database.
func (u *upstreamServer) upstreamsVar(mode string) string {
	b, _ := json.Marshal([]upstreamSetting{{DB: testDB, Name: "couch", URL: u.url + "/" + upDB, User: "admin",
		Password: upPassword, Mode: mode}})
	return string(b)
}

// runCron runs the isolate's cron task once and returns its report of
// the test database.
func (w *isolate) runCron() cronReport {
	w.t.Helper()
	reps, err := w.app.cronRun(context.Background())
	if err != nil {
		w.t.Fatalf("cron run: %v", err)
	}
	if len(reps) != 1 || reps[0].DB != testDB {
		w.t.Fatalf("cron run reported %+v", reps)
	}
	return reps[0]
}

// A note whose metadata a client pushed to the Worker while its chunk is
// only upstream is held until one cron run hunts the chunk there (the
// upstream a hunt source only) and releases it.
func TestCronReleasesHeldNote(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	up.push(chunk("h:a1"))
	w := newIsolate(t, newD1(t), map[string]string{"LIVESYNC_UPSTREAMS": up.upstreamsVar("source")})
	w.push(meta("n1", "1-aa", "h:a1"))
	if w.served("n1", "1-aa") {
		t.Fatal("metadata without its chunk is served before the cron run")
	}
	rep := w.runCron()
	if rep.Ended != "caught up" || rep.Held != 0 || rep.Released != 1 {
		t.Fatalf("report: %+v", rep)
	}
	if !w.served("n1", "1-aa") {
		t.Fatal("the note is not served after the cron run")
	}
	if hunts, _ := up.huntLog(); len(hunts) != 1 {
		t.Fatalf("%d hunt requests upstream, want 1", len(hunts))
	}
	if rep.Queries > defaultCronQueries || rep.Queries == 0 {
		t.Fatalf("%d D1 queries", rep.Queries)
	}
	t.Logf("one run: %d D1 queries, %d upstream requests", rep.Queries, rep.Subrequests)
}

// A sync upstream: one run pulls what was written upstream and pushes
// what clients wrote to the Worker; a note the Worker holds is released
// by the pull of its chunk and then pushed.
func TestCronSyncBothWays(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	up.push(chunk("h:u1"), meta("fromup", "1-uu", "h:u1"), chunk("h:h1"))
	w := newIsolate(t, newD1(t), map[string]string{"LIVESYNC_UPSTREAMS": up.upstreamsVar("")})
	w.push(chunk("h:w1"), meta("fromworker", "1-ww", "h:w1"))
	w.push(meta("held", "1-hh", "h:h1"))
	if w.served("held", "1-hh") || w.served("fromup", "1-uu") {
		t.Fatal("served before the cron run")
	}
	rep := w.runCron()
	if rep.Ended != "caught up" || len(rep.Upstreams) != 1 || rep.Upstreams[0].State != "live" {
		t.Fatalf("report: %+v", rep)
	}
	for _, id := range []string{"fromup", "held"} {
		if !w.served(id, map[string]string{"fromup": "1-uu", "held": "1-hh"}[id]) {
			t.Errorf("%s is not served after the run", id)
		}
	}
	for _, id := range []string{"fromworker", "h:w1", "held"} {
		if !up.has(id) {
			t.Errorf("%s did not reach the upstream", id)
		}
	}
}

// The hunt's per-source limits hold across runs: a second run right
// after the first starts no request the first one's window forbids.
func TestCronHuntLimitsAcrossRuns(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	w := newIsolate(t, newD1(t), map[string]string{"LIVESYNC_UPSTREAMS": up.upstreamsVar("source"),
		"LIVESYNC_HUNT_MAX_PER_WINDOW": "2", "LIVESYNC_HUNT_MAX_IN_FLIGHT": "1", "LIVESYNC_HUNT_WINDOW": "60",
		"LIVESYNC_CRON_BUDGET": "2"})
	for i := range 5 {
		w.push(meta(fmt.Sprintf("n%d", i), "1-aa", fmt.Sprintf("h:missing%d", i)))
	}
	for run := range 2 {
		rep := w.runCron()
		if rep.Ended != "budget" || rep.Held != 5 {
			t.Fatalf("run %d: %+v", run+1, rep)
		}
	}
	hunts, maxIn := up.huntLog()
	if len(hunts) != 2 || maxIn != 1 {
		t.Fatalf("%d hunt requests upstream in two runs (%d at once), want 2 (1): the window of 2 per 60 s", len(hunts), maxIn)
	}
}

// One run at a time per database: a run that finds the lease held by
// another leaves the database alone; a lease whose time ran out is taken
// over.
func TestCronLease(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	path := newD1(t)
	w := newIsolate(t, path, map[string]string{"LIVESYNC_UPSTREAMS": up.upstreamsVar("source")})
	up.push(chunk("h:a1"))
	w.push(meta("n1", "1-aa", "h:a1"))
	x, err := sqlitexec.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	ctx := context.Background()
	other, err := takeLease(ctx, x, testDB, "other-isolate", time.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := takeLease(ctx, x, testDB, "third", time.Now(), time.Minute); err == nil {
		t.Fatal("a held lease was taken")
	}
	up.mu.Lock()
	before := up.requests
	up.mu.Unlock()
	rep := w.runCron()
	if !strings.Contains(rep.Skipped, "lease") || w.served("n1", "1-aa") {
		t.Fatalf("a run with the lease held elsewhere: %+v", rep)
	}
	up.mu.Lock()
	sent := up.requests - before
	up.mu.Unlock()
	if sent != 0 {
		t.Fatalf("the skipped run sent %d requests upstream", sent)
	}
	// The holder's time runs out (it crashed): the next run takes over.
	if _, err := takeLease(ctx, x, testDB, "other-isolate", time.Now().Add(-2*time.Minute), time.Minute); err != nil {
		t.Fatal(err)
	}
	if rep := w.runCron(); rep.Skipped != "" || !w.served("n1", "1-aa") {
		t.Fatalf("a run after the lease ran out: %+v", rep)
	}
	// A run gives its lease up: the lease row is gone, other's renewal fails.
	if err := other.renew(ctx, time.Now(), time.Minute); err != nil {
		t.Fatalf("renewing after the run released: %v", err)
	}
}

// An upstream that was reset (its database deleted and created again)
// is noticed, and replication starts from zero: what the Worker has is
// pushed again.
func TestCronUpstreamReset(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	w := newIsolate(t, newD1(t), map[string]string{"LIVESYNC_UPSTREAMS": up.upstreamsVar("")})
	w.push(chunk("h:w1"), meta("fromworker", "1-ww", "h:w1"))
	if rep := w.runCron(); rep.Ended != "caught up" || !up.has("fromworker") {
		t.Fatalf("first run: %+v", rep)
	}
	up.ok("DELETE", "/"+upDB, nil)
	up.ok("PUT", "/"+upDB, nil)
	rep := w.runCron()
	if rep.Ended != "caught up" || len(rep.Upstreams) != 1 || rep.Upstreams[0].Resets != 1 {
		t.Fatalf("second run: %+v", rep)
	}
	if !up.has("fromworker") || !up.has("h:w1") {
		t.Fatal("the reset upstream did not get the Worker's documents again")
	}
}

// A run stops before its D1 query cap and the next goes on from where
// it stopped.
func TestCronQueryBudget(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	var docs []json.RawMessage
	for i := range 1000 {
		docs = append(docs, chunk(fmt.Sprintf("h:c%04d", i)), meta(fmt.Sprintf("n%04d", i), "1-aa", fmt.Sprintf("h:c%04d", i)))
	}
	up.push(docs...)
	const limit = 100
	w := newIsolate(t, newD1(t), map[string]string{"LIVESYNC_UPSTREAMS": up.upstreamsVar("pull"),
		"LIVESYNC_CRON_MAX_QUERIES": fmt.Sprint(limit)})
	runs := 0
	for ; runs < 20; runs++ {
		rep := w.runCron()
		if rep.Queries > limit {
			t.Fatalf("run %d made %d D1 queries, over its cap of %d", runs+1, rep.Queries, limit)
		}
		if rep.Ended == "caught up" {
			break
		}
		if rep.Ended != "query budget" {
			t.Fatalf("run %d: %+v", runs+1, rep)
		}
	}
	if runs == 0 || runs == 20 {
		t.Fatalf("%d runs", runs+1)
	}
	for _, id := range []string{"n0000", "n0999"} {
		if !w.served(id, "1-aa") {
			t.Fatalf("%s not served after %d runs", id, runs+1)
		}
	}
	t.Logf("1000 notes pulled in %d runs of at most %d D1 queries", runs+1, limit)
}

// A build without upstream bridging (js without the tag upstreams) says
// so when LIVESYNC_UPSTREAMS is set, and does nothing without it.
func TestScheduledWithoutUpstreamBuild(t *testing.T) {
	saved := runUpstreams
	runUpstreams = nil
	t.Cleanup(func() { runUpstreams = saved })
	w := newIsolate(t, newD1(t), map[string]string{"LIVESYNC_UPSTREAMS": `[{"db":"vault","url":"http://127.0.0.1:1/up"}]`})
	if err := w.app.Scheduled(context.Background()); err != errNoUpstreamBuild {
		t.Fatalf("Scheduled: %v", err)
	}
	if err := newIsolate(t, newD1(t), nil).app.Scheduled(context.Background()); err != nil {
		t.Fatalf("Scheduled without upstreams: %v", err)
	}
}

// Two databases share a run's budget: each gets its part, so one whose
// upstream never answers does not starve the other.
func TestCronTwoDatabases(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	up.push(chunk("h:a1"))
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	ups, _ := json.Marshal([]upstreamSetting{
		{DB: "alpha", URL: hang.URL + "/silent", Mode: "source"},
		{DB: testDB, URL: up.url + "/" + upDB, User: "admin", Password: upPassword, Mode: "source"},
	})
	w := newIsolate(t, newD1(t), map[string]string{"LIVESYNC_UPSTREAMS": string(ups), "LIVESYNC_CRON_BUDGET": "6"})
	w.push(meta("n1", "1-aa", "h:a1"))
	start := time.Now()
	reps, err := w.app.cronRun(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 2 || reps[0].DB != "alpha" || reps[0].Ended != "budget" || reps[1].DB != testDB || reps[1].Ended != "caught up" {
		t.Fatalf("reports: %+v", reps)
	}
	if !w.served("n1", "1-aa") {
		t.Fatal("the second database's note was not released")
	}
	t.Logf("two databases in %v (alpha: %s)", time.Since(start).Round(time.Millisecond), reps[0].Ended)
}

// The held documents wait for the upstreams' handshake before the hunt
// sees them: a pass before it would find no source and back off for 20
// s, past the end of the run.
func TestCronHuntWaitsForHandshake(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	up.push(chunk("h:a1"))
	w := newIsolate(t, newD1(t), map[string]string{"LIVESYNC_UPSTREAMS": up.upstreamsVar("source"), "LIVESYNC_CRON_BUDGET": "10"})
	w.push(meta("n1", "1-aa", "h:a1"))
	up.slow = 300 * time.Millisecond // the handshake takes a few requests: over a second
	rep := w.runCron()
	if rep.Ended != "caught up" || rep.Held != 0 || !w.served("n1", "1-aa") {
		t.Fatalf("report: %+v", rep)
	}
}

// Isolates racing for a lease (each its own connection to D1): exactly
// one gets it.
func TestCronLeaseRace(t *testing.T) {
	t.Parallel()
	path := newD1(t)
	const n = 8
	var wg sync.WaitGroup
	won := make(chan string, n)
	for i := range n {
		x, err := sqlitexec.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { x.Close() })
		wg.Go(func() {
			l, err := takeLease(context.Background(), x, testDB, fmt.Sprintf("isolate-%d", i), time.Now(), time.Minute)
			switch {
			case err == nil:
				won <- l.holder
			case !strings.Contains(err.Error(), "lease"):
				t.Errorf("isolate %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	close(won)
	var holders []string
	for h := range won {
		holders = append(holders, h)
	}
	if len(holders) != 1 {
		t.Fatalf("%d isolates hold the lease: %v", len(holders), holders)
	}
}
