package hunt

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/fetch"
)

// simDoc is one document of the simulation, from the purgatory's side.
type simDoc struct {
	name     string
	ids      []engine.ChunkID
	origin   string
	delay    time.Duration
	at       time.Duration // first Enqueue
	findable bool

	done      time.Duration // when its last chunk became local (0: never)
	removedAt time.Duration
}

// Parameters of the 24-hour simulation.
const (
	simSources    = 50
	simChunks     = 200
	simDocs       = 120
	simPerWindow  = 30
	simInFlight   = 5
	simActiveLife = 30 * time.Minute
)

// sim is the 24-hour simulation's world: the rig, its sources and the
// documents, with the purgatory's view of which ids are local.
type sim struct {
	r       *rig
	rng     *rand.Rand
	srcs    []*fakeSource
	failing map[string]bool
	nowhere map[engine.ChunkID]bool
	all     []engine.ChunkID
	docs    []*simDoc

	mu    sync.Mutex
	local map[engine.ChunkID]bool
}

// simEvent is one scheduled call of the simulation, ordered by time and
// then by scheduling order.
type simEvent struct {
	at  time.Duration
	fn  func()
	seq int
}

// A 24-hour simulation in virtual time. 50 sources, 200
// missing chunk ids, 20 % of the sources failing with errors, 10 % of
// the ids present nowhere. Documents are enqueued as the purgatory would
// (500 ms after a pull with the pulling source as origin, 3 min after a
// client push, new revisions re-enqueue) and removed 30 min after their
// first Enqueue if not complete. Every request start is recorded per
// source; no rolling 60 s window may hold more than 30, no moment more
// than 5 in flight.
func TestSimulation24Hours(t *testing.T) {
	wall := time.Now()
	var report string
	synctest.Test(t, func(t *testing.T) {
		w := &sim{
			r:       newRig(t, Config{}),
			rng:     rand.New(rand.NewPCG(4, 72017)),
			failing: map[string]bool{},
			nowhere: map[engine.ChunkID]bool{},
			local:   map[engine.ChunkID]bool{},
		}
		w.addSources()
		w.placeChunks()
		w.makeDocs()
		w.r.h.onDelivered = w.delivered
		w.run(w.schedule())
		requests, violations := w.checkPoliteness(t)
		findable, completed, removed := w.checkDocs(t)
		report = w.report(t, requests, violations, findable, completed, removed)
	})
	elapsed := time.Since(wall)
	t.Log(report)
	t.Logf("wall time %v", elapsed)
	if limit := 2 * time.Second; elapsed > limit && !raceEnabled && runtime.GOARCH != "wasm" {
		t.Errorf("the 24-hour simulation took %v of wall time, want under %v", elapsed, limit)
	}
}

// addSources adds the 50 sources: half with a fingerprint (memo), every
// tenth slow (a primary that gets hedged), 20 % failing.
func (w *sim) addSources() {
	for i := range simSources {
		s := w.r.source(fmt.Sprintf("s%02d:443", i), i%2 == 0) // half have a fingerprint (memo)
		s.set(func(s *fakeSource) {
			s.fp = "v1"
			s.latency = time.Duration(100+w.rng.IntN(1900)) * time.Millisecond
			if i%10 == 7 {
				s.latency = 40 * time.Second // slow: primaries that get hedged
			}
			if i%5 == 1 {
				s.err = errDown // 20 % failing
				w.failing[s.key] = true
			}
		})
		w.srcs = append(w.srcs, s)
	}
}

// placeChunks makes 10 % of the ids present nowhere and puts the rest on
// 1 to 3 sources, at least one of them healthy.
func (w *sim) placeChunks() {
	w.all = make([]engine.ChunkID, simChunks)
	for c := range simChunks {
		id := engine.ChunkID(fmt.Sprintf("h:%03d", c))
		w.all[c] = id
		if c%10 == 3 {
			w.nowhere[id] = true
			continue
		}
		healthy := w.srcs[w.rng.IntN(simSources)]
		for w.failing[healthy.key] {
			healthy = w.srcs[w.rng.IntN(simSources)]
		}
		holders := []*fakeSource{healthy}
		for range w.rng.IntN(3) {
			holders = append(holders, w.srcs[w.rng.IntN(simSources)])
		}
		for _, s := range holders {
			s.set(func(s *fakeSource) { s.has[id] = true })
		}
	}
}

// makeDocs makes the documents: 3 to 8 ids each (ids shared between
// documents), arriving over 23 hours, half of them in bursts.
func (w *sim) makeDocs() {
	rng := w.rng
	w.docs = make([]*simDoc, simDocs)
	for i := range w.docs {
		d := &simDoc{name: fmt.Sprintf("notes/%03d.md", i), findable: true}
		for range 3 + rng.IntN(6) {
			id := w.all[rng.IntN(simChunks)]
			if !slices.Contains(d.ids, id) {
				d.ids = append(d.ids, id)
			}
			if w.nowhere[id] {
				d.findable = false
			}
		}
		if i%2 == 0 {
			d.at = time.Duration(rng.Int64N(int64(23 * time.Hour)))
		} else {
			d.at = time.Duration(i/20)*4*time.Hour + time.Duration(rng.IntN(5000))*time.Millisecond // bursts
		}
		d.at = d.at.Truncate(time.Millisecond)
		if rng.IntN(5) == 0 {
			d.delay = 3 * time.Minute // a client pushed it
		} else {
			d.delay = 500 * time.Millisecond
			d.origin = w.srcs[rng.IntN(simSources)].key
		}
		w.docs[i] = d
	}
}

// delivered is the purgatory's side of OnDelivered: the ids become
// local, and a document is released (and removed from the hunt) when
// all of its ids are.
func (w *sim) delivered(ids []engine.ChunkID) {
	w.mu.Lock()
	for _, id := range ids {
		w.local[id] = true
	}
	var released []string
	for _, d := range w.docs {
		if d.done != 0 || d.removedAt != 0 || w.r.now() < d.at {
			continue
		}
		if !slices.ContainsFunc(d.ids, func(id engine.ChunkID) bool { return !w.local[id] }) {
			d.done = w.r.now()
			released = append(released, d.name)
		}
	}
	w.mu.Unlock()
	for _, n := range released {
		w.r.h.Remove(n)
	}
}

// missing returns d's ids not yet local; the caller holds w.mu.
func (w *sim) missing(d *simDoc) []engine.ChunkID {
	var missing []engine.ChunkID
	for _, id := range d.ids {
		if !w.local[id] {
			missing = append(missing, id)
		}
	}
	return missing
}

// schedule returns the simulation's events in order: each document's
// first Enqueue, for a third of them a new revision a little later, and
// its removal 30 min after the first Enqueue if it is not complete.
func (w *sim) schedule() []simEvent {
	var events []simEvent
	add := func(at time.Duration, fn func()) { events = append(events, simEvent{at, fn, len(events)}) }
	for _, d := range w.docs {
		add(d.at, func() {
			w.mu.Lock()
			missing := w.missing(d)
			if len(missing) == 0 {
				d.done = w.r.now() // every chunk already local: served at once
			}
			w.mu.Unlock()
			w.r.h.Enqueue(d.name, missing, d.origin, d.delay)
		})
		if w.rng.IntN(3) == 0 { // a new revision a little later: fresh start, debounce
			add(d.at+time.Duration(1+w.rng.IntN(300))*time.Second, func() {
				w.mu.Lock()
				missing := w.missing(d)
				skip := d.done != 0
				w.mu.Unlock()
				if !skip {
					w.r.h.Enqueue(d.name, missing, d.origin, 500*time.Millisecond)
				}
			})
		}
		add(d.at+simActiveLife, func() {
			w.mu.Lock()
			skip := d.done != 0
			if !skip {
				d.removedAt = w.r.now()
			}
			w.mu.Unlock()
			if !skip {
				w.r.h.Remove(d.name)
			}
		})
	}
	sort.Slice(events, func(i, j int) bool {
		if events[i].at != events[j].at {
			return events[i].at < events[j].at
		}
		return events[i].seq < events[j].seq
	})
	return events
}

// run plays the events in virtual time, then runs to 24 hours.
func (w *sim) run(events []simEvent) {
	for _, ev := range events {
		w.r.until(ev.at)
		ev.fn()
	}
	w.r.until(24 * time.Hour)
}

// checkPoliteness checks, per source, at most 30 starts in any rolling
// 60 s and at most 5 in flight.
func (w *sim) checkPoliteness(t *testing.T) (requests, violations int) {
	for _, s := range w.srcs {
		var starts []time.Duration
		for _, q := range s.got() {
			starts = append(starts, q.at)
		}
		requests += len(starts)
		slices.Sort(starts)
		for j := 0; j+simPerWindow < len(starts); j++ {
			if starts[j+simPerWindow]-starts[j] < time.Minute {
				violations++
				t.Errorf("%s: %d starts within %v from %v", s.key, simPerWindow+1, starts[j+simPerWindow]-starts[j], starts[j])
			}
		}
		if s.maxActive > simInFlight {
			violations++
			t.Errorf("%s: %d in flight", s.key, s.maxActive)
		}
	}
	return requests, violations
}

// checkDocs checks every findable document released and the rest
// removed on schedule.
func (w *sim) checkDocs(t *testing.T) (findable, completed, removed int) {
	for _, d := range w.docs {
		switch {
		case d.findable:
			findable++
			if d.done == 0 {
				t.Errorf("%s (findable) not completed; removed at %v", d.name, d.removedAt)
			} else {
				completed++
			}
		case d.done != 0:
			t.Errorf("%s has an id present nowhere, yet completed", d.name)
		case d.removedAt != d.at+simActiveLife:
			t.Errorf("%s removed at %v, want %v", d.name, d.removedAt, d.at+simActiveLife)
		default:
			removed++
		}
	}
	return findable, completed, removed
}

// report checks the hunt is empty after 24 hours and returns the
// simulation's summary line.
func (w *sim) report(t *testing.T, requests, violations, findable, completed, removed int) string {
	st := w.r.h.Stats()
	if st.Docs != 0 || st.InFlight != 0 {
		t.Errorf("after 24 h: %d documents, %d requests in flight", st.Docs, st.InFlight)
	}
	var maxWait time.Duration
	var worst string
	var failed, found uint64
	for k, ss := range st.Sources {
		if ss.MaxWait > maxWait {
			maxWait, worst = ss.MaxWait, k
		}
		failed += ss.Failed
		found += ss.Chunks
	}
	var slowest time.Duration
	for _, d := range w.docs {
		if d.done != 0 {
			slowest = max(slowest, d.done-d.at-d.delay)
		}
	}
	return fmt.Sprintf("24 h: %d documents (%d findable: %d completed, slowest %v after its delay; %d removed at 30 min), "+
		"%d requests (%d failed, %d chunks found), %d hedges, %d memo hits, %d window/in-flight violations, "+
		"max per-source wait %v (%s)",
		simDocs, findable, completed, slowest.Round(time.Millisecond), removed, requests, failed, found, st.Hedges, st.MemoHits,
		violations, maxWait, worst)
}

// No goroutine of the Hunt (driver, requests, rechecks) is left after
// Close, even with requests blocked on the wire.
func TestNoGoroutineLeftAfterClose(t *testing.T) {
	before := runtime.NumGoroutine()
	co := fetch.NewCoordinator()
	h, err := New(Config{}, Deps{Local: newLocal(), Claims: co})
	if err != nil {
		t.Fatal(err)
	}
	s := newSource("a:1", time.Now())
	s.gate = make(chan struct{}) // never opens: Close must cancel
	h.AddSource(s, s.fingerprint)
	for i := range 10 {
		h.Enqueue(docName(i), ids(chunkName(i)), "a:1", 0)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.Stats().InFlight < 5 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := h.Stats().InFlight; n != 5 {
		t.Fatalf("%d requests in flight before Close", n)
	}
	h.Close()
	h.Close() // idempotent
	co.Close()
	var left []string
	for {
		left = engineGoroutines()
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if len(left) > 0 || runtime.NumGoroutine() > before+1 { // +1: the js runtime's event handler
		t.Fatalf("goroutines after Close (%d, %d before):\n%s", runtime.NumGoroutine(), before, strings.Join(left, "\n\n"))
	}
	if st := h.Stats(); st.Sources["a:1"].Canceled != 5 || st.Sources["a:1"].Failed != 0 {
		t.Errorf("cancelled requests are not failures: %+v", st.Sources["a:1"])
	}
	h.Enqueue("late.md", ids("h:z"), "", 0) // after Close: ignored
	if st := h.Stats(); st.Docs != 10 {
		t.Errorf("enqueue after Close changed the queue: %d docs", st.Docs)
	}
}

// engineGoroutines returns the stacks of goroutines running engine code,
// other than the calling test.
func engineGoroutines() []string {
	buf := make([]byte, 1<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "livesync-go/engine/") && !strings.Contains(g, "TestNoGoroutineLeftAfterClose") {
			out = append(out, g)
		}
	}
	return out
}
