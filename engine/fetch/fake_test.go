package fetch_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/activity"
	"github.com/livesync-go/livesync-go/engine/fetch"
)

// call is one request seen by fakeSource, at its virtual offset.
type call struct {
	at  time.Duration
	ids []engine.ChunkID
}

func (c call) String() string { return fmt.Sprintf("%v%v", c.at, c.ids) }

// fakeSource is a hand-written ChunkSource. It answers from remote, can
// fail or block, records every request with its virtual time, and flags
// any id put on the wire twice (while in flight or after delivery).
type fakeSource struct {
	t0     time.Time
	direct bool

	mu        sync.Mutex
	remote    map[engine.ChunkID]string
	calls     []call
	err       error                                             // every request fails with err
	answer    func([]engine.ChunkID) (engine.FetchResult, bool) // optional override
	block     map[engine.ChunkID]chan struct{}                  // a request containing the id waits for the channel
	inflight  map[engine.ChunkID]bool
	delivered map[engine.ChunkID]bool
	dups      []string

	latency    time.Duration // each answer takes this long
	active     int           // requests in flight now
	maxActive  int
	lastStart  time.Time
	minGap     time.Duration // smallest gap between two request starts
	deliveredN int
}

func newSource(direct bool) *fakeSource {
	return &fakeSource{t0: time.Now(), direct: direct, remote: map[engine.ChunkID]string{},
		block: map[engine.ChunkID]chan struct{}{}, inflight: map[engine.ChunkID]bool{}, delivered: map[engine.ChunkID]bool{}}
}

func (s *fakeSource) CanFetchDirect() bool { return s.direct }
func (s *fakeSource) ThrottleKey() string  { return "fake:5984" }

func (s *fakeSource) put(id engine.ChunkID) {
	s.mu.Lock()
	s.remote[id] = "data-" + id
	s.mu.Unlock()
}

func (s *fakeSource) blockOn(id engine.ChunkID) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.block[id] = ch
	s.mu.Unlock()
	return func() { close(ch) }
}

func (s *fakeSource) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	s.mu.Lock()
	now := time.Now()
	if len(s.calls) > 0 && (s.minGap == 0 || now.Sub(s.lastStart) < s.minGap) {
		s.minGap = now.Sub(s.lastStart)
	}
	s.lastStart = now
	s.active++
	s.maxActive = max(s.maxActive, s.active)
	s.calls = append(s.calls, call{now.Sub(s.t0), slices.Clone(ids)})
	var wait []chan struct{}
	for _, id := range ids {
		if s.inflight[id] {
			s.dups = append(s.dups, "in flight twice: "+id)
		}
		if s.delivered[id] {
			s.dups = append(s.dups, "requested after delivery: "+id)
		}
		s.inflight[id] = true
		if ch := s.block[id]; ch != nil {
			wait = append(wait, ch)
		}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.active--
		for _, id := range ids {
			delete(s.inflight, id)
		}
		s.mu.Unlock()
	}()
	if s.latency > 0 {
		t := time.NewTimer(s.latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return engine.FetchResult{}, ctx.Err()
		}
	}
	for _, ch := range wait {
		select {
		case <-ch:
		case <-ctx.Done():
			return engine.FetchResult{}, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return engine.FetchResult{}, s.err
	}
	if s.answer != nil {
		if r, ok := s.answer(ids); ok {
			return r, nil
		}
	}
	var r engine.FetchResult
	for _, id := range ids {
		if d, ok := s.remote[id]; ok {
			r.Found = append(r.Found, engine.Chunk{ID: id, Data: d})
			s.delivered[id] = true
			s.deliveredN++
		} else {
			r.Missing = append(r.Missing, id)
		}
	}
	return r, nil
}

func (s *fakeSource) getCalls() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *fakeSource) callTimes() []time.Duration {
	var out []time.Duration
	for _, c := range s.getCalls() {
		out = append(out, c.at)
	}
	return out
}

func (s *fakeSource) checkNoDuplicates(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.dups {
		t.Errorf("duplicate id on the wire: %s", d)
	}
}

// memLocal is a memory LocalChunks. gate, when set, makes GetChunks wait.
type memLocal struct {
	mu     sync.Mutex
	m      map[engine.ChunkID]engine.Chunk
	gets   int
	gate   chan struct{}
	putErr error
	puts   []engine.ChunkID
}

func newLocal() *memLocal { return &memLocal{m: map[engine.ChunkID]engine.Chunk{}} }

func (l *memLocal) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	l.mu.Lock()
	l.gets++
	gate := l.gate
	l.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[engine.ChunkID]engine.Chunk{}
	for _, id := range ids {
		if c, ok := l.m[id]; ok {
			out[id] = c
		}
	}
	return out, nil
}

func (l *memLocal) PutChunks(ctx context.Context, chunks []engine.Chunk) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.putErr != nil {
		return l.putErr
	}
	for _, c := range chunks {
		l.m[c.ID] = c
		l.puts = append(l.puts, c.ID)
	}
	return nil
}

func (l *memLocal) store(id engine.ChunkID) {
	l.mu.Lock()
	l.m[id] = engine.Chunk{ID: id, Data: "data-" + id}
	l.mu.Unlock()
}

func (l *memLocal) has(id engine.ChunkID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.m[id]
	return ok
}

// runner wraps an activity.Tracker to model a faulty activity runner.
type runner struct {
	*activity.Tracker
	mu     sync.Mutex
	reject error // refuse every boundary with this error
	stuck  int   // the next stuck calls never enter their task
}

func (r *runner) RunBounded(ctx context.Context, label string, fn func(context.Context) error) error {
	r.mu.Lock()
	reject, stuck := r.reject, r.stuck > 0
	if stuck {
		r.stuck--
	}
	r.mu.Unlock()
	if reject != nil {
		return reject
	}
	if stuck {
		<-ctx.Done()
		return ctx.Err()
	}
	return r.Tracker.RunBounded(ctx, label, fn)
}

// rig wires one fetcher and one wait layer to fakes.
type rig struct {
	t     *testing.T
	t0    time.Time
	act   *activity.Tracker
	run   *runner
	co    *fetch.Coordinator
	src   *fakeSource
	local *memLocal
	f     *fetch.Fetcher
	l     *fetch.Layer
	wg    sync.WaitGroup
}

// newRig must run inside a synctest bubble. src may be nil (no fetcher
// dispatch: MinIO/P2P) — pass noFetcher to leave the fetcher out.
func newRig(t *testing.T, cfg fetch.Config, src *fakeSource) *rig {
	t.Helper()
	r := &rig{t: t, t0: time.Now(), act: activity.New(nil), co: fetch.NewCoordinator(), src: src, local: newLocal()}
	r.run = &runner{Tracker: r.act}
	var err error
	deps := fetch.Deps{Local: r.local, Activity: r.run, Claims: r.co}
	if src != nil {
		deps.Source = src
	}
	r.f, err = fetch.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	r.l, err = fetch.NewLayer(fetch.LayerConfig{}, fetch.LayerDeps{Local: r.local, Activity: r.act, Claims: r.co, Fetcher: r.f})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.close)
	return r
}

func (r *rig) close() {
	r.l.Close()
	r.f.Close()
	r.co.Close()
	r.wg.Wait()
	if s := r.f.Stats(); s.Pending() != 0 || s.Claims != 0 || s.InFlight != 0 {
		r.t.Errorf("after Close: %+v", s)
	}
	if st := r.act.State(); st.Bounded != 0 {
		r.t.Errorf("after Close: bounded activity %+v", st)
	}
	if r.src != nil {
		r.src.checkNoDuplicates(r.t)
	}
}

func (r *rig) now() time.Duration { return time.Since(r.t0) }

// finite starts a finite replication; the returned function ends it and
// waits until its boundary has closed.
func (r *rig) finite() (end func()) {
	stop := make(chan struct{})
	entered := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.act.RunFinite(context.Background(), "replication", func(context.Context) error {
			close(entered)
			<-stop
			return nil
		})
	}()
	<-entered
	var once sync.Once
	end = func() { once.Do(func() { close(stop); <-done }) }
	r.t.Cleanup(end)
	return end
}

// read is an asynchronous Layer.Get.
type read struct {
	done chan struct{}
	res  []fetch.Result
	err  error
	at   time.Duration
}

func (r *rig) read(ids []engine.ChunkID, opts fetch.ReadOptions) *read {
	rd := &read{done: make(chan struct{})}
	r.wg.Go(func() {
		defer close(rd.done)
		rd.res, rd.err = r.l.Get(context.Background(), ids, opts)
		rd.at = r.now()
	})
	return rd
}

func (rd *read) finished() bool {
	select {
	case <-rd.done:
		return true
	default:
		return false
	}
}

func (rd *read) wait(t *testing.T) []fetch.Result {
	t.Helper()
	<-rd.done
	if rd.err != nil {
		t.Fatalf("Get: %v", rd.err)
	}
	return rd.res
}

func ids(s ...string) []engine.ChunkID { return s }

func sec(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// eventLog records coordinator events as "offset id" strings, safely.
type eventLog struct {
	mu  sync.Mutex
	got []string
}

func (l *eventLog) add(s string) {
	l.mu.Lock()
	l.got = append(l.got, s)
	l.mu.Unlock()
}

func (l *eventLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}
