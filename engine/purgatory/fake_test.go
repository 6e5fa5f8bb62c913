package purgatory

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/hold"
)

// fakeLocal is an in-memory engine.LocalChunks.
type fakeLocal struct {
	mu     sync.Mutex
	chunks map[engine.ChunkID]engine.Chunk
	err    error // returned by GetChunks when set
}

func newFakeLocal() *fakeLocal { return &fakeLocal{chunks: map[engine.ChunkID]engine.Chunk{}} }

func (l *fakeLocal) GetChunks(_ context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return nil, l.err
	}
	out := map[engine.ChunkID]engine.Chunk{}
	for _, id := range ids {
		if c, ok := l.chunks[id]; ok {
			out[id] = c
		}
	}
	return out, nil
}

func (l *fakeLocal) PutChunks(_ context.Context, cs []engine.Chunk) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cs {
		l.chunks[c.ID] = c
	}
	return nil
}

func (l *fakeLocal) add(ids ...engine.ChunkID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		l.chunks[id] = engine.Chunk{ID: id, Data: "piece of " + id}
	}
}

// hunterCall is one recorded Hunter call, at virtual time At since the
// start of the test.
type hunterCall struct {
	At     time.Duration
	Op     string // "enqueue" or "remove"
	Doc    string
	Needed []engine.ChunkID
	Origin string
	Delay  time.Duration
}

func (c hunterCall) String() string {
	if c.Op == "remove" {
		return fmt.Sprintf("%v remove %s", c.At, c.Doc)
	}
	return fmt.Sprintf("%v enqueue %s %v origin=%q delay=%v", c.At, c.Doc, c.Needed, c.Origin, c.Delay)
}

// fakeHunter records Enqueue and Remove with virtual times.
type fakeHunter struct {
	start time.Time
	mu    sync.Mutex
	calls []hunterCall
}

func (h *fakeHunter) Enqueue(doc string, needed []engine.ChunkID, origin string, delay time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, hunterCall{At: time.Since(h.start), Op: "enqueue", Doc: doc, Needed: slices.Clone(needed), Origin: origin, Delay: delay})
}

func (h *fakeHunter) Remove(doc string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, hunterCall{At: time.Since(h.start), Op: "remove", Doc: doc})
}

func (h *fakeHunter) Calls() []hunterCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// release is one recorded Deps.Release call.
type release struct {
	At  time.Duration
	Doc string
	Rev string
}

// fakeReleaser verifies like livesync.ReadFile would (every chunk of the
// revision local, else ErrMissingChunk), with injectable errors per
// revision, and records successful releases.
type fakeReleaser struct {
	start time.Time
	local *fakeLocal
	mu    sync.Mutex
	revs  map[string][]engine.ChunkID // doc+" "+rev -> chunks
	errs  map[string][]error          // doc+" "+rev -> errors to return, in order
	done  []release
	calls int
}

func (r *fakeReleaser) add(rv hold.Revision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.revs[rv.Doc+" "+rv.Rev] = rv.Chunks
}

func (r *fakeReleaser) failWith(doc, rev string, errs ...error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs[doc+" "+rev] = append(r.errs[doc+" "+rev], errs...)
}

func (r *fakeReleaser) Release(ctx context.Context, doc, rev string) error {
	r.mu.Lock()
	r.calls++
	k := doc + " " + rev
	if errs := r.errs[k]; len(errs) > 0 {
		r.errs[k] = errs[1:]
		r.mu.Unlock()
		return errs[0]
	}
	chunks, ok := r.revs[k]
	r.mu.Unlock()
	if !ok {
		return &engine.Error{Op: "release", DocID: doc, Stage: engine.StageStorage, Err: engine.ErrNotFound}
	}
	got, _ := r.local.GetChunks(ctx, chunks)
	if len(got) != len(uniq(chunks)) {
		return &engine.Error{Op: "read file", DocID: doc, Stage: engine.StageDecode, Err: engine.ErrMissingChunk}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = append(r.done, release{At: time.Since(r.start), Doc: doc, Rev: rev})
	return nil
}

func (r *fakeReleaser) Released() []release {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.done)
}

func uniq(ids []engine.ChunkID) []engine.ChunkID {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rig is one purgatory with fakes, built inside a synctest bubble.
type rig struct {
	t      *testing.T
	start  time.Time
	local  *fakeLocal
	hunter *fakeHunter
	rel    *fakeReleaser
	logs   *syncBuffer
	p      *Purgatory
}

func newRig(t *testing.T, cfg Config) *rig {
	t.Helper()
	start := time.Now()
	local := newFakeLocal()
	r := &rig{t: t, start: start, local: local,
		hunter: &fakeHunter{start: start},
		rel:    &fakeReleaser{start: start, local: local, revs: map[string][]engine.ChunkID{}, errs: map[string][]error{}},
		logs:   &syncBuffer{},
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	p, err := New(cfg, Deps{Local: local, Hunter: r.hunter, Release: r.rel.Release})
	if err != nil {
		t.Fatal(err)
	}
	r.p = p
	t.Cleanup(p.Close)
	return r
}

// rev registers a revision with the releaser (as the store would hold
// it) and returns it.
func (r *rig) rev(doc, rev string, chunks ...engine.ChunkID) hold.Revision {
	rv := hold.Revision{Doc: doc, Rev: rev, Chunks: chunks}
	r.rel.add(rv)
	return rv
}

func (r *rig) hold(rv hold.Revision, source string) hold.Outcome {
	r.t.Helper()
	out, err := r.p.Hold(context.Background(), rv, source)
	if err != nil {
		r.t.Fatalf("Hold(%s %s): %v", rv.Doc, rv.Rev, err)
	}
	return out
}

// arrive makes chunks local and announces them, then lets the driver
// settle.
func (r *rig) arrive(ids ...engine.ChunkID) {
	r.local.add(ids...)
	r.p.ChunksArrived(ids)
	waitIdle()
}

// sleepUntil advances virtual time to start+d and lets the driver run.
func (r *rig) sleepUntil(d time.Duration) {
	r.t.Helper()
	if now := time.Since(r.start); d < now {
		r.t.Fatalf("sleepUntil(%v) at %v", d, now)
	}
	time.Sleep(d - time.Since(r.start))
	waitIdle()
}

func (r *rig) held(doc string) (HeldDoc, bool) {
	for _, h := range r.p.Held() {
		if h.Doc == doc {
			return h, true
		}
	}
	return HeldDoc{}, false
}

func (r *rig) wantReleased(want ...release) {
	r.t.Helper()
	got := r.rel.Released()
	if !slices.Equal(got, want) {
		r.t.Fatalf("released %v, want %v", got, want)
	}
}

func (r *rig) wantCalls(want ...hunterCall) {
	r.t.Helper()
	got := r.hunter.Calls()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		r.t.Fatalf("hunter calls\n got %v\nwant %v", got, want)
	}
}
