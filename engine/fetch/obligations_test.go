package fetch_test

// One test per item of the "Test Obligations" list of upstream's
// docs/design_docs/chunk_retrieval_and_waiting.md (the policy
// matrix row test is in matrix_test.go, the activity-only items in
// engine/activity). Each quotes the obligation it covers.

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/fetch"
)

// until sleeps to the virtual offset d of the rig and lets the bubble settle.
func (r *rig) until(d time.Duration) {
	if w := d - r.now(); w > 0 {
		time.Sleep(w)
	}
	synctest.Wait()
}

// Obligation: "chunks-before-metadata save ordering". The writer persists
// every chunk before the metadata naming it; a reader that then sees the
// metadata finds every chunk locally without waiting, claiming or
// requesting. Fetched chunks follow the same order: persisted before the
// delivery is announced.
func TestChunksBeforeMetadataSaveOrdering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{}, newSource(true))
		r.local.store("h:1")
		r.local.store("h:2") // then the metadata {children: [h:1, h:2]} is written
		res := r.read(ids("h:1", "h:2"), fetch.ReadOptions{WaitForReady: true}).wait(t)
		if !res[0].OK || !res[1].OK || r.now() != 0 || len(r.src.getCalls()) != 0 || r.co.Stats().Claims != 0 {
			t.Errorf("read %+v at %v, %d requests, %+v", res, r.now(), len(r.src.getCalls()), r.co.Stats())
		}

		// Metadata first (readChunksOnline): the fetched chunk is stored
		// before anyone hears of it.
		r.src.put("h:3")
		var order eventLog
		defer r.co.Subscribe(func(evs []fetch.Event) {
			for _, ev := range evs {
				if ev.Kind == fetch.EventDelivered {
					order.add(ev.ID + " stored=" + map[bool]string{true: "yes", false: "no"}[r.local.has(ev.ID)])
				}
			}
		})()
		if res := r.read(ids("h:3"), fetch.ReadOptions{}).wait(t); !res[0].OK {
			t.Fatalf("read: %+v", res)
		}
		synctest.Wait()
		if !slices.Equal(order.list(), []string{"h:3 stored=yes"}) {
			t.Errorf("delivery events %v", order.list())
		}
	})
}

// Obligation: "a finite replication which remains active well beyond the
// former 5-second and 30-second values".
func TestFiniteReplicationActiveWellBeyondFormerTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{}, newSource(false)) // P2P/MinIO: no direct fetch
		end := r.finite()
		rd := r.read(ids("h:x"), fetch.ReadOptions{WaitForReady: true})
		for _, at := range []time.Duration{5 * time.Second, 30 * time.Second, 31 * time.Second, 5 * time.Minute, 20 * time.Minute} {
			r.until(at)
			if rd.finished() {
				t.Fatalf("read ended at %v while finite replication is active", at)
			}
		}
		r.l.Arrived([]engine.Chunk{{ID: "h:x", Data: "d"}}) // the replication delivers it
		if res := rd.wait(t); !res[0].OK || rd.at != 20*time.Minute {
			t.Errorf("result %+v at %v", res[0], rd.at)
		}
		end()
	})
}

// Obligation: "successful completion with the chunk already persisted but
// no arrival event delivered".
func TestCompletionWithChunkPersistedButNoArrivalEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{}, newSource(false))
		end := r.finite()
		rd := r.read(ids("h:x"), fetch.ReadOptions{WaitForReady: true})
		r.until(45 * time.Second)
		r.local.store("h:x") // persisted by the replicator, no event
		r.until(50 * time.Second)
		if rd.finished() {
			t.Fatal("read ended before completion")
		}
		end()
		if res := rd.wait(t); !res[0].OK || rd.at != 50*time.Second {
			t.Errorf("result %+v at %v, want the chunk at completion (50s)", res[0], rd.at)
		}
		if r.local.gets != 2 {
			t.Errorf("%d local reads, want the initial one and one recheck", r.local.gets)
		}
	})
}

// Obligation: "immediate unavailability when no producer is observable".
// "If no producer is observable after synchronous dispatch, return
// unavailable immediately."
func TestImmediateUnavailabilityWhenNoProducerIsObservable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{}, newSource(false))
		res := r.read(ids("h:x", "h:y"), fetch.ReadOptions{WaitForReady: true}).wait(t)
		for _, x := range res {
			if !errors.Is(x.Err, fetch.ErrNoProducer) || !errors.Is(x.Err, engine.ErrMissingChunk) {
				t.Errorf("result %+v", x)
			}
		}
		if r.now() != 0 || r.l.Waiting() != 0 || r.local.gets != 1 {
			t.Errorf("at %v, %d waiters, %d local reads", r.now(), r.l.Waiting(), r.local.gets)
		}
	})
}

// Obligation: "overlapping finite operations and overlapping
// per-identifier claims" (finite overlap alone: engine/activity).
func TestOverlappingFiniteOperationsAndOverlappingClaims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{}, newSource(true))
		release := r.src.blockOn("h:x")
		rd := r.read(ids("h:x"), fetch.ReadOptions{})
		synctest.Wait()
		// A second producer (the hunt) claims the same id.
		hunt := r.co.Claim(ids("h:x"), fetch.ClaimOptions{})
		r.f.SetSource(nil)
		e1 := r.finite()
		r.until(time.Second)
		e2 := r.finite()
		r.until(2 * time.Second)
		e1()
		release() // the fetch answers "missing" (first omission)
		r.until(3 * time.Second)
		// The fetcher's retry at 2 s found no source: its claim is
		// released, but the hunt's claim and finite e2 remain.
		if rd.finished() || !r.co.Claimed("h:x") {
			t.Fatalf("read ended while producers remain: %+v", rd.res)
		}
		e2()
		r.until(4 * time.Second)
		if rd.finished() {
			t.Fatal("read ended while the hunt still claims the id")
		}
		hunt.Release(errors.New("hunt gave up"))
		if res := rd.wait(t); !errors.Is(res[0].Err, fetch.ErrNotDelivered) || rd.at != 4*time.Second {
			t.Errorf("result %+v at %v", res[0], rd.at)
		}
	})
}

// Obligation: "activity restarting while a local recheck is pending".
func TestActivityRestartingWhileLocalRecheckPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{}, newSource(false))
		end1 := r.finite()
		rd := r.read(ids("h:x"), fetch.ReadOptions{WaitForReady: true})
		r.until(10 * time.Second)
		gate := make(chan struct{})
		r.local.mu.Lock()
		r.local.gate = gate
		r.local.mu.Unlock()
		end1() // the recheck starts and blocks
		r.until(11 * time.Second)
		end2 := r.finite() // new activity: the pending recheck is stale
		r.local.mu.Lock()
		r.local.gate = nil
		r.local.mu.Unlock()
		close(gate)
		r.until(12 * time.Second)
		if rd.finished() {
			t.Fatalf("a stale recheck settled the read: %+v", rd.res)
		}
		r.local.store("h:x")
		r.until(20 * time.Second)
		end2()
		if res := rd.wait(t); !res[0].OK || rd.at != 20*time.Second {
			t.Errorf("result %+v at %v", res[0], rd.at)
		}
	})
}

// Obligation: "direct fetch queueing, throttling, persistence, and
// terminal notification".
func TestDirectFetchQueueingThrottlingPersistenceAndTerminalNotification(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{Concurrency: 2}, newSource(true))
		var want []engine.ChunkID
		for i := range 250 {
			id := "h:" + string(rune('A'+i/26)) + string(rune('a'+i%26))
			r.src.put(id)
			want = append(want, id)
		}
		// Claims exist before Request returns: synchronous acceptance.
		// (The gate holds the fetcher at its local recheck meanwhile.)
		gate := make(chan struct{})
		r.local.mu.Lock()
		r.local.gate = gate
		r.local.mu.Unlock()
		r.f.Request(want)
		if s := r.f.Stats(); s.Initial != 250 || r.co.Stats().ClaimedIDs != 250 || !r.co.Claimed(want[249]) {
			t.Errorf("right after dispatch: %+v, %+v", s, r.co.Stats())
		}
		r.local.mu.Lock()
		r.local.gate = nil
		r.local.mu.Unlock()
		close(gate)
		rd := r.read(want, fetch.ReadOptions{})
		res := rd.wait(t)
		calls := r.src.getCalls()
		if len(calls) != 3 || len(calls[0].ids) != 100 || len(calls[1].ids) != 100 || len(calls[2].ids) != 50 ||
			calls[0].at != 0 || calls[1].at != 50*time.Millisecond || calls[2].at != 100*time.Millisecond {
			t.Errorf("calls: %v", callString(calls))
		}
		for i, x := range res {
			if !x.OK || x.Chunk.ID != want[i] || !r.local.has(want[i]) {
				t.Fatalf("result %d: %+v", i, x)
			}
		}
		synctest.Wait()
		if s := r.f.Stats(); s.Delivered < 250 || s.Pending() != 0 || s.Requests != 3 || s.Claims != 0 {
			t.Errorf("stats %+v", s)
		}
		if st := r.act.State(); st.Bounded != 0 {
			t.Errorf("bounded activity after terminal notification: %+v", st)
		}
	})
}

// Obligation: "backoff releasing physical concurrency, mixed-stage
// batching, and eligible retries not being starved by new work".
func TestBackoffReleasesConcurrencyMixedStageBatchingAndNoStarvation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{Concurrency: 1, BatchSize: 2}, newSource(true))
		defer r.finite()()
		r.read(ids("h:a"), fetch.ReadOptions{}) // omitted at 0, retry eligible at 2s
		r.until(time.Second)
		r.src.put("h:slow")
		release := r.src.blockOn("h:slow")
		r.read(ids("h:slow"), fetch.ReadOptions{}) // the one slot is free during a's backoff
		for i, at := range []time.Duration{2100, 2200, 2300, 2400} {
			r.until(at * time.Millisecond)
			r.read(ids("h:n"+string(rune('1'+i))), fetch.ReadOptions{}) // new work while the slot is busy
		}
		r.until(2500 * time.Millisecond)
		release()
		r.until(2600 * time.Millisecond)
		want := "[0s[h:a] 1s[h:slow] 2.5s[h:a h:n1] 2.55s[h:n2 h:n3] 2.6s[h:n4]]"
		if got := callString(r.src.getCalls()); got != want {
			t.Errorf("calls %s\nwant  %s", got, want)
		}
	})
}

// Obligation: "expiry of the earliest queued claim preserving the
// scheduled retry for later identifiers".
func TestExpiryOfEarliestQueuedClaimPreservesLaterRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{StallTimeout: 9 * time.Second}, newSource(true))
		end := r.finite()
		r.run.stuck = 1                               // the first claim's runner never enters
		ra := r.read(ids("h:a"), fetch.ReadOptions{}) // queued, never dispatched
		r.until(time.Second)
		rb := r.read(ids("h:b"), fetch.ReadOptions{}) // 1s, 3s, 7s, 13s, 21s
		r.until(9*time.Second - 1)
		if s := r.f.Stats(); s.Stalls != 0 {
			t.Fatalf("fuse fired early: %+v", s)
		}
		r.until(9 * time.Second)
		if s := r.f.Stats(); s.Stalls != 1 || s.Pending() != 1 {
			t.Fatalf("at 9s: %+v", s)
		}
		r.until(25 * time.Second)
		if want := []time.Duration{sec(1), sec(3), sec(7), sec(13), sec(21)}; !slices.Equal(r.src.callTimes(), want) {
			t.Errorf("b requested at %v, want %v", r.src.callTimes(), want)
		}
		end()
		if res := ra.wait(t); !errors.Is(res[0].Err, fetch.ErrNotDelivered) || ra.at != 25*time.Second {
			t.Errorf("a: %+v at %v (waited on finite replication after expiry)", res[0], ra.at)
		}
		if res := rb.wait(t); !errors.Is(res[0].Err, fetch.ErrRemoteMissing) || rb.at != 25*time.Second {
			t.Errorf("b: %+v at %v", res[0], rb.at)
		}
	})
}

// Obligation: "finite completion interrupting backoff and pre-completion
// in-flight requests requiring a current final probe".
func TestFiniteCompletionInterruptsBackoffAndPreCompletionRequestsNeedFinalProbe(t *testing.T) {
	t.Run("interrupt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{}, newSource(true))
			end := r.finite()
			rd := r.read(ids("h:a"), fetch.ReadOptions{})
			r.until(3 * time.Second) // 0s, 2s; next at 6s
			end()
			if res := rd.wait(t); !errors.Is(res[0].Err, fetch.ErrRemoteMissing) || rd.at != 3*time.Second {
				t.Errorf("%+v at %v", res[0], rd.at)
			}
			if want := []time.Duration{0, sec(2), sec(3)}; !slices.Equal(r.src.callTimes(), want) {
				t.Errorf("requests at %v, want %v", r.src.callTimes(), want)
			}
		})
	})
	t.Run("in-flight", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{}, newSource(true))
			end := r.finite()
			rd := r.read(ids("h:a"), fetch.ReadOptions{})
			r.until(time.Second)
			release := r.src.blockOn("h:a")
			r.until(2 * time.Second) // the retry is on the wire
			end()                    // completion during the request
			r.until(5 * time.Second)
			if rd.finished() {
				t.Fatal("a pre-completion lookup counted as the final probe")
			}
			release()
			if res := rd.wait(t); !errors.Is(res[0].Err, fetch.ErrRemoteMissing) || rd.at != 5*time.Second {
				t.Errorf("%+v at %v", res[0], rd.at)
			}
			if want := []time.Duration{0, sec(2), sec(5)}; !slices.Equal(r.src.callTimes(), want) {
				t.Errorf("requests at %v, want %v", r.src.callTimes(), want)
			}
		})
	})
	t.Run("another finite ends during the final probe", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{}, newSource(true))
			end := r.finite()
			rd := r.read(ids("h:a"), fetch.ReadOptions{})
			r.until(500 * time.Millisecond)
			release := r.src.blockOn("h:a")
			end() // final probe at 0.5s, blocked
			r.until(time.Second)
			r.finite()() // starts and ends during the probe
			r.until(2 * time.Second)
			release()
			if res := rd.wait(t); !errors.Is(res[0].Err, fetch.ErrRemoteMissing) || rd.at != 2*time.Second {
				t.Errorf("%+v at %v", res[0], rd.at)
			}
			if want := []time.Duration{0, sec(0.5), sec(2)}; !slices.Equal(r.src.callTimes(), want) {
				t.Errorf("requests at %v, want %v", r.src.callTimes(), want)
			}
		})
	})
}

// Obligation: "local persistence avoiding an unnecessary retry, including
// completion during request-interval throttling".
func TestLocalPersistenceAvoidsUnnecessaryRetry(t *testing.T) {
	t.Run("retry", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{}, newSource(true))
			defer r.finite()()
			rd := r.read(ids("h:a"), fetch.ReadOptions{})
			r.until(time.Second)
			r.local.store("h:a") // replication persisted it during backoff
			if res := rd.wait(t); !res[0].OK || rd.at != 2*time.Second {
				t.Errorf("%+v at %v", res[0], rd.at)
			}
			if want := []time.Duration{0}; !slices.Equal(r.src.callTimes(), want) {
				t.Errorf("requests at %v, want only %v", r.src.callTimes(), want)
			}
		})
	})
	t.Run("completion during interval throttling", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{MinInterval: time.Second}, newSource(true))
			end := r.finite()
			r.src.put("h:a")
			r.read(ids("h:a"), fetch.ReadOptions{}) // on the wire at 0
			r.until(100 * time.Millisecond)
			rb := r.read(ids("h:b"), fetch.ReadOptions{}) // throttled until 1s
			r.until(500 * time.Millisecond)
			r.local.store("h:b")
			end() // completion while b waits for its interval
			if res := rb.wait(t); !res[0].OK || rb.at != time.Second {
				t.Errorf("%+v at %v", res[0], rb.at)
			}
			if got := callString(r.src.getCalls()); got != "[0s[h:a]]" {
				t.Errorf("requests %s, want only a", got)
			}
		})
	})
}

// Obligation: "partial fetch results settling available identifiers and
// retrying only absent identifiers".
func TestPartialResultsSettleAvailableAndRetryOnlyAbsent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{}, newSource(true))
		defer r.finite()()
		r.src.put("h:a")
		var delivered eventLog
		defer r.co.Subscribe(func(evs []fetch.Event) {
			for _, ev := range evs {
				if ev.Kind == fetch.EventDelivered {
					delivered.add(r.now().String() + " " + ev.ID)
				}
			}
		})()
		both := r.read(ids("h:a", "h:b"), fetch.ReadOptions{})
		r.until(3 * time.Second)
		if got := callString(r.src.getCalls()); got != "[0s[h:a h:b] 2s[h:b]]" {
			t.Errorf("requests %s", got)
		}
		if !slices.Equal(delivered.list(), []string{"0s h:a"}) {
			t.Errorf("deliveries %v", delivered.list())
		}
		if s := r.f.Stats(); s.Delivered != 1 || s.Retrying != 1 || s.Initial != 0 || s.Claims != 1 {
			t.Errorf("stats %+v", s)
		}
		if both.finished() {
			t.Error("the read of a and b ended while b is pending")
		}
	})
}

// Obligation: "partial-batch completion and expired-request responses
// preserving replacement claims".
func TestPartialBatchAndExpiredResponsesPreserveReplacementClaims(t *testing.T) {
	t.Run("expired request omits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{StallTimeout: 10 * time.Second}, newSource(true))
			release := r.src.blockOn("h:a")
			r1 := r.read(ids("h:a"), fetch.ReadOptions{})
			if res := r1.wait(t); !errors.Is(res[0].Err, fetch.ErrNotDelivered) || r1.at != 10*time.Second {
				t.Errorf("expired read: %+v at %v (the fuse never claims remote absence)", res[0], r1.at)
			}
			r.until(11 * time.Second)
			r2 := r.read(ids("h:a"), fetch.ReadOptions{}) // replacement claim
			r.until(12 * time.Second)
			if n := len(r.src.getCalls()); n != 1 {
				t.Fatalf("%d requests: the replacement went on the wire beside the stale one", n)
			}
			release() // the stale request answers "missing"
			res := r2.wait(t)
			if !errors.Is(res[0].Err, fetch.ErrRemoteMissing) || r2.at != 14*time.Second {
				t.Errorf("replacement: %+v at %v", res[0], r2.at)
			}
			if want := []time.Duration{0, sec(12), sec(14)}; !slices.Equal(r.src.callTimes(), want) {
				t.Errorf("requests at %v, want %v", r.src.callTimes(), want)
			}
		})
	})
	t.Run("expired request delivers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{StallTimeout: 10 * time.Second}, newSource(true))
			release := r.src.blockOn("h:a")
			r.read(ids("h:a"), fetch.ReadOptions{})
			r.until(11 * time.Second)
			r2 := r.read(ids("h:a"), fetch.ReadOptions{})
			r.until(12 * time.Second)
			r.src.put("h:a")
			release() // the stale answer is persisted; the replacement finds it locally
			if res := r2.wait(t); !res[0].OK || r2.at != 12*time.Second {
				t.Errorf("replacement: %+v at %v", res[0], r2.at)
			}
			if n := len(r.src.getCalls()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	})
	t.Run("partial batch cannot refresh another claim", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{StallTimeout: 10 * time.Second}, newSource(true))
			defer r.finite()()
			r.src.put("h:a")
			r.read(ids("h:a", "h:b"), fetch.ReadOptions{}) // a settles at 0, b retries 2, 6, 12, 20
			r.until(time.Second)
			r.src.blockOn("h:c")
			rc := r.read(ids("h:c"), fetch.ReadOptions{}) // its request never answers
			r.until(11*time.Second - 1)
			if rc.finished() || r.co.Stats().Stalls != 0 {
				t.Fatal("c's claim expired early")
			}
			r.until(11 * time.Second)
			if r.co.Stats().Stalls != 1 || r.co.Claimed("h:c") {
				t.Fatalf("c's claim was kept alive by b's progress: %+v", r.co.Stats())
			}
			if s := r.f.Stats(); s.Retrying != 1 || s.Claims != 1 {
				t.Errorf("b's claim: %+v", s)
			}
		})
	})
}

// Obligation: "disjoint initial and retry counts retaining queued
// identifiers without duplicates and releasing only settled ownership".
func TestDisjointInitialAndRetryCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{Concurrency: 1, BatchSize: 1, MinInterval: time.Second}, newSource(true))
		defer r.finite()()
		r.src.put("h:c")
		r.read(ids("h:a", "h:b", "h:c"), fetch.ReadOptions{})
		synctest.Wait()
		r.read(ids("h:c", "h:b", "h:a"), fetch.ReadOptions{}) // no duplicates
		check := func(at time.Duration, initial, retrying int) {
			t.Helper()
			r.until(at)
			s := r.f.Stats()
			if s.Initial != initial || s.Retrying != retrying {
				t.Errorf("at %v: 🛄%d 🔁%d, want 🛄%d 🔁%d", at, s.Initial, s.Retrying, initial, retrying)
			}
		}
		check(500*time.Millisecond, 2, 1)  // a omitted; b, c queued
		check(1500*time.Millisecond, 1, 2) // b omitted
		check(2500*time.Millisecond, 0, 2) // c delivered at 2s
		// A second fetcher's claim survives this fetcher's teardown.
		src2 := newSource(true)
		defer src2.blockOn("h:z")()
		f2, err := fetch.New(fetch.Config{}, fetch.Deps{Source: src2, Local: r.local, Activity: r.act, Claims: r.co})
		if err != nil {
			t.Fatal(err)
		}
		f2.Request(ids("h:z"))
		r.f.Close()
		if s := f2.Stats(); s.Initial != 1 || !r.co.Claimed("h:z") || r.co.Claimed("h:a") {
			t.Errorf("after the first fetcher's teardown: %+v", s)
		}
		f2.Close()
	})
}

// Obligation: "concurrent request starts respecting the configured
// interval after retry and throttle waits".
func TestConcurrentStartsRespectIntervalAfterRetryAndThrottleWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{Concurrency: 5, BatchSize: 1, MinInterval: time.Second}, newSource(true))
		defer r.finite()()
		r.read(ids("h:a", "h:b", "h:c", "h:d", "h:e"), fetch.ReadOptions{})
		r.until(time.Minute)
		times := r.src.callTimes()
		if len(times) < 30 {
			t.Fatalf("only %d requests", len(times))
		}
		for i := 1; i < len(times); i++ {
			if gap := times[i] - times[i-1]; gap < time.Second {
				t.Fatalf("starts %v and %v are %v apart", times[i-1], times[i], gap)
			}
		}
		if want := []time.Duration{0, sec(1), sec(2), sec(3), sec(4), sec(5), sec(6)}; !slices.Equal(times[:7], want) {
			t.Errorf("first starts %v, want %v", times[:7], want)
		}
	})
}

// Obligation: "terminal unavailability after a current final successful
// omission". "No retry remains for a future synchronisation."
func TestTerminalUnavailabilityAfterCurrentFinalOmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{}, newSource(true))
		end := r.finite()
		rd := r.read(ids("h:a"), fetch.ReadOptions{})
		r.until(7 * time.Second)
		end()
		res := rd.wait(t)
		if !errors.Is(res[0].Err, fetch.ErrRemoteMissing) || rd.at != 7*time.Second {
			t.Errorf("%+v at %v", res[0], rd.at)
		}
		n := len(r.src.getCalls())
		r.finite()() // a later synchronisation
		r.until(time.Minute)
		if len(r.src.getCalls()) != n {
			t.Errorf("a retry remained after the terminal result: %v", r.src.callTimes())
		}
		if s := r.f.Stats(); s.RemoteMissing != 1 || s.Pending() != 0 || s.Claims != 0 {
			t.Errorf("stats %+v", s)
		}
	})
}

// Obligation: "explicit remote absence versus transport or replicator
// failure".
func TestExplicitRemoteAbsenceVersusTransportOrReplicatorFailure(t *testing.T) {
	t.Run("absence", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{}, newSource(true))
			res := r.read(ids("h:a"), fetch.ReadOptions{}).wait(t)
			if !errors.Is(res[0].Err, fetch.ErrRemoteMissing) || !errors.Is(res[0].Err, engine.ErrMissingChunk) {
				t.Errorf("%+v", res[0])
			}
		})
	})
	t.Run("transport", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{}, newSource(true))
			boom := errors.New("connection reset")
			r.src.err = boom
			res := r.read(ids("h:a"), fetch.ReadOptions{}).wait(t)
			var ee *engine.Error
			if !errors.Is(res[0].Err, boom) || !errors.As(res[0].Err, &ee) || ee.Stage != engine.StageTransport ||
				errors.Is(res[0].Err, engine.ErrMissingChunk) {
				t.Errorf("%+v", res[0])
			}
			r.until(time.Minute)
			if n := len(r.src.getCalls()); n != 1 || r.f.Stats().Failures != 1 {
				t.Errorf("%d requests (a transport error is not retried here), %+v", n, r.f.Stats())
			}
		})
	})
	t.Run("invalid answer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{}, newSource(true))
			r.src.answer = func([]engine.ChunkID) (engine.FetchResult, bool) { return engine.FetchResult{}, true }
			res := r.read(ids("h:a"), fetch.ReadOptions{}).wait(t)
			var ee *engine.Error
			if !errors.Is(res[0].Err, engine.ErrMalformed) || !errors.As(res[0].Err, &ee) || ee.Stage != engine.StageProtocol {
				t.Errorf("%+v", res[0])
			}
		})
	})
	t.Run("no active replicator", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{}, newSource(true))
			r.src.put("h:a")
			r.read(ids("h:a"), fetch.ReadOptions{}).wait(t) // at 0; the next start is at 50ms
			rb := r.read(ids("h:b"), fetch.ReadOptions{})
			r.until(20 * time.Millisecond)
			r.f.SetSource(nil)
			res := rb.wait(t)
			if !errors.Is(res[0].Err, fetch.ErrNotDelivered) || rb.at != 50*time.Millisecond {
				t.Errorf("%+v at %v", res[0], rb.at)
			}
			if s := r.f.Stats(); s.Released != 1 || s.RemoteMissing != 0 {
				t.Errorf("stats %+v", s)
			}
		})
	})
}

// Obligation: "runner rejection, cancellation, teardown, and an operation
// which never enters its task".
func TestRunnerRejectionCancellationTeardownAndNeverEnteredTask(t *testing.T) {
	t.Run("rejection", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{}, newSource(true))
			r.run.reject = errors.New("application is closing")
			res := r.read(ids("h:a"), fetch.ReadOptions{}).wait(t)
			if !errors.Is(res[0].Err, fetch.ErrNotDelivered) || r.now() != 0 || len(r.src.getCalls()) != 0 {
				t.Errorf("%+v at %v, %d requests", res[0], r.now(), len(r.src.getCalls()))
			}
			if s := r.f.Stats(); s.Released != 1 || s.Claims != 0 {
				t.Errorf("stats %+v", s)
			}
		})
	})
	t.Run("never enters", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{}, newSource(true))
			r.run.stuck = 1
			rd := r.read(ids("h:a"), fetch.ReadOptions{})
			if res := rd.wait(t); !errors.Is(res[0].Err, fetch.ErrNotDelivered) || rd.at != 5*time.Minute {
				t.Errorf("%+v at %v", res[0], rd.at)
			}
			if n := len(r.src.getCalls()); n != 0 {
				t.Errorf("%d requests before the boundary was entered", n)
			}
		})
	})
	t.Run("cancellation", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{}, newSource(true))
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error)
			go func() {
				_, err := r.l.Get(ctx, ids("h:a"), fetch.ReadOptions{})
				done <- err
			}()
			other := r.read(ids("h:a"), fetch.ReadOptions{})
			r.until(time.Second)
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled Get: %v", err)
			}
			// The shared waiter and the claim go on for the other read.
			if res := other.wait(t); !errors.Is(res[0].Err, fetch.ErrRemoteMissing) || other.at != 2*time.Second {
				t.Errorf("other read: %+v at %v", res[0], other.at)
			}
		})
	})
	t.Run("teardown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{}, newSource(true))
			r.src.blockOn("h:a") // never released: Close must cancel it
			ra := r.read(ids("h:a"), fetch.ReadOptions{})
			r.until(time.Second)
			r.f.Close()
			if res := ra.wait(t); !errors.Is(res[0].Err, fetch.ErrNotDelivered) || ra.at != time.Second {
				t.Errorf("%+v at %v", res[0], ra.at)
			}
			end := r.finite()
			rb := r.read(ids("h:b"), fetch.ReadOptions{WaitForReady: true})
			r.until(2 * time.Second)
			r.l.Close()
			if res := rb.wait(t); !errors.Is(res[0].Err, fetch.ErrClosed) {
				t.Errorf("%+v", res[0])
			}
			end()
			// synctest fails the test if any goroutine outlives the bubble.
		})
	})
}

// Obligation: "leak-fuse refresh at observable progress points". The fuse
// fires at exactly five minutes of inactivity and not a nanosecond
// earlier; it does not claim remote absence or abort the request.
func TestLeakFuseRefreshAtProgressPoints(t *testing.T) {
	t.Run("exactly five minutes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{}, newSource(true))
			release := r.src.blockOn("h:a")
			rd := r.read(ids("h:a"), fetch.ReadOptions{})
			r.until(5*time.Minute - 1)
			if rd.finished() || r.co.Stats().Stalls != 0 {
				t.Fatal("the fuse fired before five minutes")
			}
			r.until(5 * time.Minute)
			if !rd.finished() || !errors.Is(rd.res[0].Err, fetch.ErrNotDelivered) || errors.Is(rd.res[0].Err, fetch.ErrRemoteMissing) {
				t.Fatalf("at 5m: %+v", rd.res)
			}
			r.src.mu.Lock()
			onWire := r.src.inflight["h:a"]
			r.src.mu.Unlock()
			if !onWire {
				t.Error("the fuse aborted the physical request")
			}
			release()
		})
	})
	t.Run("omissions refresh", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, fetch.Config{StallTimeout: 9 * time.Second}, newSource(true))
			defer r.finite()()
			r.read(ids("h:a"), fetch.ReadOptions{})
			// Omissions at 0, 2, 6, 12, 20 (gaps up to 8 s < 9 s) keep it
			// alive; the 10 s gap after 20 s does not: it fires at 29 s.
			r.until(29*time.Second - 1)
			if r.co.Stats().Stalls != 0 {
				t.Fatal("fired while omissions were progressing")
			}
			r.until(29 * time.Second)
			if r.co.Stats().Stalls != 1 {
				t.Fatal("did not fire 9 s after the last progress")
			}
		})
	})
	t.Run("throttle waits are not progress", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// "A minimum interval of five minutes or more is an
			// exceptional value: the inactivity fuse may release the
			// logical claim before that deliberate pause completes. An
			// expired claim is not dispatched after the pause."
			r := newRig(t, fetch.Config{MinInterval: 6 * time.Minute}, newSource(true))
			r.src.put("h:a")
			r.read(ids("h:a"), fetch.ReadOptions{}).wait(t)
			rb := r.read(ids("h:b"), fetch.ReadOptions{})
			if res := rb.wait(t); !errors.Is(res[0].Err, fetch.ErrNotDelivered) || rb.at != 5*time.Minute {
				t.Errorf("%+v at %v", res[0], rb.at)
			}
			r.until(7 * time.Minute)
			if n := len(r.src.getCalls()); n != 1 {
				t.Errorf("the expired claim was dispatched after the pause: %v", r.src.getCalls())
			}
		})
	})
}
