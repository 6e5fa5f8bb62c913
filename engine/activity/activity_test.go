package activity_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine/activity"
)

// recorder records every quiescence notification with the counts read in
// the callback and its virtual time.
type recorder struct {
	mu     sync.Mutex
	t0     time.Time
	events []string
}

func (r *recorder) attach(tr *activity.Tracker) func() {
	r.t0 = time.Now()
	return tr.Subscribe(func() {
		st := tr.State()
		r.mu.Lock()
		defer r.mu.Unlock()
		kind := "active"
		if st.Quiescent() {
			kind = "quiescent"
		}
		r.events = append(r.events, time.Since(r.t0).String()+" "+kind)
	})
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFiniteIsAlsoBounded(t *testing.T) {
	tr := activity.New(nil)
	err := tr.RunFinite(context.Background(), "replication", func(context.Context) error {
		if got := tr.State(); got.Bounded != 1 || got.Finite != 1 || got.FiniteStarts != 1 {
			t.Errorf("inside RunFinite: %+v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.State(); got.Bounded != 0 || got.Finite != 0 || got.FiniteStarts != 1 {
		t.Errorf("after RunFinite: %+v", got)
	}
}

// "A push-only P2P request remains broad remote activity for Wake Lock and
// lifecycle reporting, but it is deliberately excluded from
// finiteReplicationActivityCount because it cannot deliver a local
// document."
func TestPushOnlyIsBoundedNotFinite(t *testing.T) {
	tr := activity.New(nil)
	var r recorder
	defer r.attach(tr)()
	_ = tr.RunBounded(context.Background(), "p2p-push", func(context.Context) error {
		if got := tr.State(); got.Bounded != 1 || got.Finite != 0 {
			t.Errorf("inside RunBounded: %+v", got)
		}
		return nil
	})
	if ev := r.get(); len(ev) != 0 {
		t.Errorf("bounded activity notified finite subscribers: %v", ev)
	}
}

// "If the operation fails, it has not proved remote absence or latest
// state. It has nevertheless stopped being a producer."
func TestFailedOperationEndsItsBoundary(t *testing.T) {
	synctest.Test(t, testFailedOperationEndsItsBoundary)
}

func testFailedOperationEndsItsBoundary(t *testing.T) {
	tr := activity.New(nil)
	var r recorder
	defer r.attach(tr)()
	boom := errors.New("replication failed")
	if err := tr.RunFinite(context.Background(), "replication", func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	if got := tr.State(); got.Finite != 0 || got.Bounded != 0 {
		t.Errorf("after a failed operation: %+v", got)
	}
	if want := []string{"0s active", "0s quiescent"}; !equal(r.get(), want) {
		t.Errorf("notifications %v, want %v", r.get(), want)
	}
}

func TestPanicEndsItsBoundary(t *testing.T) {
	tr := activity.New(nil)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("panic was swallowed")
			}
		}()
		_ = tr.RunFinite(context.Background(), "replication", func(context.Context) error { panic("bug") })
	}()
	if got := tr.State(); got.Finite != 0 || got.Bounded != 0 {
		t.Errorf("after a panicking operation: %+v", got)
	}
}

// Obligation: "overlapping finite operations and overlapping per-identifier
// claims" (the finite half; the claim half is in engine/fetch).
// "Overlapping finite replications keep the count above zero until the
// final operation settles."
func TestOverlappingFiniteOperations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := activity.New(nil)
		var r recorder
		defer r.attach(tr)()
		var wg sync.WaitGroup
		run := func(start, d time.Duration) {
			wg.Go(func() {
				time.Sleep(start)
				_ = tr.RunFinite(t.Context(), "replication", func(context.Context) error {
					time.Sleep(d)
					return nil
				})
			})
		}
		run(0, 10*time.Second)             // 0s..10s
		run(5*time.Second, 20*time.Second) // 5s..25s
		run(40*time.Second, time.Second)   // 40s..41s
		time.Sleep(24 * time.Second)
		synctest.Wait()
		if got := tr.State(); got.Finite != 1 || got.FiniteStarts != 2 {
			t.Errorf("at 24s: %+v", got)
		}
		wg.Wait()
		want := []string{"0s active", "25s quiescent", "40s active", "41s quiescent"}
		if !equal(r.get(), want) {
			t.Errorf("notifications %v, want %v", r.get(), want)
		}
	})
}

// Obligation: "runner rejection, cancellation, teardown, and an operation
// which never enters its task" (the runner half: rejection after Close and
// cancellation through the context).
func TestRunnerRejectionAndCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := activity.New(nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			done <- tr.RunFinite(ctx, "replication", func(ctx context.Context) error {
				<-ctx.Done()
				return ctx.Err()
			})
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := tr.State(); got.Finite != 1 {
			t.Fatalf("before cancel: %+v", got)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v", err)
		}
		if got := tr.State(); got.Finite != 0 || got.Bounded != 0 {
			t.Errorf("after cancel: %+v", got)
		}

		tr.Close()
		entered := false
		err := tr.RunBounded(t.Context(), "chunk-fetch", func(context.Context) error { entered = true; return nil })
		if !errors.Is(err, activity.ErrClosed) || entered {
			t.Errorf("after Close: err=%v entered=%v", err, entered)
		}
	})
}

// Obligation: "continuous replication's finite initial catch-up and
// parameter fallback". This models the replicator's use of the boundary
// (engine/replicate will drive it the same way): "The pull-only catch-up
// run before opening that channel is finite and enters the same typed
// boundary. Its one-shot batch-size fallback remains inside that
// boundary. A live-channel fallback starts another continuous attempt and
// therefore another bounded initial catch-up." The live channel itself is
// in neither count.
func TestContinuousReplicationFiniteInitialCatchUpAndParameterFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := activity.New(nil)
		var r recorder
		defer r.attach(tr)()
		errTooLarge := errors.New("413 request entity too large")

		// catchUp pulls with a batch size; a 413 halves it and tries again
		// inside the same finite boundary.
		catchUp := func(ctx context.Context) error {
			return tr.RunFinite(ctx, "replication", func(ctx context.Context) error {
				for batch := 250; ; batch /= 2 {
					time.Sleep(3 * time.Second) // one attempt
					if batch > 100 {
						continue // errTooLarge: fall back inside the boundary
					}
					return nil
				}
			})
		}
		live := func(ctx context.Context, d time.Duration) error {
			// The continuous channel: no boundary, no count.
			if st := tr.State(); st.Finite != 0 {
				t.Errorf("live channel counted as finite: %+v", st)
			}
			time.Sleep(d)
			return errTooLarge // the channel fails and the caller falls back
		}

		ctx := t.Context()
		_ = catchUp(ctx) // 0s..9s: 250 → 125 → 62
		_ = live(ctx, 60*time.Second)
		_ = catchUp(ctx) // live-channel fallback: another catch-up at 69s..78s
		_ = live(ctx, time.Second)

		want := []string{"0s active", "9s quiescent", "1m9s active", "1m18s quiescent"}
		if !equal(r.get(), want) {
			t.Errorf("notifications %v, want %v", r.get(), want)
		}
		if got := tr.State(); got.FiniteStarts != 2 {
			t.Errorf("FiniteStarts = %d, want 2 (one per catch-up, fallback inside)", got.FiniteStarts)
		}
	})
}

func TestUnsubscribe(t *testing.T) {
	tr := activity.New(nil)
	var r recorder
	cancel := r.attach(tr)
	cancel()
	cancel()
	_ = tr.RunFinite(context.Background(), "replication", func(context.Context) error { return nil })
	if ev := r.get(); len(ev) != 0 {
		t.Errorf("notified after unsubscribe: %v", ev)
	}
}
