package hunt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// handOver ends r's run as a bounded process does (State, then Close)
// and starts the next one: a new Hunt that restores the State and sees
// the same sources (the same fakes, so their request logs span both),
// with a fingerprint if memo.
func handOver(t *testing.T, r *rig, cfg Config, memo bool, srcs ...*fakeSource) (*rig, State) {
	t.Helper()
	st := r.h.State()
	r.h.Close()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	next := newRig(t, cfg)
	next.t0 = r.t0
	for _, s := range srcs {
		next.srcs = append(next.srcs, s)
		var fp func() string
		if memo {
			fp = s.fingerprint
		}
		next.h.AddSource(s, fp)
	}
	next.h.Restore(back)
	return next, back
}

// quietWithin runs Quiet with a deadline d from now.
func quietWithin(h *Hunt, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return h.Quiet(ctx)
}

// Two bounded runs in sequence, the second restoring the State of the
// first: no sliding Window ever holds more than MaxPerWindow request
// starts across both, and no more than MaxInFlight run at once.
func TestStateKeepsTheRateLimitAcrossRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{MaxPerWindow: 3, MaxInFlight: 2, HedgeAfter: time.Hour}
		r := newRig(t, cfg)
		a := r.source("a:5984", true)
		a.set(func(s *fakeSource) { s.latency = time.Second })
		for i := range 10 {
			a.set(func(s *fakeSource) { s.has[chunkName(i)] = true })
			r.h.Enqueue(docName(i), ids(chunkName(i)), "a:5984", 0)
		}
		// State is safe to read while requests run.
		for range 5 {
			r.h.State()
			time.Sleep(100 * time.Millisecond)
		}
		if err := quietWithin(r.h, 20*time.Second); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("first run Quiet: %v, want the deadline (the window is full)", err)
		}
		r2, st := handOver(t, r, cfg, true, a)
		if got := st.Throttles["a:5984"]; len(got) != 3 {
			t.Fatalf("state throttle starts %v, want 3", got)
		}
		for i := range 10 { // the purgatory enqueues what it still holds
			if !r.local.has(chunkName(i)) {
				r2.h.Enqueue(docName(i), ids(chunkName(i)), "", 500*time.Millisecond)
			}
		}
		if err := quietWithin(r2.h, 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		got := a.got()
		if len(got) != 10 {
			t.Fatalf("%d requests, want 10: %v", len(got), got)
		}
		for i := 3; i < len(got); i++ {
			if d := got[i].at - got[i-3].at; d < time.Minute {
				t.Errorf("requests %d and %d start %v apart: 4 starts in one window: %v", i-3, i, d, got)
			}
		}
		if got[3].at != time.Minute {
			t.Errorf("the second run's first request at %v, want 1m0s (when the first run's window frees)", got[3].at)
		}
		if a.maxActive > 2 {
			t.Errorf("%d requests at once", a.maxActive)
		}
	})
}

// A document's backoff continues in the next run: attempts and the
// next pass survive, and the run after the hand-over does not hunt it
// early (20 s, 40 s, then 80 s after the third pass).
func TestStateContinuesTheBackoffAcrossRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		a := r.source("a:5984", false) // no fingerprint: no memo
		r.h.Enqueue("x.md", ids("h:1"), "", 0)
		if err := quietWithin(r.h, time.Minute); err != nil {
			t.Fatal(err)
		}
		r.until(sec(30))
		if err := quietWithin(r.h, time.Minute); err != nil {
			t.Fatal(err)
		}
		if got := a.asked("h:1"); !slices.Equal(got, []time.Duration{0, sec(20)}) {
			t.Fatalf("first run asked at %v", got)
		}
		r2, st := handOver(t, r, Config{}, false, a)
		ds := st.Docs["x.md"]
		if ds.Attempts != 2 || !ds.Next.Equal(r.t0.Add(sec(60))) {
			t.Fatalf("state %+v, want 2 attempts, next at 60 s", ds)
		}
		r2.h.Enqueue("x.md", ids("h:1"), "", 500*time.Millisecond)
		at := r2.now()
		if err := quietWithin(r2.h, time.Second); err != nil || r2.now() != at {
			t.Fatalf("Quiet %v after %v: a restored backoff is quiet", err, r2.now()-at)
		}
		r2.until(sec(200))
		if got := a.asked("h:1"); !slices.Equal(got, []time.Duration{0, sec(20), sec(60), sec(140)}) {
			t.Errorf("asked at %v, want 0, 20 s, 60 s, 140 s", got)
		}
		if s := r2.h.State().Docs["x.md"]; s.Attempts != 4 {
			t.Errorf("state %+v, want 4 attempts", s)
		}
	})
}

// A document the purgatory enqueued afresh is work to do: Quiet waits
// for its first pass; a restored document never enqueued is neither
// hunted nor in the next State.
func TestQuietWaitsForTheFirstPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		a := r.source("a:5984", false)
		r.h.Restore(State{Docs: map[string]DocState{"gone.md": {Attempts: 3, Next: r.t0.Add(time.Second)}}})
		r.h.Enqueue("x.md", ids("h:1"), "", 500*time.Millisecond)
		if err := quietWithin(r.h, time.Minute); err != nil {
			t.Fatal(err)
		}
		if got := a.asked("h:1"); !slices.Equal(got, []time.Duration{sec(0.5)}) || r.now() != sec(0.5) {
			t.Fatalf("asked at %v, quiet at %v", got, r.now())
		}
		st := r.h.State()
		if _, ok := st.Docs["gone.md"]; ok || st.Docs["x.md"].Attempts != 1 {
			t.Errorf("state docs %+v", st.Docs)
		}
		r.until(time.Hour)
		for _, q := range a.got() {
			if !slices.Equal(q.ids, ids("h:1")) {
				t.Errorf("request %v: only x.md is hunted", q)
			}
		}
		if _, ok := r.h.State().Docs["gone.md"]; ok {
			t.Error("a restored document never enqueued is in the State")
		}
	})
}

// The memo crosses runs: a source that lacked an id is not asked again
// while its fingerprint is unchanged, then is once it changed.
func TestStateKeepsTheMemoAcrossRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		a := r.source("a:5984", true)
		a.set(func(s *fakeSource) { s.fp = "seq-1" })
		r.h.Enqueue("x.md", ids("h:1"), "", 0)
		if err := quietWithin(r.h, time.Minute); err != nil {
			t.Fatal(err)
		}
		r.until(sec(30))
		r2, st := handOver(t, r, Config{}, true, a)
		if len(st.Memo) != 1 || st.Memo[0].Source != "a:5984" || st.Memo[0].Fingerprint != "seq-1" ||
			!slices.Equal(st.Memo[0].IDs, ids("h:1")) || !st.Memo[0].Until.Equal(r.t0.Add(DefaultMemoTTL)) {
			t.Fatalf("memo state %+v", st.Memo)
		}
		r2.h.Enqueue("x.md", ids("h:1"), "", 0)
		r2.until(sec(100))
		if got := a.asked("h:1"); !slices.Equal(got, []time.Duration{0}) {
			t.Fatalf("asked at %v: the memo says a lacks h:1", got)
		}
		if s := r2.h.Stats(); s.MemoHits == 0 {
			t.Errorf("stats %+v", s)
		}
		a.set(func(s *fakeSource) { s.fp = "seq-2"; s.has["h:1"] = true })
		r2.until(sec(400))
		if got := a.asked("h:1"); len(got) != 2 || !r2.local.has("h:1") {
			t.Errorf("asked at %v after the fingerprint changed", got)
		}
		if st := r2.h.State(); len(st.Memo) != 0 || len(st.Docs) != 0 {
			t.Errorf("state %+v after completion", st)
		}
	})
}

// A memo restored after it expired is ignored.
func TestStateExpiredMemoIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		a := r.source("a:5984", true)
		r.h.Restore(State{Memo: []MemoState{{Source: "a:5984", IDs: ids("h:1"), Until: r.t0.Add(-time.Second)}}})
		r.h.Enqueue("x.md", ids("h:1"), "", 0)
		r.until(sec(1))
		if got := a.asked("h:1"); len(got) != 1 {
			t.Errorf("asked at %v: an expired memo must not apply", got)
		}
	})
}

// State survives JSON unchanged.
func TestStateJSONRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now().Round(0)
		st := State{
			Throttles: map[string][]time.Time{"a:5984": {now.Add(-time.Second), now}},
			Docs:      map[string]DocState{"x.md": {Attempts: 2, Next: now.Add(40 * time.Second)}},
			Memo:      []MemoState{{Source: "a:5984", Fingerprint: "7-g1", IDs: ids("h:1", "h:2"), Until: now.Add(time.Minute)}},
		}
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var back State
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		b2, _ := json.Marshal(back)
		if string(b) != string(b2) || !back.Docs["x.md"].Next.Equal(st.Docs["x.md"].Next) ||
			!back.Throttles["a:5984"][1].Equal(now) || !back.Memo[0].Until.Equal(st.Memo[0].Until) {
			t.Fatalf("round trip\n%s\n%s", b, b2)
		}
		// Restored into a Hunt and read back: the same State.
		r := newRig(t, Config{})
		r.h.Restore(back)
		r.h.Enqueue("x.md", ids("h:9"), "", 0)
		got := r.h.State()
		if len(got.Throttles["a:5984"]) != 2 || got.Docs["x.md"] != back.Docs["x.md"] ||
			len(got.Memo) != 1 || !slices.Equal(got.Memo[0].IDs, ids("h:1", "h:2")) || !got.Memo[0].Until.Equal(st.Memo[0].Until) {
			t.Errorf("state after restore %+v", got)
		}
	})
}

// A hostile State (negative attempts, times far in the future or zero,
// empty keys, huge maps) is clamped or ignored: no panic, nothing waits
// longer than this Hunt could have made it wait.
func TestStateHostileRestore(t *testing.T) {
	th, docs, memoIDs := maxStateThrottles, maxStateDocs, maxStateMemoIDs
	maxStateThrottles, maxStateDocs, maxStateMemoIDs = 400, 1000, 2000
	t.Cleanup(func() { maxStateThrottles, maxStateDocs, maxStateMemoIDs = th, docs, memoIDs })
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		a := r.source("a:5984", true)
		far := r.t0.Add(100 * 365 * 24 * time.Hour)
		st := State{
			Throttles: map[string][]time.Time{"": {far}, "a:5984": slices.Repeat([]time.Time{far}, 1000)},
			Docs: map[string]DocState{
				"x.md": {Attempts: -7, Next: far},
				"y.md": {Attempts: 1 << 40, Next: time.Time{}},
				"":     {Attempts: 1},
			},
			Memo: []MemoState{
				{Source: "a:5984", IDs: ids("h:9", ""), Until: far},
				{Source: "", IDs: ids("h:1"), Until: far},
			},
		}
		for i := range 500 {
			st.Throttles[fmt.Sprintf("k%d:1", i)] = []time.Time{r.t0, {}, far}
		}
		for i := range 1500 {
			st.Docs[fmt.Sprintf("z%06d", i)] = DocState{Attempts: i, Next: far}
		}
		st.Memo = append(st.Memo, MemoState{Source: "b:1", IDs: make([]string, 4000), Until: far})
		for i := range st.Memo[len(st.Memo)-1].IDs {
			st.Memo[len(st.Memo)-1].IDs[i] = fmt.Sprintf("h:%d", i)
		}
		r.h.Restore(st)
		r.h.Restore(State{}) // an empty State changes nothing
		r.h.Enqueue("x.md", ids("h:1"), "", 0)
		r.h.Enqueue("y.md", ids("h:2"), "", 0)
		got := r.h.State()
		if x, y := got.Docs["x.md"], got.Docs["y.md"]; x.Attempts != 0 || y.Attempts != maxStateAttempts ||
			x.Next.After(r.t0.Add(DefaultBackoffCap)) || !y.Next.Equal(r.t0) {
			t.Errorf("docs %+v %+v", x, y)
		}
		r.h.mu.Lock()
		waiting := len(r.h.restored)
		r.h.mu.Unlock()
		if waiting != maxStateDocs-2 { // x.md and y.md were enqueued
			t.Errorf("%d restored documents kept, want %d", waiting, maxStateDocs-2)
		}
		if n := len(got.Throttles["a:5984"]); n != DefaultMaxPerWindow {
			t.Errorf("%d restored starts kept, want %d", n, DefaultMaxPerWindow)
		}
		if len(got.Throttles) != maxStateThrottles-1 { // the empty key took a place
			t.Errorf("%d throttles", len(got.Throttles))
		}
		total := 0
		for _, m := range got.Memo {
			total += len(m.IDs)
			if m.Source == "" || m.Until.After(r.t0.Add(DefaultMemoTTL)) || slices.Contains(m.IDs, "") {
				t.Errorf("memo %s until %v", m.Source, m.Until)
			}
		}
		if total != maxStateMemoIDs {
			t.Errorf("%d memo ids, want %d", total, maxStateMemoIDs)
		}
		// Future starts count as now: the source is free again one
		// Window later, then both documents are hunted.
		r.until(sec(59))
		if got := a.got(); len(got) != 0 {
			t.Fatalf("requests inside the restored window: %v", got)
		}
		r.until(3 * time.Minute)
		if len(a.asked("h:1")) == 0 || len(a.asked("h:2")) == 0 {
			t.Errorf("requests %v", a.got())
		}
	})
}

// A run that ends without saving its last requests (a leader that died
// between two saves of its State) is continued by one that restores the
// older State and calls Saturate at the moment it takes over: across
// both, no Window holds more than MaxPerWindow starts per source, also
// for a source the saved State never saw, and the continuing run starts
// hunting exactly one Window after the takeover.
func TestSaturateKeepsTheLimitAfterAnUnsavedEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{MaxPerWindow: 3, MaxInFlight: 3, HedgeAfter: time.Hour}
		r := newRig(t, cfg)
		a := r.source("a:5984", false)
		saved := r.h.State() // the last save: before any request
		for i := range 6 {
			a.set(func(s *fakeSource) { s.has[chunkName(i)] = true })
			r.h.Enqueue(docName(i), ids(chunkName(i)), "a:5984", 0)
		}
		time.Sleep(10 * time.Second) // three requests go out, unsaved
		r.h.Close()
		if n := len(a.got()); n != 3 {
			t.Fatalf("the first run made %d requests, want 3", n)
		}
		next := newRig(t, cfg)
		next.t0 = r.t0
		next.srcs = append(next.srcs, a)
		next.h.AddSource(a, nil)
		next.h.Restore(saved)
		takeover := time.Now()
		next.h.Saturate(takeover)
		// a now lacks the rest but one; b, a source first used after the
		// takeover, has them.
		a.set(func(s *fakeSource) { delete(s.has, chunkName(4)); delete(s.has, chunkName(5)) })
		b := next.source("b:5984", false, chunkName(4), chunkName(5))
		for i := 3; i < 6; i++ {
			next.h.Enqueue(docName(i), ids(chunkName(i)), "", 0)
		}
		time.Sleep(10 * time.Minute)
		second := append(a.got()[3:], b.got()...)
		if len(b.got()) == 0 || len(second) < 2 {
			t.Fatalf("the continuing run asked a %v and b %v", a.got()[3:], b.got())
		}
		want := takeover.Sub(r.t0) + time.Minute
		for _, q := range second {
			if q.at < want {
				t.Errorf("the continuing run asked %v at %v, before %v (one Window after the takeover)", q.ids, q.at, want)
			}
		}
		if first := slices.MinFunc(second, func(x, y request) int { return int(x.at - y.at) }); first.at != want {
			t.Errorf("the continuing run's first request at %v, want %v", first.at, want)
		}
	})
}
