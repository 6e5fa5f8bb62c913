package purgatory

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/hold"
)

// Late binding: an older revision's chunks may arrive after a newer
// revision was received, and a revision is released only once its own
// chunks are all local. Two revisions of one note share
// one entry; the needed set is the union; chunks arrive newest-first.
func TestLateBindingNewerCompletesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		r.hold(r.rev("n.md", "2-a", "h:a"), couch)
		r.sleepUntil(time.Second)
		r.hold(r.rev("n.md", "3-b", "h:b"), couch)
		if h := r.p.Held(); len(h) != 1 || strings.Join(h[0].Revisions, ",") != "3-b,2-a" || h[0].Missing != 2 {
			t.Fatalf("one entry for both revisions: %+v", h)
		}
		r.sleepUntil(10 * time.Second)
		r.arrive("h:b")
		r.sleepUntil(20 * time.Second)
		r.arrive("h:a") // the older revision completes after the newer was released
		r.wantReleased(release{10 * time.Second, "n.md", "3-b"})
		r.wantCalls(
			hunterCall{At: 0, Op: "enqueue", Doc: "n.md", Needed: []engine.ChunkID{"h:a"}, Origin: couch, Delay: 500 * time.Millisecond},
			hunterCall{At: time.Second, Op: "enqueue", Doc: "n.md", Needed: []engine.ChunkID{"h:a", "h:b"}, Origin: couch, Delay: 500 * time.Millisecond},
			hunterCall{At: 10 * time.Second, Op: "remove", Doc: "n.md"},
		)
		if got := r.hold(r.rev("n.md", "2-a", "h:a"), couch); got != hold.Superseded {
			t.Fatalf("older revision delivered again: %v", got)
		}
		r.wantReleased(release{10 * time.Second, "n.md", "3-b"})
	})
}

// The opposite order: the older revision completes first and is served
// (it is the newest complete one), then the newer one replaces it.
func TestLateBindingOlderCompletesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		r.hold(r.rev("n.md", "2-a", "h:a"), couch)
		r.hold(r.rev("n.md", "3-b", "h:b"), couch)
		r.sleepUntil(10 * time.Second)
		r.arrive("h:a")
		if h, _ := r.held("n.md"); strings.Join(h.Revisions, ",") != "3-b" || h.Missing != 1 {
			t.Fatalf("after the older was released: %+v", h)
		}
		r.sleepUntil(20 * time.Second)
		r.arrive("h:b")
		r.wantReleased(release{10 * time.Second, "n.md", "2-a"}, release{20 * time.Second, "n.md", "3-b"})
		calls := r.hunter.Calls()
		if c := calls[2]; c.At != 10*time.Second || c.Op != "enqueue" || strings.Join(c.Needed, ",") != "h:b" {
			t.Fatalf("needed not narrowed after the older release: %v", calls)
		}
		if c := calls[len(calls)-1]; c.Op != "remove" || c.At != 20*time.Second {
			t.Fatalf("last call %v", c)
		}
	})
}

// Both revisions complete in one batch: only the newest is released; an
// equal-generation conflict is ordered by rev id, as CouchDB picks.
func TestLateBindingSameBatchAndConflicts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		r.hold(r.rev("n.md", "4-aaa", "h:1"), couch)
		r.hold(r.rev("n.md", "4-fff", "h:2"), couch)
		r.hold(r.rev("n.md", "3-zzz", "h:3"), couch)
		r.arrive("h:1", "h:2", "h:3")
		r.wantReleased(release{0, "n.md", "4-fff"})
		if s := r.p.Stats(); s.Superseded != 2 || s.Releases != 1 {
			t.Fatalf("stats %+v", s)
		}
	})
}

// A revision that fails verification is reported, dropped, remembered
// and never served; the next newest complete revision is released.
func TestVerificationFailureRejects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		r.hold(r.rev("n.md", "2-a", "h:a"), couch)
		r.hold(r.rev("n.md", "3-b", "h:b"), couch)
		r.rel.failWith("n.md", "3-b", &engine.Error{Op: "read file", DocID: "n.md", Stage: engine.StageDecrypt, Err: engine.ErrDecrypt})
		r.arrive("h:a", "h:b")
		r.wantReleased(release{0, "n.md", "2-a"})
		if s := r.p.Stats(); s.VerifyFailures != 1 || s.Releases != 1 || s.Remembered != 1 {
			t.Fatalf("stats %+v", s)
		}
		if got := r.hold(r.rev("n.md", "3-b", "h:b"), couch); got != hold.Rejected {
			t.Fatalf("rejected revision delivered again: %v", got)
		}
		if !strings.Contains(r.logs.String(), `"reason":"verification failed"`) {
			t.Fatalf("no rejection log:\n%s", r.logs.String())
		}

		// Synchronous path: Hold reports the failure as a permanent *ReleaseError.
		r.local.add("h:s")
		r.rel.failWith("s.md", "1-s", &engine.Error{Op: "read file", DocID: "s.md", Stage: engine.StageSize, Err: engine.ErrSizeMismatch})
		out, err := r.p.Hold(t.Context(), r.rev("s.md", "1-s", "h:s"), ClientPush)
		var re *ReleaseError
		if out != hold.Rejected || !errors.As(err, &re) || !re.Permanent || !errors.Is(err, engine.ErrSizeMismatch) {
			t.Fatalf("Hold = %v, %v", out, err)
		}
		if len(r.p.Held()) != 0 {
			t.Fatalf("held after rejection: %+v", r.p.Held())
		}
	})
}

// A release that fails for a non-permanent reason keeps the revision
// held (never served) and is retried after ReleaseRetry.
func TestTransientReleaseFailureRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		r.local.add("h:1")
		r.rel.failWith("n.md", "1-a", errors.New("disk full"), errors.New("disk full"))
		out, err := r.p.Hold(t.Context(), r.rev("n.md", "1-a", "h:1"), couch)
		var re *ReleaseError
		if out != hold.Held || !errors.As(err, &re) || re.Permanent {
			t.Fatalf("Hold = %v, %v", out, err)
		}
		if h, _ := r.held("n.md"); h.Reason != ReasonReleaseFailed || h.Missing != 0 {
			t.Fatalf("held %+v", h)
		}
		r.sleepUntil(30*time.Second - 1)
		r.wantReleased()
		r.sleepUntil(30 * time.Second) // second failure
		r.sleepUntil(60 * time.Second)
		r.wantReleased(release{60 * time.Second, "n.md", "1-a"})
		r.wantCalls() // complete all along: never hunted
		if s := r.p.Stats(); s.ReleaseErrors != 2 || s.Releases != 1 {
			t.Fatalf("stats %+v", s)
		}
	})
}

// An arrival announcement that is wrong (the chunk is not local after
// all) keeps the document held; the release recheck restores the
// missing set and the Hunter gets it again.
func TestReleaseFindsChunkMissing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		r.hold(r.rev("n.md", "1-a", "h:1", "h:2"), couch)
		r.local.add("h:1")
		r.p.ChunksArrived([]engine.ChunkID{"h:1", "h:2"}) // h:2 is not local
		waitIdle()
		r.wantReleased()
		if h, _ := r.held("n.md"); h.Missing != 1 {
			t.Fatalf("held %+v", h)
		}
		calls := r.hunter.Calls()
		if c := calls[len(calls)-1]; c.Op != "enqueue" || strings.Join(c.Needed, ",") != "h:2" {
			t.Fatalf("calls %v", calls)
		}
		r.arrive("h:2")
		r.wantReleased(release{0, "n.md", "1-a"})
	})
}

// Hold reports a local store error and holds nothing; after Close it
// fails with ErrClosed.
func TestHoldErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		boom := errors.New("store unavailable")
		r.local.err = boom
		if _, err := r.p.Hold(t.Context(), r.rev("n.md", "1-a", "h:1"), couch); !errors.Is(err, boom) {
			t.Fatalf("err %v", err)
		}
		r.local.err = nil
		if len(r.p.Held()) != 0 || len(r.hunter.Calls()) != 0 {
			t.Fatal("held after a store error")
		}
		if _, err := r.p.Hold(t.Context(), hold.Revision{Doc: "n.md"}, couch); !errors.Is(err, engine.ErrMalformed) {
			t.Fatalf("no rev: %v", err)
		}
		r.p.Close()
		if _, err := r.p.Hold(context.Background(), r.rev("n.md", "1-a"), couch); !errors.Is(err, ErrClosed) {
			t.Fatalf("after Close: %v", err)
		}
	})
}

func TestCompareRevs(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"1-a", "1-a", 0},
		{"2-a", "1-z", 1},
		{"10-a", "9-z", 1}, // numeric generation, not string order
		{"3-abc", "3-abd", -1},
		{"x", "1-a", -1}, // malformed counts as generation 0
		{"0-a", "x", 1},
	} {
		if got := CompareRevs(c.a, c.b); got != c.want {
			t.Errorf("CompareRevs(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := CompareRevs(c.b, c.a); got != -c.want {
			t.Errorf("CompareRevs(%q, %q) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Config{ActiveFor: -1, SoftExpiry: -1}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "ActiveFor") || !strings.Contains(err.Error(), "SoftExpiry") {
		t.Fatalf("Validate = %v", err)
	}
	d := Config{}.withDefaults()
	if d.PushedDelay != 3*time.Minute || d.PulledDelay != 500*time.Millisecond || d.ActiveFor != 30*time.Minute ||
		d.SoftExpiry != 24*time.Hour || d.RememberExpired != 7*24*time.Hour {
		t.Fatalf("defaults %+v", d)
	}
	if _, err := New(Config{}, Deps{}); err == nil {
		t.Fatal("New without Local and Release")
	}
}

func TestUniqueChunks(t *testing.T) {
	r := hold.Revision{Doc: "n.md", Rev: "2-x", Chunks: []string{"h:2", "h:1", "h:2", "h:1"}}
	if got := strings.Join(uniqueChunks(r), ","); got != "h:1,h:2" {
		t.Fatalf("uniqueChunks = %s", got)
	}
}
