package fetch

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/activity"
)

// Activity is what retrieval needs from activity tracking;
// *activity.Tracker implements it.
type Activity interface {
	// RunBounded runs fn inside a bounded-remote-activity boundary. It may
	// refuse (return an error without calling fn) or never call fn.
	RunBounded(ctx context.Context, label string, fn func(context.Context) error) error
	// State reads the counts.
	State() activity.State
	// Subscribe calls fn after every transition of the finite count
	// between zero and non-zero.
	Subscribe(fn func()) (cancel func())
}

var _ Activity = (*activity.Tracker)(nil)

// Deps are a Fetcher's collaborators.
type Deps struct {
	// Source is the active chunk source; nil means none (upstream: no
	// active Replicator). SetSource changes it.
	Source engine.ChunkSource
	// Local persists fetched chunks and answers local rechecks.
	Local engine.LocalChunks
	// Activity gates retries and wraps each claim in bounded activity.
	Activity Activity
	// Claims is the coordinator shared with the wait layer and the hunt.
	Claims *Coordinator
}

// Stats is one atomic snapshot of a Fetcher. Initial and Retrying are
// disjoint: together they are the identifiers this fetcher owns from
// queueing through terminal delivery (upstream collectingChunks, shown as
// 🛄Initial 🔁Retrying).
type Stats struct {
	Claims   int // live claims accepted by this fetcher
	Initial  int // pending ids never omitted yet
	Retrying int // pending ids omitted at least once (backoff, retry, final probe)
	InFlight int // physical requests holding a concurrency slot

	Requests      uint64 // requests put on the wire
	Omissions     uint64 // successful omissions (an id answered missing)
	RemoteMissing uint64 // terminal explicit remote-missing results
	Delivered     uint64 // ids delivered (remote or local recheck)
	Failures      uint64 // ids ended by a transport or invalid-answer failure
	Released      uint64 // ids released without an answer (no source, rejected)
	Stalls        uint64 // ids released by the inactivity fuse
}

// Pending is Initial + Retrying.
func (s Stats) Pending() int { return s.Initial + s.Retrying }

// Fetcher is upstream's ChunkFetcher (commonlib src/managers/ChunkFetcher.ts)
// with the retry, quiescence and claim-identity rules of upstream's
// docs/design_docs/chunk_retrieval_and_waiting.md: it accepts
// missing identifiers, claims them synchronously, and fetches them from
// its ChunkSource in throttled batches until each one is delivered,
// answered missing by a current final probe, failed, expired or released.
// See the package documentation for the lifecycle. A Fetcher is safe for
// concurrent use. Close it to stop; Close waits for its goroutines.
type Fetcher struct {
	cfg   Config
	log   *slog.Logger
	local engine.LocalChunks
	act   Activity
	co    *Coordinator
	unsub func()

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Lock order: mu, then the Coordinator's lock, then any listener's
	// lock (listeners of the Coordinator never call the Fetcher).
	mu         sync.Mutex
	closed     bool
	src        engine.ChunkSource
	entries    map[engine.ChunkID]*entry // the current entry (claim identity) per id
	claims     map[*Claim]*claimRec
	queue      entryHeap
	blocked    map[engine.ChunkID]*entry
	wire       map[engine.ChunkID]*entry // ids reserved by a request, by the entry that holds them
	processing int
	lastStart  time.Time // the latest shared request start
	nextTicket time.Time // the next free start slot, ticketed when a batch forms
	seq        uint64
	timer      *time.Timer
	timerAt    time.Time
	stats      Stats
}

type claimRec struct {
	seq     uint64
	entries []*entry
	live    int
}

// New returns a running Fetcher.
func New(cfg Config, deps Deps) (*Fetcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Local == nil || deps.Activity == nil || deps.Claims == nil {
		return nil, errors.New("fetch: New needs Local, Activity and Claims")
	}
	cfg = cfg.withDefaults()
	f := &Fetcher{
		cfg:     cfg,
		log:     cfg.Logger,
		local:   deps.Local,
		act:     deps.Activity,
		co:      deps.Claims,
		src:     deps.Source,
		entries: make(map[engine.ChunkID]*entry),
		claims:  make(map[*Claim]*claimRec),
		blocked: make(map[engine.ChunkID]*entry),
		wire:    make(map[engine.ChunkID]*entry),
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.unsub = f.act.Subscribe(f.onActivity)
	return f, nil
}

// SetSource replaces the active chunk source; nil means none. Requests
// already on the wire finish with the source they started with.
func (f *Fetcher) SetSource(src engine.ChunkSource) {
	f.mu.Lock()
	f.src = src
	f.mu.Unlock()
}

// CanFetchDirect reports whether an active source supports fetch by id.
func (f *Fetcher) CanFetchDirect() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.closed && f.src != nil && f.src.CanFetchDirect()
}

// Stats returns one consistent snapshot.
func (f *Fetcher) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.stats
	s.Claims = len(f.claims)
	s.InFlight = f.processing
	return s
}

// effects are calls into other components collected under f.mu and run
// after it is released.
type effects []func()

func (fx effects) run() {
	for _, fn := range fx {
		fn()
	}
}

// Request accepts missing identifiers (upstream's missingChunks event).
// Before it returns, every id not already owned by this fetcher is
// claimed (one claim for the call) in the Coordinator; ids it already
// owns keep their claim, stage and retry time. The claim's work runs
// inside a bounded-activity boundary; no request is made for it before
// that boundary is entered.
func (f *Fetcher) Request(ids []engine.ChunkID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	fresh := make([]engine.ChunkID, 0, len(ids))
	seen := make(map[engine.ChunkID]struct{}, len(ids))
	for _, id := range ids {
		if _, ok := f.entries[id]; ok {
			continue
		}
		if _, ok := seen[id]; ok {
			continue
		}
		seen[id] = struct{}{}
		fresh = append(fresh, id)
	}
	if len(fresh) == 0 {
		return
	}
	cl := f.co.Claim(fresh, ClaimOptions{StallTimeout: f.cfg.StallTimeout, OnStalled: f.stalled})
	rec := &claimRec{seq: f.seq, live: len(fresh)}
	f.seq++
	for _, id := range fresh {
		// recheck: the caller's local miss may predate a delivery that
		// settled a previous claim of this id; a local read before the
		// first request keeps a delivered id off the wire.
		e := &entry{id: id, claim: cl, state: stEntering, idx: -1, recheck: true}
		f.entries[id] = e
		rec.entries = append(rec.entries, e)
	}
	f.claims[cl] = rec
	f.stats.Initial += len(fresh)
	f.log.Debug("chunk claim accepted", "ids", len(fresh))
	f.wg.Add(1)
	go f.boundary(cl)
}

// boundary runs one claim inside bounded remote activity: the boundary
// stays open until the claim is done, so wake locks and lifecycle
// deferral cover backoff too.
func (f *Fetcher) boundary(cl *Claim) {
	defer f.wg.Done()
	entered := false
	err := f.act.RunBounded(f.ctx, "chunk-fetch", func(ctx context.Context) error {
		entered = true
		f.enter(cl)
		select {
		case <-cl.Done():
		case <-ctx.Done():
		}
		return nil
	})
	if !entered {
		if err == nil {
			err = errors.New("runner returned without entering")
		}
		f.reject(cl, err)
	}
}

// enter makes a claim's entries eligible: its boundary was entered.
func (f *Fetcher) enter(cl *Claim) {
	cl.Touch() // entering the boundary is progress
	var fx effects
	f.mu.Lock()
	if rec := f.claims[cl]; rec != nil {
		now := time.Now()
		for _, e := range rec.entries {
			if f.entries[e.id] == e && e.state == stEntering {
				f.push(e, now)
			}
		}
		f.pump(now, &fx)
	}
	f.mu.Unlock()
	fx.run()
}

func (f *Fetcher) reject(cl *Claim, err error) {
	f.mu.Lock()
	if rec := f.claims[cl]; rec != nil {
		for _, e := range rec.entries {
			if f.entries[e.id] == e {
				f.remove(e)
				f.stats.Released++
			}
		}
	}
	closed := f.closed
	f.mu.Unlock()
	if !closed {
		f.log.Warn("chunk claim rejected by activity runner", "err", err)
	}
	cl.Release(errors.Join(ErrRejected, err))
}

// stalled is the fuse's callback: the Coordinator has released cl.
// Queued work and timers of its ids go; a request on the wire is not
// aborted, and its answer will be stale.
func (f *Fetcher) stalled(cl *Claim, remaining []engine.ChunkID) {
	f.mu.Lock()
	n := 0
	if rec := f.claims[cl]; rec != nil {
		for _, e := range rec.entries {
			if f.entries[e.id] == e {
				f.remove(e)
				n++
			}
		}
	}
	f.stats.Stalls += uint64(n)
	var fx effects
	f.pump(time.Now(), &fx)
	f.mu.Unlock()
	fx.run()
	f.log.Warn("chunk claim released by inactivity fuse", "ids", len(remaining), "stall", f.cfg.StallTimeout)
}

// onActivity handles transitions of the finite count. At quiescence the
// remaining backoff is interrupted and every pending id is rechecked
// locally before its next (final) probe.
func (f *Fetcher) onActivity() {
	var fx effects
	f.mu.Lock()
	if f.closed || !f.act.State().Quiescent() {
		f.mu.Unlock()
		return
	}
	now := time.Now()
	for _, e := range f.entries {
		switch e.state {
		case stQueued:
			e.recheck = true
			if e.at.After(now) {
				e.at = now
				heap.Fix(&f.queue, e.idx)
			}
		case stBlocked, stBatched:
			e.recheck = true
		}
	}
	f.pump(now, &fx)
	f.mu.Unlock()
	fx.run()
}

// push queues e as eligible at `at`.
func (f *Fetcher) push(e *entry, at time.Time) {
	e.state = stQueued
	e.at = at
	e.seq = f.seq
	f.seq++
	heap.Push(&f.queue, e)
}

// remove forgets the current entry e (settled, expired, released).
func (f *Fetcher) remove(e *entry) {
	if f.entries[e.id] != e {
		return
	}
	delete(f.entries, e.id)
	switch e.state {
	case stQueued:
		heap.Remove(&f.queue, e.idx)
	case stBlocked:
		delete(f.blocked, e.id)
	}
	if e.stage == 0 {
		f.stats.Initial--
	} else {
		f.stats.Retrying--
	}
	if rec := f.claims[e.claim]; rec != nil {
		if rec.live--; rec.live == 0 {
			delete(f.claims, e.claim)
		}
	}
}

// settle records ev for the current entry e and publishes it through its
// own claim after the lock is released.
func (f *Fetcher) settle(e *entry, ev Event, fx *effects) {
	f.remove(e)
	switch ev.Kind {
	case EventDelivered:
		f.stats.Delivered++
	case EventRemoteMissing:
		f.stats.RemoteMissing++
	case EventFailed:
		f.stats.Failures++
	case EventReleased:
		f.stats.Released++
	}
	cl := e.claim
	*fx = append(*fx, func() { cl.Settle(ev) })
}

// unwire frees e's reservation of its id on the wire, in this fetcher
// and in the Coordinator's wire registry, and requeues a replacement
// entry that was blocked on it. Other parties waiting for the id are told
// through fx, after the lock is released.
func (f *Fetcher) unwire(e *entry, now time.Time, fx *effects) {
	if f.wire[e.id] != e {
		return
	}
	delete(f.wire, e.id)
	*fx = append(*fx, f.co.freeWire(f, []engine.ChunkID{e.id}))
	if b := f.blocked[e.id]; b != nil {
		delete(f.blocked, e.id)
		b.recheck = true
		f.push(b, now)
	}
}

// wireFreed is the Coordinator's callback when another party's flight of
// id landed: an entry blocked on it is requeued, with a local recheck
// first, since that flight persisted what it found before landing.
func (f *Fetcher) wireFreed(id engine.ChunkID) {
	var fx effects
	f.mu.Lock()
	if b := f.blocked[id]; b != nil && f.wire[id] == nil {
		delete(f.blocked, id)
		b.recheck = true
		now := time.Now()
		f.push(b, now)
		f.pump(now, &fx)
	}
	f.mu.Unlock()
	fx.run()
}

// pump starts requests while a concurrency slot is free and eligible work
// exists, then arms the owned timer for the earliest future retry. Each
// step is O(log n) in the number of queued ids.
func (f *Fetcher) pump(now time.Time, fx *effects) {
	if f.closed {
		return
	}
	for f.processing < f.cfg.Concurrency && len(f.queue) > 0 && !f.queue[0].at.After(now) {
		batch := make([]*entry, 0, min(f.cfg.BatchSize, len(f.queue)))
		for len(batch) < f.cfg.BatchSize && len(f.queue) > 0 && !f.queue[0].at.After(now) {
			e := heap.Pop(&f.queue).(*entry)
			// Blocked while a stale request of this fetcher, or another
			// party's flight (another fetcher, the hunt), carries the id;
			// requeued with a recheck when it lands.
			if f.wire[e.id] != nil || !f.co.takeWire(f, e.id, f.wireFreed) {
				e.state = stBlocked
				f.blocked[e.id] = e
				continue
			}
			e.state = stBatched
			f.wire[e.id] = e
			batch = append(batch, e)
		}
		if len(batch) == 0 {
			continue
		}
		// The start slot is ticketed in formation order, so batches go
		// on the wire first-come first-served whatever their rechecks.
		ticket := later(now, f.nextTicket)
		f.nextTicket = ticket.Add(f.cfg.MinInterval)
		f.processing++
		f.wg.Add(1)
		go f.send(batch, ticket)
	}
	f.armTimer(now)
}

func (f *Fetcher) armTimer(now time.Time) {
	var want time.Time
	if f.processing < f.cfg.Concurrency && len(f.queue) > 0 && f.queue[0].at.After(now) {
		want = f.queue[0].at
	}
	switch {
	case want.IsZero():
		if !f.timerAt.IsZero() {
			f.timer.Stop()
			f.timerAt = time.Time{}
		}
	case want.Equal(f.timerAt):
	case f.timer == nil:
		f.timer = time.AfterFunc(want.Sub(now), f.wake)
		f.timerAt = want
	default:
		f.timer.Reset(want.Sub(now))
		f.timerAt = want
	}
}

// wake is the owned timer's callback: the earliest retry is eligible.
func (f *Fetcher) wake() {
	var fx effects
	f.mu.Lock()
	f.timerAt = time.Time{}
	f.pump(time.Now(), &fx)
	f.mu.Unlock()
	fx.run()
}

// send drives one request: it drops ids whose claim is gone, rechecks
// the local store when asked, waits for the minimum interval, reserves
// its start synchronously against the latest shared request time, and
// puts the request on the wire.
func (f *Fetcher) send(batch []*entry, ticket time.Time) {
	defer f.wg.Done()
	for {
		var fx effects
		f.mu.Lock()
		now := time.Now()
		batch = f.keepCurrent(batch, now, &fx)
		if f.closed || len(batch) == 0 {
			if f.nextTicket.Equal(ticket.Add(f.cfg.MinInterval)) {
				f.nextTicket = ticket // hand an unused last slot back
			}
			f.finish(now, &fx)
			f.mu.Unlock()
			fx.run()
			return
		}
		src := f.src
		if src == nil {
			for _, e := range batch {
				f.unwire(e, now, &fx)
				f.settle(e, Event{ID: e.id, Kind: EventReleased, Err: ErrNoSource}, &fx)
			}
			f.finish(now, &fx)
			f.mu.Unlock()
			fx.run()
			f.log.Warn("chunk request without an active source", "ids", len(batch))
			return
		}

		var recheck []engine.ChunkID
		for _, e := range batch {
			if e.recheck {
				e.recheck = false
				recheck = append(recheck, e.id)
			}
		}
		if len(recheck) > 0 {
			f.mu.Unlock()
			got, err := f.local.GetChunks(f.ctx, recheck)
			f.mu.Lock()
			if err != nil && !f.closed {
				f.log.Warn("local chunk recheck failed", "ids", len(recheck), "stage", engine.StageStorage, "err", err)
			}
			now = time.Now()
			for _, e := range batch {
				if c, ok := got[e.id]; ok && f.entries[e.id] == e {
					f.unwire(e, now, &fx)
					f.settle(e, Event{ID: e.id, Kind: EventDelivered, Chunk: c}, &fx)
				}
			}
			f.pump(now, &fx)
			f.mu.Unlock()
			fx.run()
			continue // after an asynchronous recheck, check the interval again
		}

		iv := f.cfg.MinInterval
		if now.Before(ticket) || (!f.lastStart.IsZero() && now.Before(f.lastStart.Add(iv))) {
			d := later(ticket, f.lastStart.Add(iv)).Sub(now)
			f.mu.Unlock()
			fx.run()
			sleep(f.ctx, d)
			continue // after every wait, check the interval again
		}
		// Reserve the start synchronously: no wait between this check
		// and the request.
		f.lastStart = now
		f.nextTicket = later(f.nextTicket, now.Add(iv))
		start := f.act.State()
		f.stats.Requests++
		ids := make([]engine.ChunkID, len(batch))
		for i, e := range batch {
			ids[i] = e.id
		}
		f.mu.Unlock()
		fx.run()
		f.log.Debug("chunk request", "source", src.ThrottleKey(), "ids", len(ids))
		res, err := src.FetchChunks(f.ctx, ids)
		f.complete(src, batch, start, res, err)
		return
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// keepCurrent drops entries that are no longer current (settled, expired,
// replaced) from a request that has not reached the wire.
func (f *Fetcher) keepCurrent(batch []*entry, now time.Time, fx *effects) []*entry {
	out := batch[:0]
	for _, e := range batch {
		if f.entries[e.id] == e {
			out = append(out, e)
		} else {
			f.unwire(e, now, fx)
		}
	}
	return out
}

// finish frees the request's concurrency slot.
func (f *Fetcher) finish(now time.Time, fx *effects) {
	f.processing--
	f.pump(now, fx)
}

// complete handles an answer. Found chunks are persisted before any claim
// settles, so the claim (and its bounded activity) covers persistence.
func (f *Fetcher) complete(src engine.ChunkSource, batch []*entry, start activity.State, res engine.FetchResult, err error) {
	var found map[engine.ChunkID]engine.Chunk
	var missing map[engine.ChunkID]struct{}
	if err == nil {
		found, missing = f.validate(batch, res)
		if len(found) > 0 {
			chunks := make([]engine.Chunk, 0, len(found))
			for _, e := range batch { // request order, deterministic
				if c, ok := found[e.id]; ok {
					chunks = append(chunks, c)
				}
			}
			if perr := f.local.PutChunks(f.ctx, chunks); perr != nil {
				// The chunks are valid; readers still get them. The store
				// error is the store's to report.
				f.log.Warn("persisting fetched chunks failed", "ids", len(chunks), "stage", engine.StageStorage, "err", perr)
			}
		}
	}

	var fx effects
	f.mu.Lock()
	now := time.Now()
	st := f.act.State()
	for _, e := range batch {
		f.unwire(e, now, &fx)
	}
	switch {
	case err != nil && f.closed:
	case err != nil:
		ferr := err
		var ee *engine.Error
		if !errors.As(err, &ee) {
			ferr = &engine.Error{Op: "fetch chunks", DocID: src.ThrottleKey(), Stage: engine.StageTransport, Err: err}
		}
		n := 0
		for _, e := range batch {
			if f.entries[e.id] == e {
				f.settle(e, Event{ID: e.id, Kind: EventFailed, Err: ferr}, &fx)
				n++
			}
		}
		f.log.Warn("chunk request failed", "source", src.ThrottleKey(), "ids", n, "err", err)
	default:
		// A lookup is current when it started with no finite producer
		// running and none started before it answered.
		current := start.Quiescent() && st.FiniteStarts == start.FiniteStarts
		for _, e := range batch {
			if f.entries[e.id] != e {
				continue // stale: the claim expired or was replaced
			}
			if c, ok := found[e.id]; ok {
				f.settle(e, Event{ID: e.id, Kind: EventDelivered, Chunk: c}, &fx)
			} else if _, ok := missing[e.id]; ok {
				f.omitted(e, current, st, now, &fx)
			} else {
				f.settle(e, Event{ID: e.id, Kind: EventFailed, Err: &engine.Error{
					Op: "fetch chunk", DocID: e.id, Stage: engine.StageProtocol, Err: engine.ErrMalformed}}, &fx)
			}
		}
	}
	f.finish(now, &fx)
	f.mu.Unlock()
	fx.run()
}

// validate checks the answer against the ChunkSource contract: found
// chunks that were requested (first occurrence wins), and ids answered
// missing. A requested id in neither is invalid; an unrequested chunk is
// ignored.
func (f *Fetcher) validate(batch []*entry, res engine.FetchResult) (map[engine.ChunkID]engine.Chunk, map[engine.ChunkID]struct{}) {
	requested := make(map[engine.ChunkID]struct{}, len(batch))
	for _, e := range batch {
		requested[e.id] = struct{}{}
	}
	found := make(map[engine.ChunkID]engine.Chunk, len(res.Found))
	for _, c := range res.Found {
		if _, ok := requested[c.ID]; !ok {
			f.log.Warn("chunk source returned an unrequested chunk", "chunk", c.ID)
			continue
		}
		if _, dup := found[c.ID]; !dup {
			found[c.ID] = c
		}
	}
	missing := make(map[engine.ChunkID]struct{}, len(res.Missing))
	for _, id := range res.Missing {
		if _, ok := requested[id]; ok {
			if _, ok := found[id]; !ok {
				missing[id] = struct{}{}
			}
		}
	}
	return found, missing
}

// omitted applies the per-identifier retry policy to a successful
// omission of the current entry e.
func (f *Fetcher) omitted(e *entry, current bool, st activity.State, now time.Time, fx *effects) {
	was := e.stage
	e.stage++
	if was == 0 {
		f.stats.Initial--
		f.stats.Retrying++
	}
	f.stats.Omissions++
	e.claim.Touch() // a successful omission is progress
	if current && was >= 1 {
		f.log.Info("chunk missing on remote", "chunk", e.id, "attempt", e.stage)
		f.settle(e, Event{ID: e.id, Kind: EventRemoteMissing}, fx)
		return
	}
	// The first omission always waits one step; later ones back off while
	// finite replication runs. Otherwise the answer was pre-completion:
	// probe again now.
	var d time.Duration
	if was == 0 || !st.Quiescent() {
		d = f.cfg.retryDelay(e.stage)
	}
	e.recheck = true
	f.push(e, now.Add(d))
	f.log.Debug("chunk omitted, retry scheduled", "chunk", e.id, "attempt", e.stage, "delay", d)
}

// Close releases every claim this fetcher owns (ErrClosed), drops queued
// work and its timer, cancels requests on the wire, and waits for every
// goroutine it started. Other fetchers' claims are untouched.
func (f *Fetcher) Close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		f.wg.Wait()
		return
	}
	f.closed = true
	recs := make([]*Claim, len(f.claims))
	order := make([]uint64, 0, len(f.claims))
	bySeq := make(map[uint64]*Claim, len(f.claims))
	for cl, rec := range f.claims {
		order = append(order, rec.seq)
		bySeq[rec.seq] = cl
	}
	slices.Sort(order)
	for i, s := range order {
		recs[i] = bySeq[s]
	}
	for _, e := range f.entries {
		f.remove(e)
	}
	if f.timer != nil {
		f.timer.Stop()
	}
	f.mu.Unlock()
	f.unsub()
	for _, cl := range recs {
		cl.Release(ErrClosed)
	}
	f.cancel()
	f.wg.Wait()
}
