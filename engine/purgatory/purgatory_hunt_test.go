package purgatory

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/fetch"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/hunt"
)

// Integration with the real *hunt.Hunt: the purgatory is its Hunter's
// caller and its OnDelivered receiver, over fake chunk sources.

// fakeSource is an engine.ChunkSource that holds some chunks and answers
// after a virtual-time latency, recording each request.
type fakeSource struct {
	key     string
	latency time.Duration
	start   time.Time

	mu       sync.Mutex
	chunks   map[engine.ChunkID]string
	requests []time.Duration // virtual start times
}

func newFakeSource(key string, start time.Time, latency time.Duration, ids ...engine.ChunkID) *fakeSource {
	s := &fakeSource{key: key, latency: latency, start: start, chunks: map[engine.ChunkID]string{}}
	for _, id := range ids {
		s.chunks[id] = "piece of " + id
	}
	return s
}

func (s *fakeSource) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	s.mu.Lock()
	s.requests = append(s.requests, time.Since(s.start))
	s.mu.Unlock()
	if s.latency > 0 {
		select {
		case <-time.After(s.latency):
		case <-ctx.Done():
			return engine.FetchResult{}, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var res engine.FetchResult
	for _, id := range ids {
		if d, ok := s.chunks[id]; ok {
			res.Found = append(res.Found, engine.Chunk{ID: id, Data: d})
		} else {
			res.Missing = append(res.Missing, id)
		}
	}
	return res, nil
}

func (s *fakeSource) CanFetchDirect() bool { return true }
func (s *fakeSource) ThrottleKey() string  { return s.key }

func (s *fakeSource) Requests() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// huntRig wires a Purgatory to a real Hunt sharing one local store.
type huntRig struct {
	*rig
	h *hunt.Hunt
}

func newHuntRig(t *testing.T, sources ...*fakeSource) *huntRig {
	t.Helper()
	r := newRig(t, Config{}) // replaced below: its purgatory uses the fake hunter
	r.p.Close()
	co := fetch.NewCoordinator()
	var p *Purgatory
	h, err := hunt.New(hunt.Config{}, hunt.Deps{Local: r.local, Claims: co,
		OnDelivered: func(ids []engine.ChunkID) { p.ChunksArrived(ids) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sources {
		h.AddSource(s, nil)
	}
	p, err = New(Config{}, Deps{Local: r.local, Hunter: h, Release: r.rel.Release})
	if err != nil {
		t.Fatal(err)
	}
	r.p = p
	t.Cleanup(func() { p.Close(); h.Close(); co.Close() })
	return &huntRig{rig: r, h: h}
}

// Two sources each holding half the chunks complete the document, end
// to end through the purgatory.
func TestHuntTwoSourcesEachHalf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		a := newFakeSource("a.example:5984", start, 100*time.Millisecond, "h:1", "h:2")
		b := newFakeSource("b.example:5984", start, 100*time.Millisecond, "h:3", "h:4")
		r := newHuntRig(t, a, b)
		if got := r.hold(r.rev("split.md", "1-s", "h:1", "h:2", "h:3", "h:4"), a.key); got != hold.Held {
			t.Fatalf("Hold = %v", got)
		}
		r.sleepUntil(5 * time.Second)
		rel := r.rel.Released()
		if len(rel) != 1 || rel[0].Rev != "1-s" || rel[0].At > time.Second {
			t.Fatalf("released %v", rel)
		}
		if len(a.Requests()) == 0 || len(b.Requests()) == 0 {
			t.Fatalf("requests a=%v b=%v", a.Requests(), b.Requests())
		}
		if len(r.p.Held()) != 0 || r.h.Stats().Docs != 0 {
			t.Fatalf("held %+v, hunt %+v", r.p.Held(), r.h.Stats())
		}
	})
}

// Timeline A with the real hunt: the pushed metadata's chunks follow by
// push at 30 s, before the 3-minute delay: no request is ever made.
func TestHuntTimelineA(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		a := newFakeSource("a.example:5984", start, 0, "h:1")
		r := newHuntRig(t, a)
		r.hold(r.rev("note.md", "1-a", "h:1"), ClientPush)
		r.sleepUntil(30 * time.Second)
		r.arrive("h:1")
		r.sleepUntil(10 * time.Minute)
		r.wantReleased(release{30 * time.Second, "note.md", "1-a"})
		if got := a.Requests(); len(got) != 0 {
			t.Fatalf("hunt requests %v", got)
		}
	})
}

// Timeline C with the real hunt: pulled from a (which lacks the chunk);
// the hunt starts after 500 ms and b, a slow server, delivers at 45 s.
func TestHuntTimelineC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		a := newFakeSource("a.example:5984", start, 0)
		b := newFakeSource("b.example:5984", start, 44500*time.Millisecond, "h:1")
		r := newHuntRig(t, a, b)
		r.hold(r.rev("note.md", "3-c", "h:1"), a.key)
		r.sleepUntil(2 * time.Minute)
		r.wantReleased(release{45 * time.Second, "note.md", "3-c"})
		if got := a.Requests(); len(got) == 0 || got[0] != 500*time.Millisecond {
			t.Fatalf("origin a requested at %v, want first at 500ms", got)
		}
		if got := b.Requests(); len(got) != 1 || got[0] != 500*time.Millisecond {
			t.Fatalf("b requested at %v", got)
		}
	})
}

// Timeline D with the real hunt: the chunk is nowhere. The hunt backs
// off (20, 40, 80, 120 s…), stops at 30 minutes when the purgatory
// soft-expires the document, and nothing is requested again; the
// document is dropped at 24 h 30 min and not hunted again when
// replication delivers it again.
func TestHuntTimelineD(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		a := newFakeSource("a.example:5984", start, 0)
		b := newFakeSource("b.example:5984", start, 0)
		r := newHuntRig(t, a, b)
		rv := r.rev("lost.md", "1-d", "h:x")
		r.hold(rv, a.key)
		r.sleepUntil(30 * time.Minute)
		if h, _ := r.held("lost.md"); h.State != SoftExpired {
			t.Fatalf("%+v", h)
		}
		reqs := a.Requests()
		if len(reqs) < 5 || reqs[0] != 500*time.Millisecond || reqs[len(reqs)-1] >= 30*time.Minute {
			t.Fatalf("requests to a %v", reqs)
		}
		for i := 1; i < len(reqs); i++ {
			if gap := reqs[i] - reqs[i-1]; gap < 20*time.Second || gap > 120*time.Second {
				t.Fatalf("gap %v between %v and %v", gap, reqs[i-1], reqs[i])
			}
		}
		n := len(reqs) + len(b.Requests())
		r.sleepUntil(24*time.Hour + 30*time.Minute)
		if _, ok := r.held("lost.md"); ok {
			t.Fatal("still held")
		}
		if got := r.hold(rv, a.key); got != hold.PreviouslyExpired {
			t.Fatalf("re-delivered: %v", got)
		}
		r.sleepUntil(25 * time.Hour)
		if m := len(a.Requests()) + len(b.Requests()); m != n {
			t.Fatalf("%d requests after soft expiry", m-n)
		}
		if s := r.h.Stats(); s.Docs != 0 || s.Removed != 1 {
			t.Fatalf("hunt stats %+v", s)
		}
	})
}

// Timeline E with the real hunt: soft-expired at 30 min (hunting
// stops), revived at 1 h by a new revision (hunting resumes), whose
// chunk appears on b at 1 h 5 min and is found by the next pass.
func TestHuntTimelineE(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		a := newFakeSource("a.example:5984", start, 0)
		b := newFakeSource("b.example:5984", start, 0)
		r := newHuntRig(t, a, b)
		r.hold(r.rev("doc.md", "1-a", "h:old"), a.key)
		r.sleepUntil(time.Hour)
		n := len(a.Requests())
		if last := a.Requests()[n-1]; last >= 30*time.Minute {
			t.Fatalf("hunted after soft expiry: %v", last)
		}
		r.hold(r.rev("doc.md", "2-b", "h:new"), a.key)
		r.sleepUntil(time.Hour + time.Second)
		if got := a.Requests(); len(got) != n+1 || got[n] != time.Hour+500*time.Millisecond {
			t.Fatalf("no fresh hunt after revival: %v", got[n:])
		}
		r.sleepUntil(time.Hour + 5*time.Minute)
		b.mu.Lock()
		b.chunks["h:new"] = "piece of h:new"
		b.mu.Unlock()
		r.sleepUntil(time.Hour + 10*time.Minute)
		rel := r.rel.Released()
		if len(rel) != 1 || rel[0].Rev != "2-b" || rel[0].At < time.Hour+5*time.Minute || rel[0].At > time.Hour+7*time.Minute {
			t.Fatalf("released %v", rel)
		}
		if len(r.p.Held()) != 0 || r.h.Stats().Docs != 0 {
			t.Fatalf("held %+v, hunt %+v", r.p.Held(), r.h.Stats())
		}
	})
}
