package hunt

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/activity"
	"github.com/livesync-go/livesync-go/engine/fetch"
)

// Seed (sync_identifier): "Tries multiple URLs until complete" with one
// server holding oid1 and another oid2. Two sources each holding half
// the chunks complete the document.
func TestTwoSourcesEachHoldingHalfCompleteTheDocument(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		a := r.source("a:5984", false, "h:1", "h:2")
		b := r.source("b:5984", false, "h:3", "h:4")
		r.h.Enqueue("notes/x.md", ids("h:1", "h:2", "h:3", "h:4"), "a:5984", 500*time.Millisecond)
		r.until(sec(1))
		if got := r.gotDelivered(); !slices.Equal(got, ids("h:1", "h:2", "h:3", "h:4")) {
			t.Fatalf("delivered %v", got)
		}
		for _, id := range ids("h:1", "h:2", "h:3", "h:4") {
			if !r.local.has(id) {
				t.Errorf("%s not persisted", id)
			}
		}
		// The origin first with all four, then b with the two a lacked.
		if ga, gb := a.got(), b.got(); len(ga) != 1 || len(gb) != 1 || !slices.Equal(gb[0].ids, ids("h:3", "h:4")) ||
			ga[0].at != sec(0.5) {
			t.Errorf("requests a %v b %v", ga, gb)
		}
		if s := r.h.Stats(); s.Completed != 1 || s.Docs != 0 || s.Sources["a:5984"].Chunks != 2 || s.Sources["b:5984"].Found != 1 {
			t.Errorf("stats %+v", s)
		}
	})
}

// Seed: "returns early when there is nothing to sync". Without pending
// documents or missing chunks nothing is requested.
func TestNothingToDoWithoutPendingDocumentsOrMissingChunks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		a := r.source("a:5984", false, "h:1")
		r.until(time.Hour)
		r.h.Enqueue("empty.md", nil, "", 0)
		r.local.store("h:1")
		r.h.Enqueue("local.md", ids("h:1"), "", 500*time.Millisecond)
		r.until(2 * time.Hour)
		if got := a.got(); len(got) != 0 {
			t.Errorf("requests %v", got)
		}
		if s := r.h.Stats(); s.Docs != 0 || s.Completed != 1 {
			t.Errorf("stats %+v (the local recheck completes local.md)", s)
		}
	})
}

// Concurrency limit through the Hunt: 20 documents on one slow source
// never have more than MaxInFlight requests on the wire.
func TestHuntConcurrencyLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{HedgeAfter: time.Hour})
		a := r.source("a:5984", false)
		a.set(func(s *fakeSource) { s.latency = 10 * time.Second })
		for i := range 20 {
			r.h.Enqueue(docName(i), ids(chunkName(i)), "a:5984", 0)
		}
		r.until(sec(5))
		if s := r.h.Stats(); s.InFlight != 5 || s.Sources["a:5984"].Queued != 15 {
			t.Errorf("at 5 s: %d in flight, %d queued", s.InFlight, s.Sources["a:5984"].Queued)
		}
		r.until(2 * time.Minute)
		if a.maxActive != 5 {
			t.Errorf("max in flight %d, want 5", a.maxActive)
		}
	})
}

// Fixed defect 2: a rate-limited source is woken by a timer when its
// window frees; no other event is needed. The reference only processed a
// domain queue on a permit drop or a new enqueue, so the third document
// here waited forever (this test fails on that behaviour).
func TestRateLimitedSourceWokenWhenWindowFrees(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{MaxPerWindow: 2})
		a := r.source("a:5984", false, "h:1", "h:2", "h:3")
		for i, id := range ids("h:1", "h:2", "h:3") {
			r.h.Enqueue(docName(i), ids(id), "a:5984", 500*time.Millisecond)
		}
		r.until(sec(59))
		if got := a.got(); len(got) != 2 {
			t.Fatalf("requests before the window frees: %v", got)
		}
		r.until(sec(61))
		got := a.got()
		if len(got) != 3 || got[2].at != sec(60.5) {
			t.Fatalf("requests %v: the third must start at 60.5 s", got)
		}
		if s := r.h.Stats(); s.Completed != 3 || s.Sources["a:5984"].MaxWait != 60*time.Second {
			t.Errorf("stats %+v", s)
		}
	})
}

// Round robin through the Hunt: three documents queued on a source with
// one slot take turns, and the turn wraps.
func TestHuntRoundRobinAcrossDocuments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{MaxInFlight: 1, BatchSize: 1})
		a := r.source("a:5984", false, "A1", "A2", "B1", "B2", "C1", "C2")
		a.set(func(s *fakeSource) { s.latency = time.Second })
		r.h.Enqueue("A", ids("A1", "A2"), "a:5984", 0)
		r.h.Enqueue("B", ids("B1", "B2"), "a:5984", 0)
		r.h.Enqueue("C", ids("C1", "C2"), "a:5984", 0)
		r.until(time.Minute)
		var order []engine.ChunkID
		for _, q := range a.got() {
			order = append(order, q.ids...)
		}
		if want := ids("A1", "B1", "C1", "A2", "B2", "C2"); !slices.Equal(order, want) {
			t.Errorf("order %v, want %v", order, want)
		}
	})
}

// Seed (sync_identifier_next_url): "Skips throttled domains". A document
// whose origin has no capacity starts on the next source at once and
// waits in the origin's queue.
func TestSkipThrottledSources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{MaxInFlight: 1, HedgeAfter: time.Hour})
		gate := make(chan struct{})
		a := r.source("a:5984", false, "h:1")
		b := r.source("b:5984", false)
		a.set(func(s *fakeSource) { s.gate = gate })
		r.h.Enqueue("busy.md", ids("h:0"), "a:5984", 0)
		r.until(sec(1))
		r.h.Enqueue("x.md", ids("h:1"), "a:5984", 0)
		r.until(sec(2))
		if got := b.asked("h:1"); !slices.Equal(got, []time.Duration{sec(1)}) {
			t.Fatalf("b asked for h:1 at %v, want at 1 s", got)
		}
		if s := r.h.Stats(); s.Sources["a:5984"].Queued != 1 {
			t.Errorf("x.md not queued on the throttled origin: %+v", s.Sources["a:5984"])
		}
		a.set(func(s *fakeSource) { s.gate = nil })
		close(gate)
		r.until(sec(3))
		if got := a.asked("h:1"); len(got) != 1 || r.h.Stats().Completed != 1 {
			t.Errorf("origin asked at %v, stats %+v", got, r.h.Stats())
		}
	})
}

// Seed: "Skips tried URLs" and "Two Separate tried_urls Tracking" — here
// one record per pass serves both paths (merging tried sources): a
// source tried through its queue is not tried again by the direct path,
// and the reverse; every source once per pass, then the backoff.
func TestSkipTriedSourcesMergedAcrossPaths(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{MaxInFlight: 1, HedgeAfter: time.Hour})
		gate := make(chan struct{})
		a := r.source("a:5984", false)
		b := r.source("b:5984", false)
		c := r.source("c:5984", false)
		a.set(func(s *fakeSource) { s.gate = gate })
		r.h.Enqueue("busy.md", ids("h:0"), "a:5984", 0)
		r.until(sec(1))
		r.h.Enqueue("x.md", ids("h:1"), "a:5984", 0) // a busy: b (direct), queued on a
		r.until(sec(2))
		a.set(func(s *fakeSource) { s.gate = nil })
		close(gate) // a frees: its queue serves x.md; then c
		r.until(sec(10))
		for _, s := range []*fakeSource{a, b, c} {
			if got := s.asked("h:1"); len(got) != 1 {
				t.Errorf("%s asked for h:1 at %v, want once in the pass", s.key, got)
			}
		}
		// The next pass, 20 s after the first ended, asks each again once.
		r.until(sec(25))
		for _, s := range []*fakeSource{a, b, c} {
			if got := s.asked("h:1"); len(got) != 2 || got[1] < sec(20) {
				t.Errorf("%s asked for h:1 at %v, want a second pass after 20 s", s.key, got)
			}
		}
	})
}

// The reference's ThrottleManager creates a domain's throttle on first
// use; registering a source creates none.
func TestLazyThrottleCreation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		r.source("a:5984", false, "h:1")
		r.source("b:5984", false)
		r.until(time.Minute)
		r.h.mu.Lock()
		n := len(r.h.throttles)
		r.h.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d throttles before any request", n)
		}
		r.h.Enqueue("x.md", ids("h:1"), "a:5984", 0)
		r.until(2 * time.Minute)
		r.h.mu.Lock()
		_, okA := r.h.throttles["a:5984"]
		_, okB := r.h.throttles["b:5984"]
		r.h.mu.Unlock()
		if !okA || okB {
			t.Errorf("throttles: a %v b %v, want only a", okA, okB)
		}
	})
}

// Seed timeline D: "Start hunting → server1 (not found), server2
// (timeout), server3 (not found) … Retry … 30 minutes expired". Passes at
// 0.5 s, then the backoff 20, 40, 80, 120, 120 … s after each pass until
// Remove.
func TestTimelineDataNeverArrives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		s1 := r.source("s1:443", false)
		s2 := r.source("s2:443", false)
		s3 := r.source("s3:443", false)
		s2.set(func(s *fakeSource) { s.err = errDown })
		r.h.Enqueue("x.md", ids("h:1"), "s2:443", 500*time.Millisecond)
		r.until(10 * time.Minute)
		want := []time.Duration{sec(0.5), sec(20.5), sec(60.5), sec(140.5), sec(260.5), sec(380.5), sec(500.5)}
		for _, s := range []*fakeSource{s1, s2, s3} {
			if got := s.asked("h:1"); !slices.Equal(got, want) {
				t.Errorf("%s asked at %v, want %v", s.key, got, want)
			}
		}
		r.h.Remove("x.md")
		r.until(time.Hour)
		if n := len(s1.got()); n != len(want) {
			t.Errorf("%d requests after Remove", n-len(want))
		}
		if s := r.h.Stats(); s.Removed != 1 || s.Docs != 0 || s.Sources["s2:443"].Failed != uint64(len(want)) {
			t.Errorf("stats %+v", s)
		}
	})
}

// Seed timeline C: "State event received from relay X … Start hunting
// git servers → check server1, server2 … Git data found on server2 →
// event released". The origin is asked first.
func TestTimelineHuntFindsOnSecondServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		s1 := r.source("s1:443", false)
		s2 := r.source("s2:443", false, "h:1")
		s0 := r.source("s0:443", false, "h:1") // sorts first, but is not the origin
		s1.set(func(s *fakeSource) { s.latency = 5 * time.Second })
		r.h.Enqueue("x.md", ids("h:1"), "s1:443", 500*time.Millisecond)
		r.until(time.Minute)
		if len(s1.got()) != 1 || len(s0.got()) != 1 || len(s2.got()) != 0 || s0.got()[0].at != sec(5.5) {
			t.Errorf("origin s1 %v, then s0 %v, s2 %v", s1.got(), s0.got(), s2.got())
		}
	})
}

// A primary that runs 30 s gets one hedge on another throttle key, with
// its own permit; never a third concurrent request for the document.
func TestHedgeAfterThirtySecondsNeverAThird(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		gate := make(chan struct{})
		slow := r.source("a:443", false, "h:1")
		b := r.source("b:443", false)
		c := r.source("c:443", false, "h:1")
		slow.set(func(s *fakeSource) { s.gate = gate })
		b.set(func(s *fakeSource) { s.latency = time.Minute })
		r.h.Enqueue("x.md", ids("h:1"), "a:443", 0)
		r.until(sec(29))
		if len(b.got())+len(c.got()) != 0 {
			t.Fatal("hedged before 30 s")
		}
		r.until(sec(31))
		if got := b.asked("h:1"); !slices.Equal(got, []time.Duration{sec(30)}) {
			t.Fatalf("hedge to b at %v, want 30 s", got)
		}
		r.until(sec(80)) // both run: c is never a third attempt
		if len(c.got()) != 0 {
			t.Errorf("third concurrent attempt to c: %v", c.got())
		}
		if s := r.h.Stats(); s.Hedges != 1 || s.InFlight != 2 {
			t.Errorf("stats %+v", s)
		}
		r.until(sec(95)) // b answered missing at 90 s: a still runs, still no third
		if len(c.got()) != 0 {
			t.Errorf("c asked while the primary runs: %v", c.got())
		}
		slow.set(func(s *fakeSource) { s.gate = nil })
		close(gate)
		r.until(sec(96))
		if s := r.h.Stats(); s.Completed != 1 || len(c.got()) != 0 {
			t.Errorf("stats %+v, c %v", s, c.got())
		}
	})
}

// The memo: a source that lacked an id is skipped while its fingerprint
// is unchanged, asked again when it changes, and forgotten after 30 min.
func TestMemoSkipsSourceUntilFingerprintChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		a := r.source("a:5984", true)
		a.set(func(s *fakeSource) { s.fp = "seq-1" })
		r.h.Enqueue("x.md", ids("h:1"), "a:5984", 0)
		r.until(5 * time.Minute)
		if got := a.asked("h:1"); len(got) != 1 {
			t.Fatalf("asked %v, want once (memoized after)", got)
		}
		if s := r.h.Stats(); s.MemoHits == 0 || s.MemoSources != 1 {
			t.Errorf("stats %+v", s)
		}
		a.set(func(s *fakeSource) { s.fp = "seq-2"; s.has["h:1"] = true })
		r.until(10 * time.Minute)
		if got := a.asked("h:1"); len(got) != 2 || r.h.Stats().Completed != 1 {
			t.Errorf("after the fingerprint changed: asked %v, stats %+v", got, r.h.Stats())
		}
		// Lazy expiry.
		r.h.Enqueue("y.md", ids("h:9"), "a:5984", 0)
		r.until(45 * time.Minute)
		if got := a.asked("h:9"); len(got) != 2 || got[1] < got[0]+30*time.Minute {
			t.Errorf("h:9 asked at %v: want once more after the memo expired (30 min)", got)
		}
	})
}

// Fixed defect 3: a hunt and a file open never fetch the same chunk at
// once, in either order. The loser waits for the winner's flight, then
// rechecks local storage and is served from it. On the reference (no
// shared single flight) the second party puts the id on the wire too and
// the fake flags it.
func TestHuntAndFileOpenNeverFetchOneChunkAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{HedgeAfter: time.Hour})
		src := r.source("a:5984", false, "h:1", "h:2")
		gate := make(chan struct{})
		src.set(func(s *fakeSource) { s.gate = gate })
		act := activity.New(nil)
		f, err := fetch.New(fetch.Config{}, fetch.Deps{Source: src, Local: r.local, Activity: act, Claims: r.co})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		l, err := fetch.NewLayer(fetch.LayerConfig{}, fetch.LayerDeps{Local: r.local, Activity: act, Claims: r.co, Fetcher: f})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()

		// Hunt first, then a file open.
		r.h.Enqueue("x.md", ids("h:1"), "a:5984", 0)
		r.until(sec(1))
		read := make(chan []fetch.Result, 1)
		go func() { res, _ := l.Get(t.Context(), ids("h:1"), fetch.ReadOptions{}); read <- res }()
		r.until(sec(2))
		src.set(func(s *fakeSource) { s.gate = nil })
		close(gate)
		if res := <-read; !res[0].OK {
			t.Fatalf("read %+v", res)
		}
		if got := src.asked("h:1"); len(got) != 1 {
			t.Errorf("h:1 requested at %v, want once (by the hunt)", got)
		}

		// A file open first, then the hunt.
		gate2 := make(chan struct{})
		src.set(func(s *fakeSource) { s.gate = gate2 })
		go func() { res, _ := l.Get(t.Context(), ids("h:2"), fetch.ReadOptions{}); read <- res }()
		r.until(sec(3))
		r.h.Enqueue("y.md", ids("h:2"), "a:5984", 0)
		r.until(sec(60))
		if got := src.asked("h:2"); len(got) != 1 {
			t.Errorf("h:2 requested at %v while the file open had it on the wire", got)
		}
		src.set(func(s *fakeSource) { s.gate = nil })
		close(gate2)
		if res := <-read; !res[0].OK {
			t.Fatalf("read %+v", res)
		}
		r.until(sec(61))
		if got := src.asked("h:2"); len(got) != 1 || r.h.Stats().Completed != 2 {
			t.Errorf("h:2 requested at %v; stats %+v (the hunt must complete from the local recheck)", got, r.h.Stats())
		}
		if got := r.gotDelivered(); !slices.Equal(got, ids("h:1", "h:2")) {
			t.Errorf("delivered %v", got)
		}
	})
}

// Many documents sharing chunks across throttled sources: no (source,
// chunk) request is ever made twice concurrently, and no chunk is on the
// wire at two sources at once (hedges off), whichever path starts it.
func TestNoDuplicateRequestsFromBothPaths(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{MaxInFlight: 2, MaxPerWindow: 6, HedgeAfter: 24 * time.Hour})
		var srcs []*fakeSource
		for i := range 4 {
			s := r.source(string(rune('a'+i))+":1", false)
			s.set(func(s *fakeSource) { s.latency = time.Duration(i+1) * 700 * time.Millisecond })
			srcs = append(srcs, s)
		}
		srcs[3].set(func(s *fakeSource) {
			for i := range 10 {
				s.has[chunkName(i)] = true
			}
		})
		for d := range 12 {
			r.h.Enqueue(docName(d), ids(chunkName(d%10), chunkName((d+3)%10), chunkName((d+7)%10)), srcs[d%4].key, 0)
		}
		r.until(30 * time.Minute)
		if s := r.h.Stats(); s.Completed != 12 {
			t.Errorf("completed %d of 12", s.Completed)
		}
		// Reconstruct per chunk every interval on the wire at any source.
		type span struct{ from, to time.Duration }
		wire := map[engine.ChunkID][]span{}
		for i, s := range srcs {
			lat := time.Duration(i+1) * 700 * time.Millisecond
			for _, q := range s.got() {
				for _, id := range q.ids {
					wire[id] = append(wire[id], span{q.at, q.at + lat})
				}
			}
		}
		for id, sp := range wire {
			slices.SortFunc(sp, func(a, b span) int { return int(a.from - b.from) })
			for i := 1; i < len(sp); i++ {
				if sp[i].from < sp[i-1].to {
					t.Errorf("%s on the wire twice at once: %v", id, sp)
				}
			}
		}
	})
}

func docName(i int) string { return "notes/" + string(rune('A'+i%26)) + string(rune('0'+i/26)) + ".md" }
func chunkName(i int) engine.ChunkID {
	return engine.ChunkID("h:" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
}

// A chunk found but not persisted is not delivered: the local store
// failing is a failed attempt (the document backs off and is tried
// again), never "found" — otherwise its document would wait for an
// arrival that never comes.
func TestFoundButNotPersistedIsAFailedAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		r.local.failPuts = 1
		a := r.source("a:5984", false, "h:1")
		r.h.Enqueue("notes/x.md", ids("h:1"), "a:5984", 500*time.Millisecond)
		r.until(sec(1))
		if got := r.gotDelivered(); len(got) != 0 || r.local.has("h:1") {
			t.Fatalf("delivered %v after a failed write", got)
		}
		if s := r.h.Stats(); s.Sources["a:5984"].Failed != 1 || s.Sources["a:5984"].Found != 0 || s.Docs != 1 {
			t.Fatalf("stats after the failed write %+v", s)
		}
		r.until(sec(30))
		if got := r.gotDelivered(); !slices.Equal(got, ids("h:1")) || !r.local.has("h:1") {
			t.Fatalf("delivered %v after the retry", got)
		}
		got := a.got()
		if len(got) != 2 || got[0].at != sec(0.5) || got[1].at != sec(20.5) {
			t.Fatalf("requests %v, want at 0.5 s and after the 20 s backoff", got)
		}
	})
}
