package holdback

import (
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/fetch"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/store"
)

// With a real hunt that has no source yet, the purgatory works as with
// none (it still expires), and the hunt's passes recheck the inner store:
// a chunk written there by another path releases the note at the first
// pass, 3 minutes after the push.
func TestHuntWithoutSources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner, err := store.NewMemory(store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var s *Store
		h, err := hunt.New(hunt.Config{}, hunt.Deps{Local: inner, Claims: fetch.NewCoordinator(),
			OnDelivered: func(ids []engine.ChunkID) { s.ChunksArrived(ids) }})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		r := newRig(t, Config{}, Deps{Inner: inner, Hunter: h})
		s = r.s
		r.push(meta("a.md", "1-a", "h:1"), meta("b.md", "1-b", "h:2"))
		time.Sleep(time.Minute)
		if _, err := inner.BulkDocs(bg, []json.RawMessage{chunk("h:1")}); err != nil { // not through the Store
			t.Fatal(err)
		}
		r.sleepUntil(3*time.Minute - time.Nanosecond)
		synctest.Wait()
		if r.rev("a.md") != "" {
			t.Fatal("released before the first pass")
		}
		r.sleepUntil(3 * time.Minute)
		synctest.Wait()
		if r.rev("a.md") != "1-a" {
			t.Fatal("not released at the first pass")
		}
		// The other note expires on the core's schedule.
		r.sleepUntil(30*time.Minute + 24*time.Hour)
		synctest.Wait()
		if len(r.s.Held()) != 0 || r.s.Stats().Purgatory.Expiries != 1 {
			t.Fatalf("held %+v", r.s.Held())
		}
		r.s.Close()
	})
}
