package replicate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/activity"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

// TestLiveCatchUpThenFollow: "The pull-only catch-up run before opening
// that channel is finite and enters the same typed boundary" and "The
// continuous live channel is intentionally excluded".
func TestLiveCatchUpThenFollow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		remote, local := newMem("remote"), newMem("local")
		seedVault(remote, 10)
		tr := activity.New(nil)
		var mu sync.Mutex
		var finiteDuringPull []int
		remote.onChanges = func(req engine.ChangesRequest) error {
			mu.Lock()
			defer mu.Unlock()
			finiteDuringPull = append(finiteDuringPull, tr.State().Finite)
			return nil
		}
		r, err := replicate.New(replicate.Config{Local: local, Remote: remote, Activity: tr, BatchSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- r.Live(ctx, replicate.Sync) }()
		synctest.Wait()
		sameDocs(t, remote, local)
		if s := tr.State(); s.Finite != 0 || s.FiniteStarts != 1 {
			t.Errorf("after the catch-up: %+v, want no finite activity and one finite start", s)
		}
		mu.Lock()
		// The catch-up reads 10 rows... pages of 4: 3 pages, all finite;
		// the follower's waiting read is not.
		n := len(finiteDuringPull)
		for i, f := range finiteDuringPull {
			if want := 1; i == n-1 {
				want = 0
				if f != want {
					t.Errorf("follower read with finite %d", f)
				}
			} else if f != want {
				t.Errorf("catch-up read %d with finite %d", i, f)
			}
		}
		mu.Unlock()

		// New writes on either side follow without another finite run.
		remote.write("later.md", map[string]any{"type": "plain", "path": "later.md", "children": []string{}})
		local.write("mine.md", map[string]any{"type": "plain", "path": "mine.md", "children": []string{}})
		synctest.Wait()
		sameDocs(t, remote, local)
		if local.winner("later.md") == nil || remote.winner("mine.md") == nil {
			t.Error("live changes not replicated")
		}
		if s := tr.State(); s.FiniteStarts != 1 {
			t.Errorf("live channel entered the finite boundary: %+v", s)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Live returned %v", err)
		}
		r.Close()
	})
}

func TestLiveReconnectsWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		remote, local := newMem("remote"), newMem("local")
		seedVault(remote, 2)
		t0 := time.Now()
		var mu sync.Mutex
		var failures []time.Duration
		fail := 0
		remote.onChanges = func(req engine.ChangesRequest) error {
			mu.Lock()
			defer mu.Unlock()
			if !req.Wait {
				return nil // the catch-up succeeds
			}
			if fail < 8 {
				fail++
				failures = append(failures, time.Since(t0))
				return transportErr
			}
			return nil
		}
		var retries []replicate.Retry
		r, err := replicate.New(replicate.Config{Local: local, Remote: remote, OnRetry: func(rt replicate.Retry) {
			mu.Lock()
			retries = append(retries, rt)
			mu.Unlock()
		}})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = r.Live(t.Context(), replicate.Pull) }()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		mu.Lock()
		// Every reconnection is reported, typed, with its delay.
		if len(retries) != 8 || retries[0].What != "live feed" || retries[0].Direction != replicate.Pull ||
			retries[0].Delay != time.Second || retries[7].Delay != time.Minute || !errors.Is(retries[0].Err, transportErr) {
			t.Errorf("OnRetry saw %+v", retries)
		}
		want := []time.Duration{0, 1, 3, 7, 15, 31, 63, 123} // 1 s doubling, capped at 60 s
		for i := range want {
			want[i] *= time.Second
		}
		if len(failures) != len(want) {
			t.Fatalf("failures at %v", failures)
		}
		for i := range want {
			if failures[i] != want[i] {
				t.Errorf("attempt %d at %v, want %v (all: %v)", i, failures[i], want[i], failures)
			}
		}
		mu.Unlock()

		// Reconnected: new documents follow; a later failure starts over at 1 s.
		remote.write("after.md", map[string]any{"type": "plain", "path": "after.md", "children": []string{}})
		synctest.Wait()
		if local.winner("after.md") == nil {
			t.Error("not following after reconnecting")
		}
		mu.Lock()
		fail = 7
		mu.Unlock()
		t1 := time.Now()
		remote.write("again.md", map[string]any{"type": "plain", "path": "again.md", "children": []string{}})
		time.Sleep(5 * time.Second)
		synctest.Wait()
		mu.Lock()
		if last := failures[len(failures)-1]; last != t1.Sub(t0) {
			t.Errorf("failure at %v, want %v", last, t1.Sub(t0))
		}
		mu.Unlock()
		if local.winner("again.md") == nil {
			t.Error("not reconnected 1 s after a reset backoff")
		}
		r.Close() // waits for the follower
	})
}

func TestCloseStopsLiveAndLaterRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		remote, local := newMem("remote"), newMem("local")
		r, err := replicate.New(replicate.Config{Local: local, Remote: remote})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- r.Live(context.Background(), replicate.Sync) }()
		synctest.Wait()
		r.Close()
		if err := <-done; !errors.Is(err, replicate.ErrClosed) {
			t.Errorf("Live after Close: %v", err)
		}
		if _, err := r.Pull(context.Background()); !errors.Is(err, replicate.ErrClosed) {
			t.Errorf("Pull after Close: %v", err)
		}
	})
}
