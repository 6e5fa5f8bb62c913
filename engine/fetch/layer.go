package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
)

// Reasons a Result is unavailable. Each wraps engine.ErrMissingChunk;
// a transport failure is reported with its own *engine.Error instead.
var (
	// ErrLocalOnly: not stored locally, and the read's policy neither
	// dispatches nor waits.
	ErrLocalOnly = fmt.Errorf("fetch: not stored locally and the read does not wait: %w", engine.ErrMissingChunk)
	// ErrNoProducer: nothing observable (no claim, no finite
	// replication) could deliver the chunk when the read asked.
	ErrNoProducer = fmt.Errorf("fetch: no producer can deliver the chunk: %w", engine.ErrMissingChunk)
	// ErrNotDelivered: every observed producer ended and the local
	// recheck after that still missed.
	ErrNotDelivered = fmt.Errorf("fetch: not delivered by any observed producer: %w", engine.ErrMissingChunk)
	// ErrRemoteMissing: the remote answered, in a current final probe,
	// that it does not have the chunk.
	ErrRemoteMissing = fmt.Errorf("fetch: the remote does not have the chunk: %w", engine.ErrMissingChunk)
	// ErrDeleted: the chunk arrived as a deletion.
	ErrDeleted = fmt.Errorf("fetch: the chunk was deleted: %w", engine.ErrMissingChunk)
)

// Policy is what a read may do after a local miss: upstream's
// computeChunkRetrievalMethod (commonlib
// src/managers/EntryManager/EntryManagerImpls.ts) and the policy matrix
// of upstream's docs/design_docs/chunk_retrieval_and_waiting.md
// (engine/FORMAT.md §8.2).
type Policy struct {
	// Dispatch: the read asks the Fetcher for a direct fetch.
	Dispatch bool
	// Wait: the read waits while an observable producer (its claim, or
	// finite replication) can still deliver.
	Wait bool
}

// PolicyFor returns the policy of a read. canFetchDirect is the remote's
// capability (CouchDB and not useOnlyLocalChunk); waitForReady is the
// call site's choice. Direct fetch always waits for the claim it creates;
// otherwise only waitForReady waits.
func PolicyFor(canFetchDirect, waitForReady bool) Policy {
	return Policy{Dispatch: canFetchDirect, Wait: canFetchDirect || waitForReady}
}

// ReadOptions are per-read choices.
type ReadOptions struct {
	// WaitForReady permits waiting for an already-observable producer.
	WaitForReady bool
}

// Result is the answer for one identifier.
type Result struct {
	Chunk engine.Chunk
	OK    bool
	// Err says why the chunk is unavailable when !OK: one of the Err
	// values of this package, ErrClosed, or a *engine.Error from the
	// source (transport, auth, protocol) or the store.
	Err error
}

// Dispatcher is what the wait layer needs from a Fetcher.
type Dispatcher interface {
	CanFetchDirect() bool
	Request(ids []engine.ChunkID)
}

// LayerDeps are a Layer's collaborators.
type LayerDeps struct {
	Local    engine.LocalChunks
	Activity Activity
	Claims   *Coordinator
	// Fetcher dispatches direct fetches; nil for remotes without fetch by
	// id (MinIO's sequential replicator, P2P).
	Fetcher Dispatcher
}

// LayerConfig configures a Layer; the zero value is valid.
type LayerConfig struct {
	Logger *slog.Logger // nil discards
}

// Layer is the arrival wait layer (upstream ArrivalWaitLayer, commonlib
// src/managers/LayeredChunkManager/ArrivalWaitLayer.ts): after a local
// miss it waits for a chunk only while something observable can deliver
// it, with no elapsed-time budget. A Layer is safe for concurrent use.
type Layer struct {
	log   *slog.Logger
	local engine.LocalChunks
	act   Activity
	co    *Coordinator
	disp  Dispatcher

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	unsubs []func()

	mu      sync.Mutex
	closed  bool
	waiters map[engine.ChunkID]*waiter
}

// waiter is the one shared wait of every read of an identifier.
type waiter struct {
	done     chan struct{}
	res      Result
	observed bool   // a producer was observed at some refresh
	version  uint64 // bumped at every refresh; a recheck with an older version is stale
}

// NewLayer returns a Layer observing deps.Claims and deps.Activity.
func NewLayer(cfg LayerConfig, deps LayerDeps) (*Layer, error) {
	if deps.Local == nil || deps.Activity == nil || deps.Claims == nil {
		return nil, errors.New("fetch: NewLayer needs Local, Activity and Claims")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Layer{log: log, local: deps.Local, act: deps.Activity, co: deps.Claims, disp: deps.Fetcher,
		waiters: make(map[engine.ChunkID]*waiter)}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.unsubs = append(l.unsubs, deps.Claims.Subscribe(l.onEvents), deps.Activity.Subscribe(l.onActivity))
	return l, nil
}

// Waiting returns how many identifiers have a pending waiter.
func (l *Layer) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiters)
}

// Get reads ids: from the local store, and after a miss according to
// PolicyFor(canFetchDirect, opts.WaitForReady). It returns one Result per
// id, in order. The error is non-nil only when the initial local read
// fails or ctx ends; an ended ctx stops this read's wait, not the shared
// waiters or claims.
func (l *Layer) Get(ctx context.Context, ids []engine.ChunkID, opts ReadOptions) ([]Result, error) {
	results := make([]Result, len(ids))
	if len(ids) == 0 {
		return results, nil
	}
	uniq := make([]engine.ChunkID, 0, len(ids))
	seen := make(map[engine.ChunkID]struct{}, len(ids))
	for _, id := range ids {
		if _, ok := seen[id]; !ok {
			seen[id] = struct{}{}
			uniq = append(uniq, id)
		}
	}
	have, err := l.local.GetChunks(ctx, uniq)
	if err != nil {
		return nil, &engine.Error{Op: "read chunks", Stage: engine.StageStorage, Err: err}
	}
	var missing []engine.ChunkID
	for _, id := range uniq {
		if _, ok := have[id]; !ok {
			missing = append(missing, id)
		}
	}
	final := make(map[engine.ChunkID]Result, len(uniq))
	for id, c := range have {
		final[id] = Result{Chunk: c, OK: true}
	}
	fill := func() []Result {
		for i, id := range ids {
			results[i] = final[id]
		}
		return results
	}
	if len(missing) == 0 {
		return fill(), nil
	}
	direct := l.disp != nil && l.disp.CanFetchDirect()
	pol := PolicyFor(direct, opts.WaitForReady)
	if !pol.Wait {
		for _, id := range missing {
			final[id] = Result{Err: ErrLocalOnly}
		}
		return fill(), nil
	}

	// Register before dispatch, so no terminal event can be missed.
	ws := make([]*waiter, len(missing))
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		for _, id := range missing {
			final[id] = Result{Err: ErrClosed}
		}
		return fill(), nil
	}
	for i, id := range missing {
		w := l.waiters[id]
		if w == nil {
			w = &waiter{done: make(chan struct{})}
			l.waiters[id] = w
		}
		ws[i] = w
	}
	l.mu.Unlock()
	if pol.Dispatch {
		l.disp.Request(missing) // claims synchronously
	}
	l.refresh(missing)

	for i, w := range ws {
		select {
		case <-w.done:
			final[missing[i]] = w.res
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return fill(), nil
}

// Arrived resolves waiters for chunks that reached the local store
// through replication (the local change feed).
func (l *Layer) Arrived(chunks []engine.Chunk) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range chunks {
		if w := l.waiters[c.ID]; w != nil {
			l.resolve(c.ID, w, Result{Chunk: c, OK: true})
		}
	}
}

// Deleted resolves waiters for chunks that arrived as deletions.
func (l *Layer) Deleted(ids []engine.ChunkID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		if w := l.waiters[id]; w != nil {
			l.resolve(id, w, Result{Err: ErrDeleted})
		}
	}
}

func (l *Layer) resolve(id engine.ChunkID, w *waiter, r Result) {
	w.res = r
	close(w.done)
	delete(l.waiters, id)
}

func (l *Layer) onEvents(evs []Event) {
	var refresh []engine.ChunkID
	l.mu.Lock()
	for _, ev := range evs {
		w := l.waiters[ev.ID]
		if w == nil {
			continue
		}
		switch ev.Kind {
		case EventDelivered:
			l.resolve(ev.ID, w, Result{Chunk: ev.Chunk, OK: true})
		case EventRemoteMissing:
			l.resolve(ev.ID, w, Result{Err: ErrRemoteMissing})
		case EventFailed:
			l.resolve(ev.ID, w, Result{Err: ev.Err})
		default:
			refresh = append(refresh, ev.ID)
		}
	}
	l.mu.Unlock()
	l.refresh(refresh)
}

func (l *Layer) onActivity() {
	l.mu.Lock()
	ids := make([]engine.ChunkID, 0, len(l.waiters))
	for id := range l.waiters {
		ids = append(ids, id)
	}
	l.mu.Unlock()
	l.refresh(ids)
}

// refresh re-evaluates waiters: an observable producer keeps them
// waiting; when none remains, one that saw a producer rechecks the local
// store once, and one that never saw a producer is unavailable at once.
func (l *Layer) refresh(ids []engine.ChunkID) {
	if len(ids) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	finite := !l.act.State().Quiescent()
	var recheck []engine.ChunkID
	var versions []uint64
	for _, id := range ids {
		w := l.waiters[id]
		if w == nil {
			continue
		}
		w.version++
		switch {
		case finite || l.co.Claimed(id):
			w.observed = true
		case w.observed:
			recheck = append(recheck, id)
			versions = append(versions, w.version)
		default:
			l.resolve(id, w, Result{Err: ErrNoProducer})
		}
	}
	if len(recheck) > 0 && !l.closed {
		l.wg.Add(1)
		go l.recheck(recheck, versions)
	}
}

// recheck reads ids from the store, bypassing caches, after every
// observed producer ended. A miss settles unavailable only if no refresh
// happened meanwhile: new activity makes the result stale and keeps the
// waiter open.
func (l *Layer) recheck(ids []engine.ChunkID, versions []uint64) {
	defer l.wg.Done()
	got, err := l.local.GetChunks(l.ctx, ids)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, id := range ids {
		w := l.waiters[id]
		if w == nil {
			continue
		}
		if c, ok := got[id]; ok {
			l.resolve(id, w, Result{Chunk: c, OK: true})
			continue
		}
		if w.version != versions[i] {
			continue // stale: a newer refresh owns this waiter
		}
		if err != nil {
			l.resolve(id, w, Result{Err: &engine.Error{Op: "recheck chunk", DocID: id, Stage: engine.StageStorage, Err: err}})
			continue
		}
		l.resolve(id, w, Result{Err: ErrNotDelivered})
	}
}

// Close settles every pending waiter with ErrClosed, stops observing and
// waits for pending rechecks.
func (l *Layer) Close() {
	l.mu.Lock()
	l.closed = true
	for id, w := range l.waiters {
		l.resolve(id, w, Result{Err: ErrClosed})
	}
	l.mu.Unlock()
	for _, u := range l.unsubs {
		u()
	}
	l.cancel()
	l.wg.Wait()
}
