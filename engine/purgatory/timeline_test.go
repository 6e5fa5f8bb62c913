package purgatory

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/hold"
)

const couch = "couch.example:5984" // the ThrottleKey of a pulled revision's source

// Timeline A, the metadata arrives first and the chunks are expected
// from the same pusher: a client pushes the metadata
// before its chunks; the chunks follow in the same push within 3 minutes.
func TestTimelineA_PushedMetadataChunksFollow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		rv := r.rev("note.md", "1-a", "h:1", "h:2")
		if got := r.hold(rv, ClientPush); got != hold.Held {
			t.Fatalf("Hold = %v, want held", got)
		}
		h, ok := r.held("note.md")
		if !ok || h.State != Active || h.Missing != 2 || h.Source != ClientPush {
			t.Fatalf("Held = %+v", h)
		}
		r.sleepUntil(30 * time.Second)
		r.arrive("h:1", "h:2")
		r.wantReleased(release{30 * time.Second, "note.md", "1-a"})
		// Enqueued with the 3-minute push delay and removed at 30 s: the
		// hunter never made a request.
		r.wantCalls(
			hunterCall{At: 0, Op: "enqueue", Doc: "note.md", Needed: []engine.ChunkID{"h:1", "h:2"}, Origin: "", Delay: 3 * time.Minute},
			hunterCall{At: 30 * time.Second, Op: "remove", Doc: "note.md"},
		)
		if len(r.p.Held()) != 0 {
			t.Fatalf("still held: %+v", r.p.Held())
		}
	})
}

// Timeline B: the chunks arrive first, so the metadata is served at once.
func TestTimelineB_ChunksFirstServedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		r.local.add("h:1", "h:2")
		rv := r.rev("note.md", "1-a", "h:1", "h:2", "h:1")
		if got := r.hold(rv, couch); got != hold.Released {
			t.Fatalf("Hold = %v, want released", got)
		}
		r.wantReleased(release{0, "note.md", "1-a"})
		r.wantCalls() // never held, never hunted
		if s := r.p.Stats(); s.Active+s.SoftExpired != 0 || s.Releases != 1 {
			t.Fatalf("stats %+v", s)
		}
		// A tombstone or inline note needs no chunks.
		if got := r.hold(r.rev("gone.md", "2-b"), couch); got != hold.Released {
			t.Fatalf("tombstone: %v", got)
		}
	})
}

// Timeline C: metadata pulled from one source enters the purgatory; after
// 500 ms the hunt starts, finds the chunks on another source (t=45s), and
// the revision is released.
func TestTimelineC_PulledMetadataHuntFindsChunks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		rv := r.rev("note.md", "3-c", "h:1", "h:2")
		r.local.add("h:1")
		if got := r.hold(rv, couch); got != hold.Held {
			t.Fatalf("Hold = %v", got)
		}
		r.sleepUntil(45 * time.Second)
		r.arrive("h:2") // the hunt persisted it and called OnDelivered
		r.wantReleased(release{45 * time.Second, "note.md", "3-c"})
		r.wantCalls(
			hunterCall{At: 0, Op: "enqueue", Doc: "note.md", Needed: []engine.ChunkID{"h:2"}, Origin: couch, Delay: 500 * time.Millisecond},
			hunterCall{At: 45 * time.Second, Op: "remove", Doc: "note.md"},
		)
	})
}

// Timeline D: data never arrives. Active hunting stops at 30 min (soft
// expiry, Hunter.Remove), the document is dropped at 24 h 30 min and its
// revision remembered as expired for 7 days; Hold then refuses to
// restart the hunt, until the memory lapses.
func TestTimelineD_NeverArrives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		rv := r.rev("lost.md", "1-d", "h:x")
		r.hold(rv, couch)

		r.sleepUntil(30*time.Minute - time.Nanosecond)
		if h, _ := r.held("lost.md"); h.State != Active || !h.Deadline.Equal(r.start.Add(30*time.Minute)) {
			t.Fatalf("before 30 min: %+v", h)
		}
		r.sleepUntil(30 * time.Minute)
		h, ok := r.held("lost.md")
		if !ok || h.State != SoftExpired || !h.Deadline.Equal(r.start.Add(24*time.Hour+30*time.Minute)) {
			t.Fatalf("at 30 min: %+v %v", h, ok)
		}
		if s := r.p.Stats(); s.Active != 0 || s.SoftExpired != 1 || s.SoftExpiries != 1 {
			t.Fatalf("stats %+v", s)
		}
		// Re-delivery of the same revision does not revive it (no loop).
		if got := r.hold(rv, couch); got != hold.Held {
			t.Fatalf("re-delivered: %v", got)
		}
		r.sleepUntil(24*time.Hour + 30*time.Minute)
		if _, ok := r.held("lost.md"); ok {
			t.Fatal("still held after 24 h 30 min")
		}
		r.wantCalls(
			hunterCall{At: 0, Op: "enqueue", Doc: "lost.md", Needed: []engine.ChunkID{"h:x"}, Origin: couch, Delay: 500 * time.Millisecond},
			hunterCall{At: 30 * time.Minute, Op: "remove", Doc: "lost.md"},
		)
		if s := r.p.Stats(); s.Expiries != 1 || s.Remembered != 1 || s.SoftExpired != 0 {
			t.Fatalf("stats %+v", s)
		}
		logs := r.logs.String()
		line := ""
		for l := range strings.Lines(logs) {
			if strings.Contains(l, "document expired") {
				line = l
			}
		}
		for _, want := range []string{`"doc":"lost.md"`, `"source":"couch.example:5984"`, `"reason":"chunks not found"`} {
			if !strings.Contains(line, want) {
				t.Errorf("expiry log line %q lacks %s", line, want)
			}
		}
		if strings.Contains(logs, "piece of") {
			t.Error("logs contain chunk contents")
		}

		// Remembered for 7 days: replication delivering it again does
		// not restart the hunt.
		r.sleepUntil(24*time.Hour + 30*time.Minute + 7*24*time.Hour - time.Second)
		if got := r.hold(rv, couch); got != hold.PreviouslyExpired {
			t.Fatalf("within 7 days: %v", got)
		}
		if n := len(r.hunter.Calls()); n != 2 {
			t.Fatalf("hunter called again: %v", r.hunter.Calls())
		}
		r.sleepUntil(24*time.Hour + 30*time.Minute + 7*24*time.Hour)
		if s := r.p.Stats(); s.Remembered != 0 {
			t.Fatalf("memory not pruned: %+v", s)
		}
		if got := r.hold(rv, couch); got != hold.Held {
			t.Fatalf("after 7 days: %v", got)
		}
	})
}

// An explicit user retry bypasses the 7-day memory and hunts at once.
func TestRetryBypassesExpiredMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		rv := r.rev("lost.md", "1-d", "h:x")
		r.hold(rv, couch)
		r.sleepUntil(25 * time.Hour)
		if got := r.hold(rv, couch); got != hold.PreviouslyExpired {
			t.Fatalf("Hold = %v", got)
		}
		out, err := r.p.Retry(t.Context(), rv, couch)
		if err != nil || out != hold.Held {
			t.Fatalf("Retry = %v, %v", out, err)
		}
		calls := r.hunter.Calls()
		last := calls[len(calls)-1]
		if last.Op != "enqueue" || last.At != 25*time.Hour || last.Delay != 0 {
			t.Fatalf("retry enqueue %v", last)
		}
		if h, _ := r.held("lost.md"); h.State != Active || !h.Deadline.Equal(r.start.Add(25*time.Hour+30*time.Minute)) {
			t.Fatalf("after retry %+v", h)
		}
		r.sleepUntil(25*time.Hour + time.Minute)
		r.arrive("h:x")
		r.wantReleased(release{25*time.Hour + time.Minute, "lost.md", "1-d"})
	})
}

// Timeline E: soft-expired, then revived by a new revision (fresh 30
// minutes, hunted again) and released when its chunks arrive; the older
// revision is superseded and never served.
func TestTimelineE_SoftExpiredRevivedByNewRevision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		r.hold(r.rev("doc.md", "1-a", "h:old"), couch)
		r.sleepUntil(time.Hour)
		if h, _ := r.held("doc.md"); h.State != SoftExpired {
			t.Fatalf("at 1 h: %+v", h)
		}
		if got := r.hold(r.rev("doc.md", "2-b", "h:new"), couch); got != hold.Held {
			t.Fatalf("new revision: %v", got)
		}
		h, _ := r.held("doc.md")
		if h.State != Active || !h.Deadline.Equal(r.start.Add(90*time.Minute)) || h.Missing != 2 ||
			strings.Join(h.Revisions, ",") != "2-b,1-a" {
			t.Fatalf("revived: %+v", h)
		}
		r.sleepUntil(80 * time.Minute)
		r.arrive("h:new")
		r.wantReleased(release{80 * time.Minute, "doc.md", "2-b"})
		r.wantCalls(
			hunterCall{At: 0, Op: "enqueue", Doc: "doc.md", Needed: []engine.ChunkID{"h:old"}, Origin: couch, Delay: 500 * time.Millisecond},
			hunterCall{At: 30 * time.Minute, Op: "remove", Doc: "doc.md"},
			hunterCall{At: time.Hour, Op: "enqueue", Doc: "doc.md", Needed: []engine.ChunkID{"h:new", "h:old"}, Origin: couch, Delay: 500 * time.Millisecond},
			hunterCall{At: 80 * time.Minute, Op: "remove", Doc: "doc.md"},
		)
		// The old revision's chunks arrive late: never served.
		r.arrive("h:old")
		if got := r.hold(r.rev("doc.md", "1-a", "h:old"), couch); got != hold.Superseded {
			t.Fatalf("old revision: %v", got)
		}
		r.wantReleased(release{80 * time.Minute, "doc.md", "2-b"})
		if s := r.p.Stats(); s.Revivals != 1 || s.Releases != 1 || s.Superseded != 2 {
			t.Fatalf("stats %+v", s)
		}
	})
}

// A soft-expired document is released at once when its chunks arrive
// by any path, without being revived.
func TestSoftExpiredReleasedOnArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		r.hold(r.rev("doc.md", "1-a", "h:1"), ClientPush)
		r.sleepUntil(10 * time.Hour)
		r.arrive("h:1")
		r.wantReleased(release{10 * time.Hour, "doc.md", "1-a"})
		r.wantCalls(
			hunterCall{At: 0, Op: "enqueue", Doc: "doc.md", Needed: []engine.ChunkID{"h:1"}, Origin: "", Delay: 3 * time.Minute},
			hunterCall{At: 30 * time.Minute, Op: "remove", Doc: "doc.md"},
		)
	})
}
