package purgatory

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/hold"
)

// Forget drops a held revision without releasing or remembering it:
// the hunt gets the smaller needed set, then is removed with the last
// revision, nothing is released when the chunks arrive, and the same
// revision can be held again.
func TestForget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		r.hold(r.rev("n.md", "1-a", "h:a"), couch)
		r.hold(r.rev("n.md", "2-b", "h:b"), couch)
		r.sleepUntil(time.Second)
		r.p.Forget("n.md", "2-b")
		r.p.Forget("n.md", "9-z") // not held: nothing
		r.p.Forget("x.md", "1-a")
		if h, ok := r.held("n.md"); !ok || len(h.Revisions) != 1 || h.Revisions[0] != "1-a" {
			t.Fatalf("after forgetting 2-b: %+v", h)
		}
		r.sleepUntil(2 * time.Second)
		r.p.Forget("n.md", "1-a")
		if _, ok := r.held("n.md"); ok {
			t.Fatal("still held after forgetting every revision")
		}
		r.arrive("h:a", "h:b")
		r.sleepUntil(3 * time.Second)
		r.wantReleased()
		r.wantCalls(
			hunterCall{At: 0, Op: "enqueue", Doc: "n.md", Needed: []engine.ChunkID{"h:a"}, Origin: couch, Delay: 500 * time.Millisecond},
			hunterCall{At: 0, Op: "enqueue", Doc: "n.md", Needed: []engine.ChunkID{"h:a", "h:b"}, Origin: couch, Delay: 500 * time.Millisecond},
			hunterCall{At: time.Second, Op: "enqueue", Doc: "n.md", Needed: []engine.ChunkID{"h:a"}, Origin: couch, Delay: 500 * time.Millisecond},
			hunterCall{At: 2 * time.Second, Op: "remove", Doc: "n.md"},
		)
		if st := r.p.Stats(); st.Remembered != 0 || st.Releases != 0 || st.Superseded != 0 {
			t.Fatalf("stats %+v", st)
		}
		if got := r.hold(r.rev("n.md", "2-b", "h:c"), couch); got != hold.Held {
			t.Fatalf("a forgotten revision held again: %v", got)
		}
	})
}
