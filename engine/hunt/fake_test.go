package hunt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/fetch"
)

// request is one request seen by a fakeSource, at its virtual offset.
type request struct {
	at  time.Duration
	ids []engine.ChunkID
}

func (r request) String() string { return fmt.Sprintf("%v%v", r.at, r.ids) }

var errDown = errors.New("fake: connection refused")

// fakeSource is a hand-written ChunkSource. It answers from has, fails
// with err, takes latency per request (or waits on a gate), records every
// request start, and flags an id requested from it twice at once.
type fakeSource struct {
	key    string
	t0     time.Time
	direct bool

	mu        sync.Mutex
	has       map[engine.ChunkID]bool
	err       error
	latency   time.Duration
	gate      chan struct{} // when set, every request waits for it
	requests  []request
	inflight  map[engine.ChunkID]int
	dups      []string
	active    int
	maxActive int
	fp        string
}

func newSource(key string, t0 time.Time, has ...engine.ChunkID) *fakeSource {
	s := &fakeSource{key: key, t0: t0, direct: true, has: map[engine.ChunkID]bool{}, inflight: map[engine.ChunkID]int{}}
	for _, id := range has {
		s.has[id] = true
	}
	return s
}

func (s *fakeSource) ThrottleKey() string  { return s.key }
func (s *fakeSource) CanFetchDirect() bool { return s.direct }

func (s *fakeSource) fingerprint() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fp
}

func (s *fakeSource) set(f func(s *fakeSource)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *fakeSource) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	s.mu.Lock()
	s.requests = append(s.requests, request{time.Since(s.t0), slices.Clone(ids)})
	s.active++
	s.maxActive = max(s.maxActive, s.active)
	for _, id := range ids {
		if s.inflight[id]++; s.inflight[id] > 1 {
			s.dups = append(s.dups, fmt.Sprintf("%s twice at %s at %v", id, s.key, time.Since(s.t0)))
		}
	}
	latency, gate := s.latency, s.gate
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.active--
		for _, id := range ids {
			s.inflight[id]--
		}
		s.mu.Unlock()
	}()
	if latency > 0 {
		tm := time.NewTimer(latency)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ctx.Done():
			return engine.FetchResult{}, ctx.Err()
		}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return engine.FetchResult{}, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return engine.FetchResult{}, s.err
	}
	var r engine.FetchResult
	for _, id := range ids {
		if s.has[id] {
			r.Found = append(r.Found, engine.Chunk{ID: id, Data: "data-" + id})
		} else {
			r.Missing = append(r.Missing, id)
		}
	}
	return r, nil
}

func (s *fakeSource) got() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// asked returns the request offsets that carried id.
func (s *fakeSource) asked(id engine.ChunkID) []time.Duration {
	var out []time.Duration
	for _, r := range s.got() {
		if slices.Contains(r.ids, id) {
			out = append(out, r.at)
		}
	}
	return out
}

func (s *fakeSource) check(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.dups {
		t.Errorf("duplicate concurrent request: %s", d)
	}
}

// memLocal is a memory LocalChunks with the helpers the tests use.
type memLocal struct {
	*enginetest.MemChunks

	mu       sync.Mutex
	failPuts int // the next failPuts PutChunks calls fail
}

func newLocal() *memLocal { return &memLocal{MemChunks: enginetest.NewMemChunks()} }

var errDiskFull = errors.New("disk full")

func (l *memLocal) PutChunks(ctx context.Context, chunks []engine.Chunk) error {
	l.mu.Lock()
	if l.failPuts > 0 {
		l.failPuts--
		l.mu.Unlock()
		return errDiskFull
	}
	l.mu.Unlock()
	return l.MemChunks.PutChunks(ctx, chunks)
}

func (l *memLocal) store(id engine.ChunkID) {
	_ = l.PutChunks(context.Background(), []engine.Chunk{{ID: id, Data: "data-" + id}})
}

func (l *memLocal) has(id engine.ChunkID) bool {
	got, _ := l.GetChunks(context.Background(), []engine.ChunkID{id})
	_, ok := got[id]
	return ok
}

// rig wires one Hunt to fakes; it must be made inside a synctest bubble.
type rig struct {
	t     *testing.T
	t0    time.Time
	co    *fetch.Coordinator
	local *memLocal
	h     *Hunt
	srcs  []*fakeSource

	mu        sync.Mutex
	delivered []engine.ChunkID
	events    []Event
	// eventDelay makes the event callback take this long (virtual time)
	// before recording an event.
	eventDelay time.Duration
}

func newRig(t *testing.T, cfg Config) *rig {
	t.Helper()
	r := &rig{t: t, t0: time.Now(), co: fetch.NewCoordinator(), local: newLocal()}
	h, err := New(cfg, Deps{Local: r.local, Claims: r.co, OnDelivered: func(ids []engine.ChunkID) {
		r.mu.Lock()
		r.delivered = append(r.delivered, ids...)
		r.mu.Unlock()
	}, OnEvent: func(e Event) {
		r.mu.Lock()
		d := r.eventDelay
		r.mu.Unlock()
		time.Sleep(d)
		r.mu.Lock()
		r.events = append(r.events, e)
		r.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	r.h = h
	t.Cleanup(r.close)
	return r
}

func (r *rig) close() {
	r.h.Close()
	r.co.Close()
	for _, s := range r.srcs {
		s.check(r.t)
	}
}

// source registers a fake source holding has; memo says whether it has
// a fingerprint.
func (r *rig) source(key string, memo bool, has ...engine.ChunkID) *fakeSource {
	s := newSource(key, r.t0, has...)
	r.srcs = append(r.srcs, s)
	var fp func() string
	if memo {
		fp = s.fingerprint
	}
	r.h.AddSource(s, fp)
	return s
}

func (r *rig) now() time.Duration { return time.Since(r.t0) }

// until sleeps to the virtual offset d and lets the bubble settle.
func (r *rig) until(d time.Duration) {
	if w := d - r.now(); w > 0 {
		time.Sleep(w)
	}
	settle()
}

func (r *rig) gotDelivered() []engine.ChunkID {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.delivered)
	sort.Strings(out)
	return out
}

func sec(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// gotEvents returns the events of kind k, as "doc source found" lines.
func (r *rig) gotEvents(k EventKind) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}
