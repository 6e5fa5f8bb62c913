package hunt

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/fetch"
)

// ErrMissed is the reason a hunt request's claim releases the ids it did
// not deliver (fetch.EventReleased): this source did not supply them; it
// says nothing about other sources.
var ErrMissed = errors.New("hunt: the request ended without the chunk")

// Deps are a Hunt's collaborators.
type Deps struct {
	// Local is where found chunks are persisted (before OnDelivered and
	// before their flight lands) and where rechecks read.
	Local engine.LocalChunks
	// Claims is the Coordinator shared with the file-open Fetcher: its
	// wire registry is the single flight per chunk id, and the hunt claims
	// the ids it has on the wire so waiting readers observe it.
	Claims *fetch.Coordinator
	// OnDelivered, if set, is called with ids that became local through
	// the hunt (found by a request and persisted, or found by a local
	// recheck): the purgatory's ChunksArrived. It runs without the Hunt's
	// lock and may call back into the Hunt.
	OnDelivered func(ids []engine.ChunkID)
	// OnEvent, if set, is told what the Hunt does (typed events, for
	// status displays and callers that wait on the hunt). It runs
	// without the Hunt's lock, maybe on several goroutines at once, and
	// may call back into the Hunt.
	OnEvent func(Event)
}

// source is one registered chunk source; its throttle key identifies it.
type source struct {
	src engine.ChunkSource
	key string
	fp  func() string
}

// attempt is one request of a document to one source.
type attempt struct {
	e      *entry
	src    *source
	ids    []engine.ChunkID
	permit *permit
	w      *wave
	start  time.Time
	hedge  bool
	fp     string
	memo   bool // the source has a fingerprint: misses are memoized
}

// wave is the wire reservation and claim of a primary request, shared
// with its hedge: an id lands only when no attempt of the wave carries it
// any more, even if one of them found it (the registry means "a request
// may be carrying it"; a reader is served earlier by the claim's
// delivery event).
type wave struct {
	flight  *fetch.Flight
	claim   *fetch.Claim
	carried map[engine.ChunkID]int
}

// Hunt hunts the missing chunks of held documents across every
// registered source. See the package documentation. A Hunt is safe for
// concurrent use; Close stops it and waits for its goroutines.
type Hunt struct {
	cfg         Config
	log         *slog.Logger
	local       engine.LocalChunks
	co          *fetch.Coordinator
	onDelivered func([]engine.ChunkID)
	onEvent     func(Event)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}

	mu        sync.Mutex
	closed    bool
	sources   map[string]*source
	keys      []string // registered throttle keys, sorted
	throttles map[string]*throttle
	entries   map[string]*entry
	list      []*entry // entries in creation order
	seq       uint64
	memo      *memo
	stats     Stats
	pending   []Event             // events queued under the lock, delivered by flush
	flushing  int                 // flushes delivering events now (Wait waits for them)
	waiters   chan struct{}       // closed when a document is dropped (Wait)
	restored  map[string]DocState // backoff of documents of a restored State not enqueued yet
	saturated time.Time           // see Saturate; zero when never called
}

// New returns a running Hunt.
func New(cfg Config, deps Deps) (*Hunt, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Local == nil || deps.Claims == nil {
		return nil, errors.New("hunt: New needs Local and Claims")
	}
	cfg = cfg.withDefaults()
	h := &Hunt{
		cfg:         cfg,
		log:         cfg.Logger,
		local:       deps.Local,
		co:          deps.Claims,
		onDelivered: deps.OnDelivered,
		onEvent:     deps.OnEvent,
		kick:        make(chan struct{}, 1),
		sources:     make(map[string]*source),
		throttles:   make(map[string]*throttle),
		entries:     make(map[string]*entry),
		memo:        newMemo(cfg.MemoSources, cfg.MemoTTL),
		stats:       Stats{Sources: make(map[string]SourceStats)},
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.wg.Add(1)
	go h.run()
	return h, nil
}

// AddSource registers src under its throttle key; a source registered
// under the same key is replaced (and its memo forgotten). fingerprint
// names the source's current state (update sequence, listing) for the
// memo of ids it lacked; nil means no memo for this source. fingerprint
// must be cheap and must not call the Hunt. Sources that cannot fetch by
// id are skipped while CanFetchDirect is false.
func (h *Hunt) AddSource(src engine.ChunkSource, fingerprint func() string) {
	key := src.ThrottleKey()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	if _, ok := h.sources[key]; ok {
		h.memo.forget(key)
	} else {
		i, _ := slices.BinarySearch(h.keys, key)
		h.keys = slices.Insert(h.keys, i, key)
	}
	h.sources[key] = &source{src: src, key: key, fp: fingerprint}
	h.mu.Unlock()
	h.log.Debug("hunt source added", "source", key)
	h.trigger()
}

// RemoveSource unregisters the source with throttle key key. Requests on
// the wire finish; no new request goes to it.
func (h *Hunt) RemoveSource(key string) {
	h.mu.Lock()
	if _, ok := h.sources[key]; ok {
		delete(h.sources, key)
		i, _ := slices.BinarySearch(h.keys, key)
		h.keys = slices.Delete(h.keys, i, i+1)
		h.memo.forget(key)
		if t := h.throttles[key]; t != nil {
			for _, doc := range t.queued() {
				t.remove(doc)
			}
			if t.idle(time.Now()) {
				delete(h.throttles, key)
			}
		}
	}
	h.mu.Unlock()
	h.log.Debug("hunt source removed", "source", key)
	h.trigger()
}

// Enqueue schedules a hunt for doc. needed are its missing chunk ids (it
// replaces the previous set; an empty set removes doc); origin is the
// throttle key of the source the metadata came from ("" = a client push),
// tried first. A new doc's first pass starts at now+delay (or at the
// Next of its restored DocState if that is later, keeping its attempt
// count: see Restore). A known doc makes a fresh start: its attempt count
// resets to 0 and its next pass moves to now+delay only if that is
// earlier (debounce of bursts).
func (h *Hunt) Enqueue(doc string, needed []engine.ChunkID, origin string, delay time.Duration) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	if len(needed) == 0 {
		h.removeLocked(doc, "nothing missing")
		h.mu.Unlock()
		return
	}
	now := time.Now()
	e := h.entries[doc]
	fresh := e == nil
	if fresh {
		e = newEntry(doc, h.seq)
		h.seq++
		h.entries[doc] = e
		h.list = append(h.list, e)
	}
	e.enqueue(needed, origin, max(delay, 0), now, fresh)
	if ds, ok := h.restored[doc]; ok && fresh {
		delete(h.restored, doc)
		e.restore(ds)
	}
	h.mu.Unlock()
	h.log.Debug("hunt enqueued", "doc", doc, "chunks", len(needed), "source", origin, "delay", delay, "fresh", fresh)
	h.trigger()
}

// Remove stops hunting doc (released, soft-expired or deleted). Its
// requests on the wire finish and still persist what they find.
func (h *Hunt) Remove(doc string) {
	h.mu.Lock()
	if h.removeLocked(doc, "removed") {
		h.stats.Removed++
	}
	h.mu.Unlock()
	h.trigger()
}

func (h *Hunt) removeLocked(doc, why string) bool {
	e := h.entries[doc]
	if e == nil {
		return false
	}
	delete(h.entries, doc)
	for i, x := range h.list {
		if x == e {
			h.list = slices.Delete(h.list, i, i+1)
			break
		}
	}
	for _, t := range h.throttles {
		t.remove(doc)
	}
	h.changed()
	h.log.Debug("hunt entry dropped", "doc", doc, "reason", why)
	return true
}

// Close cancels requests and rechecks on the wire and waits for every
// goroutine of the Hunt. Later calls do nothing.
func (h *Hunt) Close() {
	h.mu.Lock()
	h.closed = true
	h.changed()
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}

func (h *Hunt) trigger() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// run is the driver: the only goroutine that starts requests. It runs a
// scheduling step on every trigger (an Enqueue, a request that ended and
// freed capacity, a flight that landed) and when its one timer fires: the
// next pass is due, a hedge is due, or a rate-limited source's window
// frees.
func (h *Hunt) run() {
	defer h.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.kick:
		case <-timer.C:
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return
		}
		now := time.Now()
		wake := h.step(now)
		h.mu.Unlock()
		h.flush()
		timer.Stop()
		if !wake.IsZero() {
			timer.Reset(wake.Sub(now))
		}
	}
}

// view is the state of the sources read once per step.
type view struct {
	order []*source         // usable sources, by key
	fp    map[string]string // fingerprints of sources that have one
}

func (h *Hunt) view() view {
	v := view{fp: make(map[string]string)}
	for _, k := range h.keys {
		s := h.sources[k]
		if !s.src.CanFetchDirect() {
			continue
		}
		v.order = append(v.order, s)
		if s.fp != nil {
			v.fp[k] = s.fp()
		}
	}
	return v
}

// orderFor is e's deterministic source order: its origin first, then
// every other source by throttle key.
func (v view) orderFor(e *entry) []*source {
	out := make([]*source, 0, len(v.order))
	for _, s := range v.order {
		if s.key == e.origin {
			out = append(out, s)
		}
	}
	for _, s := range v.order {
		if s.key != e.origin {
			out = append(out, s)
		}
	}
	return out
}

func (h *Hunt) throttle(key string) *throttle {
	t := h.throttles[key]
	if t == nil {
		t = newThrottle(key, h.cfg) // created lazily, on first use
		h.throttles[key] = t
		if !h.saturated.IsZero() {
			t.saturate(h.saturated, time.Now())
		}
	}
	return t
}

// eligible returns up to limit ids of e that s may be asked for in this
// pass: needed, not asked of s yet, not on the wire elsewhere, and not
// memoized as lacking at s. A memo hit counts as asked.
func (h *Hunt) eligible(v view, e *entry, s *source, now time.Time, limit int) []engine.ChunkID {
	var out []engine.ChunkID
	fp, hasFP := v.fp[s.key]
	for _, id := range e.order {
		if len(out) >= limit {
			break
		}
		if _, busy := e.busy[id]; busy || e.wasAsked(s.key, id) {
			continue
		}
		if hasFP && h.memo.lacks(s.key, fp, id, now) {
			e.markAsked(s.key, id)
			h.stats.MemoHits++
			continue
		}
		out = append(out, id)
	}
	return out
}

// step is one scheduling round at now, under the lock. It returns when
// the driver must wake next (zero: only on a trigger).
func (h *Hunt) step(now time.Time) time.Time {
	v := h.view()
	entries := slices.Clone(h.list)

	// Passes that are due begin with one local recheck for all of them,
	// so they become idle together and are placed in creation order.
	var due []*entry
	for _, e := range entries {
		if e.ready(now) && len(e.needed) > 0 {
			e.startPass(now)
			e.checking = true
			due = append(due, e)
		}
	}
	if len(due) > 0 {
		h.wg.Add(1)
		go h.passCheck(due)
	}
	// Capacity that freed goes to the documents queued on it, round
	// robin, skipping documents in progress.
	for _, s := range v.order {
		t := h.throttles[s.key]
		if t == nil {
			continue
		}
		for t.hasCapacity(now) {
			var ids []engine.ChunkID
			w, ok := t.next(func(doc string) bool {
				e := h.entries[doc]
				if e == nil || !e.idle() {
					return false
				}
				ids = h.eligible(v, e, s, now, h.cfg.BatchSize)
				return len(ids) > 0
			})
			if !ok {
				break
			}
			if h.startPrimary(v, h.entries[w.doc], s, ids, now) == noCapacity {
				break
			}
		}
	}
	// Idle documents take the first source in their order with capacity
	// and queue on the eligible sources without.
	for _, e := range entries {
		if h.entries[e.doc] == e && e.idle() {
			h.place(v, e, now)
		}
	}
	// A primary that has run HedgeAfter may get one hedge.
	for _, e := range entries {
		if h.entries[e.doc] == e && h.hedgeDue(e, now) {
			h.hedge(v, e, now)
		}
	}
	return h.wakeAt(now)
}

type startResult int

const (
	started startResult = iota
	noCapacity
	allBusy
)

// place routes an idle document (the main path): it starts on the
// first source of its order that has capacity, queues on every other
// eligible source that has none, and ends the pass when no source has
// anything left to ask.
func (h *Hunt) place(v view, e *entry, now time.Time) {
	running, waiting := false, false
	for _, s := range v.orderFor(e) {
		ids := h.eligible(v, e, s, now, h.cfg.BatchSize)
		if len(ids) == 0 {
			if t := h.throttles[s.key]; t != nil {
				t.remove(e.doc)
			}
			continue
		}
		if !running {
			switch h.startPrimary(v, e, s, ids, now) {
			case started:
				running = true
				continue
			case allBusy:
				continue
			}
		}
		// A source without a throttle yet has never been asked: it has
		// capacity, and the throttle is only created when used.
		if t := h.throttles[s.key]; t != nil && !t.hasCapacity(now) {
			t.enqueue(e.doc, now)
			waiting = true
		}
	}
	if !running && !waiting && len(e.busy) == 0 && e.idle() {
		h.endPass(e, now)
	}
}

func (h *Hunt) endPass(e *entry, now time.Time) {
	for _, t := range h.throttles {
		t.remove(e.doc)
	}
	e.endPass(now, h.cfg)
	missing := slices.Clone(e.order)
	if h.cfg.Once {
		h.log.Info("hunt pass incomplete, not retried", "doc", e.doc, "chunks", len(missing))
		h.queue(Event{Kind: EventPassEnded, Doc: e.doc, Attempt: e.attempts, Missing: missing})
		h.removeLocked(e.doc, "single pass ended")
		return
	}
	h.log.Info("hunt pass incomplete", "doc", e.doc, "attempt", e.attempts, "chunks", len(e.needed), "next", e.next.Sub(now))
	h.queue(Event{Kind: EventPassEnded, Doc: e.doc, Attempt: e.attempts, Missing: missing, Next: e.next.Sub(now)})
}

// startPrimary reserves a permit of s (checked and reserved atomically),
// then the ids on the wire, and starts the request. Ids another party
// has on the wire become busy for e until their flight lands.
func (h *Hunt) startPrimary(v view, e *entry, s *source, ids []engine.ChunkID, now time.Time) startResult {
	t := h.throttle(s.key)
	p, ok := t.tryAcquire(now)
	if !ok {
		return noCapacity
	}
	doc := e.doc
	fl, busy := h.co.Reserve(ids, func(id engine.ChunkID) { h.landed(doc, id) })
	for _, id := range busy {
		e.busy[id] = struct{}{}
	}
	if len(fl.IDs()) == 0 {
		p.cancel()
		return allBusy
	}
	w := &wave{flight: fl, carried: make(map[engine.ChunkID]int)}
	w.claim = h.co.Claim(fl.IDs(), fetch.ClaimOptions{})
	for _, id := range fl.IDs() {
		w.carried[id] = 1
	}
	h.launch(v, e, s, fl.IDs(), p, w, now, e.idleSince, false)
	return started
}

// launch starts request a of e to s; since is when e began wanting it
// (for the per-source wait).
func (h *Hunt) launch(v view, e *entry, s *source, ids []engine.ChunkID, p *permit, w *wave, now, since time.Time, hedge bool) {
	fp, hasFP := v.fp[s.key]
	a := &attempt{e: e, src: s, ids: ids, permit: p, w: w, start: now, hedge: hedge, fp: fp, memo: hasFP}
	for _, id := range ids {
		e.markAsked(s.key, id)
	}
	if len(e.running) == 0 {
		e.hedged = false
	}
	e.running = append(e.running, a)
	st := h.stats.Sources[s.key]
	st.Requests++
	st.MaxWait = max(st.MaxWait, now.Sub(since))
	h.stats.Sources[s.key] = st
	if t := h.throttles[s.key]; t != nil && len(h.eligible(v, e, s, now, 1)) == 0 {
		t.remove(e.doc)
	}
	h.log.Debug("hunt request", "doc", e.doc, "source", s.key, "chunks", len(ids), "hedge", hedge)
	h.wg.Add(1)
	go h.do(a)
}

func (h *Hunt) hedgeDue(e *entry, now time.Time) bool {
	return len(e.running) == 1 && !e.hedged && !e.running[0].hedge && !now.Before(e.running[0].start.Add(h.cfg.HedgeAfter))
}

// hedge starts one request for the primary's ids to the first source in
// e's order on another throttle key that has capacity. It holds its own
// permit and shares the primary's wire reservation.
func (h *Hunt) hedge(v view, e *entry, now time.Time) {
	prim := e.running[0]
	for _, s := range v.orderFor(e) {
		if s.key == prim.src.key {
			continue
		}
		var ids []engine.ChunkID
		for _, id := range h.eligible(v, e, s, now, len(e.order)) {
			if prim.w.carried[id] > 0 {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			continue
		}
		p, ok := h.throttle(s.key).tryAcquire(now)
		if !ok {
			continue
		}
		for _, id := range ids {
			prim.w.carried[id]++
		}
		e.hedged = true
		h.stats.Hedges++
		h.launch(v, e, s, ids, p, prim.w, now, prim.start.Add(h.cfg.HedgeAfter), true)
		return
	}
}

// wakeAt is the earliest future instant the driver must act without a
// trigger: a pass that becomes due, a hedge that becomes due, or a queued
// source whose rate window frees (the reference had no such wake-up and
// stalled until an unrelated event).
func (h *Hunt) wakeAt(now time.Time) time.Time {
	var wake time.Time
	at := func(t time.Time) {
		if t.After(now) && (wake.IsZero() || t.Before(wake)) {
			wake = t
		}
	}
	for _, e := range h.list {
		if !e.inPass && len(e.needed) > 0 {
			at(e.next)
		}
		if len(e.running) == 1 && !e.hedged && !e.running[0].hedge {
			at(e.running[0].start.Add(h.cfg.HedgeAfter))
		}
	}
	for _, k := range h.keys {
		if t := h.throttles[k]; t != nil && len(t.queued()) > 0 {
			at(t.windowFreeAt(now))
		}
	}
	return wake
}

// do runs one request and persists what it found.
func (h *Hunt) do(a *attempt) {
	defer h.wg.Done()
	res, err := a.src.src.FetchChunks(h.ctx, a.ids)
	var found []engine.Chunk
	var missing []engine.ChunkID
	if err == nil {
		found, missing = validate(a.ids, res)
		if len(found) > 0 {
			if perr := h.local.PutChunks(h.ctx, found); perr != nil {
				// Not persisted is not found: the attempt failed and the
				// document backs off like after a failed request.
				err = &engine.Error{Op: "hunt: persist found chunks", Stage: engine.StageStorage, Err: perr}
				found, missing = nil, nil
			}
		}
	}
	h.finish(a, found, missing, err)
}

// validate keeps the requested chunks (first occurrence) and the
// requested ids answered missing; a requested id in neither is ignored
// (neither found nor memoized).
func validate(ids []engine.ChunkID, res engine.FetchResult) ([]engine.Chunk, []engine.ChunkID) {
	req := make(map[engine.ChunkID]bool, len(ids))
	for _, id := range ids {
		req[id] = false
	}
	var found []engine.Chunk
	for _, c := range res.Found {
		if seen, ok := req[c.ID]; ok && !seen {
			req[c.ID] = true
			found = append(found, c)
		}
	}
	var missing []engine.ChunkID
	for _, id := range res.Missing {
		if seen, ok := req[id]; ok && !seen {
			req[id] = true
			missing = append(missing, id)
		}
	}
	return found, missing
}

// finish records an answer: permit released, found ids dropped from every
// document, misses memoized, ids landed, claims settled, then the
// delivery reported and the driver triggered.
func (h *Hunt) finish(a *attempt, found []engine.Chunk, missing []engine.ChunkID, err error) {
	h.mu.Lock()
	now := time.Now()
	a.permit.release()
	e, key, w := a.e, a.src.key, a.w
	if i := slices.Index(e.running, a); i >= 0 {
		e.running = slices.Delete(e.running, i, i+1)
	}
	if len(e.running) == 0 {
		e.idleSince = now
	}
	st := h.stats.Sources[key]
	canceled := err != nil && h.ctx.Err() != nil
	switch {
	case canceled:
		st.Canceled++
	case err != nil:
		st.Failed++
	case len(found) > 0:
		st.Found++
	default:
		st.Missing++
	}
	st.Chunks += uint64(len(found))
	h.stats.Sources[key] = st
	if err != nil && !canceled {
		stage := engine.StageTransport
		if ee, ok := errors.AsType[*engine.Error](err); ok && ee.Stage != "" {
			stage = ee.Stage
		}
		h.log.Warn("hunt request failed", "doc", e.doc, "source", key, "chunks", len(a.ids), "stage", stage, "err", err)
		h.queue(Event{Kind: EventRequestFailed, Doc: e.doc, Source: key, IDs: a.ids, Err: err})
	}
	if !canceled {
		h.queue(Event{Kind: EventAnswered, Doc: e.doc, Source: key, IDs: a.ids, Found: len(found), Err: err})
	}
	if err == nil && a.memo {
		if cur, ok := h.sources[key]; ok && cur == a.src {
			h.memo.add(key, a.fp, missing, now)
		}
	}
	ids := make([]engine.ChunkID, len(found))
	for i, c := range found {
		ids[i] = c.ID
	}
	h.arrived(ids)
	var land []engine.ChunkID
	for _, id := range a.ids {
		if w.carried[id] > 0 {
			w.carried[id]--
			if w.carried[id] == 0 {
				land = append(land, id)
			}
		}
	}
	done := true
	for _, n := range w.carried {
		if n > 0 {
			done = false
			break
		}
	}
	h.mu.Unlock()

	for _, c := range found {
		w.claim.Settle(fetch.Event{ID: c.ID, Kind: fetch.EventDelivered, Chunk: c})
	}
	if done {
		w.claim.Release(ErrMissed)
	}
	w.flight.Land(land...)
	if len(ids) > 0 && h.onDelivered != nil {
		h.onDelivered(ids)
	}
	h.flush()
	h.trigger()
}

// arrived drops ids that are local now from every document; a document
// left with nothing missing is complete.
func (h *Hunt) arrived(ids []engine.ChunkID) {
	if len(ids) == 0 {
		return
	}
	for _, e := range slices.Clone(h.list) {
		dropped := false
		for _, id := range ids {
			if e.drop(id) {
				dropped = true
			}
		}
		if dropped && len(e.needed) == 0 {
			h.removeLocked(e.doc, "complete")
			h.stats.Completed++
			h.log.Info("hunt complete", "doc", e.doc, "attempt", e.attempts)
			h.queue(Event{Kind: EventCompleted, Doc: e.doc, Attempt: e.attempts})
		}
	}
}

// landed is the wire registry's callback: another party's flight of id
// ended. e rechecks the local store for it before asking anyone.
func (h *Hunt) landed(doc string, id engine.ChunkID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.entries[doc]
	if e == nil || h.closed {
		return
	}
	if _, ok := e.busy[id]; ok {
		h.check(e, []engine.ChunkID{id})
	}
}

// check queues ids for a local recheck of e; one checker goroutine per
// document drains them. Under the lock.
func (h *Hunt) check(e *entry, ids []engine.ChunkID) {
	e.toCheck = append(e.toCheck, ids...)
	if e.checkRunning || h.closed {
		return
	}
	e.checkRunning = true
	h.wg.Add(1)
	go h.checker(e)
}

// passCheck is the local recheck at the start of the passes of due: ids
// that became local by any path since Enqueue are not hunted.
func (h *Hunt) passCheck(due []*entry) {
	defer h.wg.Done()
	h.mu.Lock()
	var ids []engine.ChunkID
	seen := make(map[engine.ChunkID]struct{})
	for _, e := range due {
		for _, id := range e.order {
			if _, ok := seen[id]; !ok {
				seen[id] = struct{}{}
				ids = append(ids, id)
			}
		}
	}
	h.mu.Unlock()
	got, err := h.local.GetChunks(h.ctx, ids)
	h.mu.Lock()
	if err != nil && h.ctx.Err() == nil {
		h.log.Warn("hunt: local recheck failed", "chunks", len(ids), "stage", engine.StageStorage, "err", err)
	}
	var local []engine.ChunkID
	for _, id := range ids {
		if _, ok := got[id]; ok {
			local = append(local, id)
		}
	}
	h.arrived(local)
	now := time.Now()
	for _, e := range due {
		e.checking = false
		e.idleSince = now
	}
	h.mu.Unlock()
	if len(local) > 0 && h.onDelivered != nil {
		h.onDelivered(local)
	}
	h.flush()
	h.trigger()
}

func (h *Hunt) checker(e *entry) {
	defer h.wg.Done()
	for {
		h.mu.Lock()
		ids := e.toCheck
		e.toCheck = nil
		if len(ids) == 0 || h.closed {
			e.checkRunning = false
			h.mu.Unlock()
			h.trigger()
			return
		}
		h.mu.Unlock()
		got, err := h.local.GetChunks(h.ctx, ids)
		h.mu.Lock()
		if err != nil && h.ctx.Err() == nil {
			h.log.Warn("hunt: local recheck failed", "doc", e.doc, "chunks", len(ids), "stage", engine.StageStorage, "err", err)
		}
		var local []engine.ChunkID
		for _, id := range ids {
			if _, ok := got[id]; ok {
				local = append(local, id)
			}
			if e.busy != nil {
				delete(e.busy, id)
			}
		}
		sort.Strings(local)
		h.arrived(local)
		h.mu.Unlock()
		if len(local) > 0 && h.onDelivered != nil {
			h.onDelivered(local)
		}
		h.flush()
	}
}

// Stats returns one consistent snapshot.
func (h *Hunt) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	s := h.stats
	s.Sources = make(map[string]SourceStats, len(h.stats.Sources))
	for k, v := range h.stats.Sources {
		if t := h.throttles[k]; t != nil {
			v.InFlight, v.InWindow = t.load(now)
			v.Queued = len(t.queued())
		}
		s.Sources[k] = v
	}
	s.Docs = len(h.list)
	for _, e := range h.list {
		switch {
		case e.inPass:
			s.Hunting++
		default:
			s.Waiting++
		}
		s.InFlight += len(e.running)
	}
	s.MemoSources = h.memo.len()
	return s
}
