package hunt

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// Once: every document gets one pass over every source; a document left
// incomplete is dropped, not retried, and Wait returns when all passes
// ended. The events say what happened to each document.
func TestOncePassEndsAndWaitReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{Once: true})
		a := r.source("a:5984", false, "h:1")
		b := r.source("b:5984", false)
		b.set(func(s *fakeSource) { s.err = errDown })
		r.h.Enqueue("found.md", ids("h:1"), "", 0)
		r.h.Enqueue("lost.md", ids("h:2", "h:3"), "", 0)
		if err := r.h.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s := r.h.Stats(); s.Docs != 0 || s.Completed != 1 {
			t.Fatalf("stats %+v", s)
		}
		done := r.gotEvents(EventCompleted)
		if len(done) != 1 || done[0].Doc != "found.md" {
			t.Fatalf("completed %+v", done)
		}
		ended := r.gotEvents(EventPassEnded)
		if len(ended) != 1 || ended[0].Doc != "lost.md" || ended[0].Next != 0 || !slices.Equal(ended[0].Missing, ids("h:2", "h:3")) {
			t.Fatalf("pass ended %+v", ended)
		}
		failed := r.gotEvents(EventRequestFailed)
		if len(failed) == 0 || failed[0].Source != "b:5984" || !errors.Is(failed[0].Err, errDown) {
			t.Fatalf("failed %+v", failed)
		}
		answered := map[string]int{}
		for _, e := range r.gotEvents(EventAnswered) {
			answered[e.Source] += len(e.IDs)
		}
		if answered["a:5984"] != 3 || answered["b:5984"] != 2 {
			t.Fatalf("answered %v: a is asked for all three ids, b for the two a lacked", answered)
		}
		// No second pass, however long one waits.
		n := len(a.got())
		time.Sleep(10 * time.Minute)
		settle()
		if len(a.got()) != n {
			t.Fatalf("a second pass asked a: %v", a.got())
		}
	})
}

// Wait returns only once the events of the change that ended the last
// hunt are delivered: a caller reads what they told it right after Wait
// (the vault explains a held file from the answers events). A slow event
// callback makes the gap wide.
func TestWaitReturnsAfterTheLastEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{Once: true})
		r.mu.Lock()
		r.eventDelay = time.Second
		r.mu.Unlock()
		r.source("a:5984", false, "h:1")
		r.h.Enqueue("found.md", ids("h:1"), "", 0)
		if err := r.h.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if done := r.gotEvents(EventCompleted); len(done) != 1 {
			t.Fatalf("Wait returned before the completion event was delivered: %+v", done)
		}
	})
}

// Without Once the pass that ends incomplete schedules the next after
// the backoff, and says so.
func TestPassEndedEventCarriesBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		r.source("a:5984", false)
		r.h.Enqueue("lost.md", ids("h:2"), "", 0)
		r.until(sec(1))
		ended := r.gotEvents(EventPassEnded)
		if len(ended) != 1 || ended[0].Next != DefaultBackoffBase || ended[0].Attempt != 1 {
			t.Fatalf("pass ended %+v", ended)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.h.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait with a document still hunted: %v", err)
		}
	})
}
