package holdback

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"

	"github.com/livesync-go/livesync-go/engine/store"
)

// pausedArea is an inner store whose holding-area writes for one
// document wait, once armed, until resume is closed: a release is
// stopped after it wrote and counted the revision, before the purgatory
// drops it.
type pausedArea struct {
	store.Store
	id     string
	armed  bool
	paused chan struct{}
	resume chan struct{}
}

func (p *pausedArea) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	if p.armed && id == p.id {
		p.armed = false
		close(p.paused)
		<-p.resume
	}
	return p.Store.PutLocal(ctx, id, doc)
}

// TestReleasedNotListedAsHeld: while a release rewrites the holding area
// (the note is served and counted released), Held and HeldFirst no
// longer list it, so /status (which reads the list, then the counters)
// never shows a released note as held.
func TestReleasedNotListedAsHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, err := store.NewMemory(store.Options{Name: "relay"})
		if err != nil {
			t.Fatal(err)
		}
		inner := &pausedArea{Store: mem, id: localDocPrefix + "a.md", paused: make(chan struct{}), resume: make(chan struct{})}
		r := newRig(t, Config{}, Deps{Inner: inner})
		r.push(chunk("h:0"), meta("b.md", "1-b", "h:0", "h:9"))
		r.push(meta("a.md", "1-a", "h:1"))
		if held, total := r.s.HeldFirst(10); len(held) != 2 || total != 2 {
			t.Fatalf("HeldFirst = %+v, %d; want a.md and b.md", held, total)
		}

		inner.armed = true
		r.push(chunk("h:1"))
		<-inner.paused
		synctest.Wait() // the release waits in the holding-area write
		if r.rev("a.md") != "1-a" || r.s.Stats().Released != 1 {
			t.Fatalf("not released yet: rev %q, stats %+v", r.rev("a.md"), r.s.Stats())
		}
		held, total := r.s.HeldFirst(10)
		if len(held) != 1 || held[0].Doc != "b.md" || total != 1 || len(r.s.Held()) != 1 {
			t.Fatalf("released a.md still listed: HeldFirst = %+v, %d; Held = %+v", held, total, r.s.Held())
		}
		close(inner.resume)
		synctest.Wait()
		if held, total := r.s.HeldFirst(10); len(held) != 1 || held[0].Doc != "b.md" || total != 1 || r.area("a.md") != nil {
			t.Fatalf("after the release: HeldFirst = %+v, %d; area %v", held, total, r.area("a.md"))
		}
	})
}
