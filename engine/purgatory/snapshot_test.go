package purgatory

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/hold"
)

// restart snapshots r's purgatory, closes it, waits downtime and
// restores into a new purgatory sharing r's local store and releaser,
// with a fresh hunter (the hunt's state is not persisted).
func (r *rig) restart(downtime time.Duration, during func()) []byte {
	r.t.Helper()
	data, err := r.p.Snapshot()
	if err != nil {
		r.t.Fatal(err)
	}
	r.p.Close()
	time.Sleep(downtime)
	if during != nil {
		during()
	}
	r.hunter = &fakeHunter{start: r.start}
	p, err := New(Config{Logger: slog.New(slog.NewJSONHandler(r.logs, nil))},
		Deps{Local: r.local, Hunter: r.hunter, Release: r.rel.Release})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(p.Close)
	r.p = p
	if err := p.Restore(data, time.Now()); err != nil {
		r.t.Fatal(err)
	}
	waitIdle()
	return data
}

// Persistence round trip with a short downtime: states, deadlines (the
// downtime counts), revisions, reasons, memory and the released-revision
// memory survive; active documents are hunted again.
func TestSnapshotRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		r.hold(r.rev("soft.md", "1-s", "h:s"), ClientPush)
		r.sleepUntil(time.Hour) // soft.md soft-expired at 30 min, until 24 h 30 min
		r.hold(r.rev("gone.md", "1-g", "h:g"), couch)
		r.hold(r.rev("two.md", "2-a", "h:a"), couch)
		r.hold(r.rev("two.md", "3-b", "h:b", "h:c"), couch)
		r.arrive("h:a") // two.md 2-a released; 3-b still held
		r.sleepUntil(2 * time.Hour)
		// gone.md soft-expired at 1 h 30 min; expire it for the memory:
		r.sleepUntil(24*time.Hour + 90*time.Minute)
		r.hold(r.rev("act.md", "5-x", "h:x", "h:y"), couch)
		r.sleepUntil(24*time.Hour + 100*time.Minute)
		before := r.p.Held()
		beforeStats := r.p.Stats()
		// soft.md (24 h 30 min), gone.md and two.md 3-b (25 h 30 min) have expired.
		if len(before) != 1 || before[0].Doc != "act.md" || beforeStats.Remembered != 3 {
			t.Fatalf("held before: %+v, stats %+v", before, beforeStats)
		}

		data := r.restart(5*time.Minute, nil)
		if strings.Contains(string(data), "piece of") {
			t.Fatal("snapshot contains chunk contents")
		}
		after := r.p.Held()
		if len(after) != len(before) {
			t.Fatalf("held after restore %+v, before %+v", after, before)
		}
		for i := range after {
			a, b := after[i], before[i]
			if a.Doc != b.Doc || strings.Join(a.Revisions, ",") != strings.Join(b.Revisions, ",") || a.Missing != b.Missing ||
				a.State != b.State || !a.Deadline.Equal(b.Deadline) || !a.Since.Equal(b.Since) || a.Reason != b.Reason || a.Source != b.Source {
				t.Errorf("entry %d after restore %+v, before %+v", i, a, b)
			}
		}
		if s := r.p.Stats(); s.Remembered != beforeStats.Remembered {
			t.Fatalf("remembered %d, before %d", s.Remembered, beforeStats.Remembered)
		}
		r.wantCalls(hunterCall{At: 24*time.Hour + 105*time.Minute, Op: "enqueue", Doc: "act.md",
			Needed: []engine.ChunkID{"h:x", "h:y"}, Origin: couch, Delay: 500 * time.Millisecond})
		// The memories still work.
		if got := r.hold(r.rev("gone.md", "1-g", "h:g"), couch); got != hold.PreviouslyExpired {
			t.Fatalf("expired memory lost: %v", got)
		}
		if got := r.hold(r.rev("two.md", "2-a", "h:a"), couch); got != hold.Superseded {
			t.Fatalf("released-revision memory lost: %v", got)
		}
		// The active document continues its timer from where it was:
		// held at 24 h 90 min, soft expiry at 25 h 60 min.
		r.sleepUntil(25*time.Hour + time.Hour - 1)
		if h, _ := r.held("act.md"); h.State != Active {
			t.Fatalf("%+v", h)
		}
		r.sleepUntil(26 * time.Hour)
		if h, _ := r.held("act.md"); h.State != SoftExpired {
			t.Fatalf("%+v", h)
		}
		r.arrive("h:x", "h:y")
		if got := r.rel.Released(); got[len(got)-1] != (release{26 * time.Hour, "act.md", "5-x"}) {
			t.Fatalf("released %v", got)
		}
	})
}

// A restart with a long downtime: an entry whose soft expiry passed
// during the downtime expires on restore (dropped, remembered, logged);
// an active one whose 30 minutes passed is soft-expired and not hunted;
// chunks that arrived while down release their document at once; the
// released-revision memory still refuses an older revision.
func TestRestoreAfterDowntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		r.hold(r.rev("old.md", "1-o", "h:o"), couch) // soft at 30 min, expires at 24 h 30 min
		r.sleepUntil(24 * time.Hour)
		r.hold(r.rev("act.md", "1-a", "h:a"), ClientPush) // soft at 24 h 30 min
		r.hold(r.rev("arr.md", "2-r", "h:r"), couch)
		r.hold(r.rev("arr.md", "1-q", "h:q"), couch)
		r.arrive("h:q") // releases 1-q; 2-r stays held
		r.sleepUntil(24*time.Hour + 10*time.Minute)

		r.restart(25*time.Minute, func() { r.local.add("h:r") }) // restored at 24 h 35 min
		if _, ok := r.held("old.md"); ok {
			t.Fatal("old.md not expired on restore")
		}
		// act.md and arr.md reached 30 min during the downtime.
		if s := r.p.Stats(); s.Expiries != 1 || s.SoftExpiries != 2 {
			t.Fatalf("stats %+v", s)
		}
		if !strings.Contains(r.logs.String(), `"msg":"purgatory: document expired","doc":"old.md","source":"couch.example:5984","reason":"chunks not found"`) {
			t.Fatalf("no expiry line for old.md:\n%s", r.logs.String())
		}
		if got := r.hold(r.rev("old.md", "1-o", "h:o"), couch); got != hold.PreviouslyExpired {
			t.Fatalf("old.md after restore: %v", got)
		}
		h, ok := r.held("act.md")
		if !ok || h.State != SoftExpired || !h.Deadline.Equal(r.start.Add(48*time.Hour+30*time.Minute)) {
			t.Fatalf("act.md %+v", h)
		}
		r.wantCalls() // nothing active after the restore: nothing hunted
		want := []release{{24 * time.Hour, "arr.md", "1-q"}, {24*time.Hour + 35*time.Minute, "arr.md", "2-r"}}
		r.wantReleased(want...)
		if got := r.hold(r.rev("arr.md", "1-q", "h:q"), couch); got != hold.Superseded {
			t.Fatalf("arr.md 1-q: %v", got)
		}
		// Expired at 24 h 30 min: remembered until 7 days after that.
		r.sleepUntil(24*time.Hour + 30*time.Minute + 7*24*time.Hour)
		if got := r.hold(r.rev("old.md", "1-o", "h:o"), couch); got != hold.Held {
			t.Fatalf("old.md after 7 days: %v", got)
		}
	})
}

func TestRestoreErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		if err := r.p.Restore([]byte("{"), time.Now()); !errors.Is(err, engine.ErrMalformed) {
			t.Fatalf("bad json: %v", err)
		}
		if err := r.p.Restore([]byte(`{"version":9}`), time.Now()); !errors.Is(err, engine.ErrUnsupported) {
			t.Fatalf("version: %v", err)
		}
		r.hold(r.rev("a.md", "1-a", "h:a"), couch)
		data, _ := r.p.Snapshot()
		if err := r.p.Restore(data, time.Now()); !errors.Is(err, ErrNotEmpty) {
			t.Fatalf("restore into a used purgatory: %v", err)
		}
	})
}
