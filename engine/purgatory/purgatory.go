package purgatory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/hold"
)

// Hunter finds missing chunks across sources; *hunt.Hunt implements it.
// Its methods must not block for long and must not call Hold or Retry;
// calling ChunksArrived from them is allowed (it only queues).
type Hunter interface {
	// Enqueue schedules a hunt for doc: needed replaces the previous set;
	// origin is the source the metadata came from ("" = client push).
	// For a known doc the attempt count resets and the next attempt may
	// only move earlier.
	Enqueue(doc string, needed []engine.ChunkID, origin string, delay time.Duration)
	// Remove stops hunting doc.
	Remove(doc string)
}

// Deps are the ports of a Purgatory.
type Deps struct {
	// Local answers which chunks are local. Required.
	Local engine.LocalChunks
	// Hunter hunts the missing chunks of held documents; nil means no
	// active hunting (documents are released only by ChunksArrived).
	Hunter Hunter
	// Release verifies (decrypt, size: livesync.ReadFile does both),
	// materialises the revision and emits its file event. Required. It
	// is called for one revision at a time, never concurrently, and must
	// not call Hold or Retry. Its error decides the revision's fate:
	// engine.ErrDecrypt, ErrSizeMismatch, ErrMalformed or ErrUnsupported
	// reject it (dropped, remembered, never served); ErrMissingChunk
	// keeps it held after a local recheck; ErrNotFound drops it (the
	// store no longer has it); any other error keeps it held and the
	// release is retried after Config.ReleaseRetry.
	Release func(ctx context.Context, doc, rev string) error
	// ReleaseMany, if set, releases one revision of each of several
	// documents at once, as Release would each (in one store
	// transaction, say), and returns each one's error in revs order. It
	// is used when arrivals make several documents complete at once,
	// with Release's rules: never concurrently, never calling Hold or
	// Retry.
	ReleaseMany func(ctx context.Context, revs []engine.DocRev) []error
}

// State is the state of a held document.
type State uint8

// States of a held document.
const (
	// Active: hunted by the Hunter.
	Active State = iota + 1
	// SoftExpired: not hunted any more, still released at once when its
	// chunks arrive; a new revision or Retry makes it Active again.
	SoftExpired
)

func (s State) String() string {
	switch s {
	case Active:
		return "active"
	case SoftExpired:
		return "soft-expired"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// HeldDoc describes one held document, for /status and the CLI.
type HeldDoc struct {
	Doc       string
	Revisions []string // held revisions, newest first
	Missing   int      // distinct chunk ids missing over all held revisions
	State     State
	Since     time.Time // first held
	Deadline  time.Time // end of the current state: soft expiry when Active, expiry when SoftExpired
	Reason    string    // why it is still held
	Source    string    // source of the newest held revision ("" = client push)
}

// Stats are the purgatory's gauges and counters.
type Stats struct {
	Active      int // gauge: documents held and hunted
	SoftExpired int // gauge: documents held, not hunted
	Remembered  int // gauge: expired or rejected revisions remembered

	Releases       uint64 // revisions released
	SoftExpiries   uint64 // documents whose active hunting ended
	Expiries       uint64 // documents dropped after the soft expiry
	Revivals       uint64 // soft-expired documents made active again
	VerifyFailures uint64 // revisions rejected by Deps.Release's verification
	ReleaseErrors  uint64 // releases that failed for a non-permanent reason
	Superseded     uint64 // revisions dropped or refused because a newer one was released
}

// Reasons a document is held, as reported by Held and in logs.
const (
	ReasonMissing       = "missing chunks"
	ReasonReleaseFailed = "release failed"
	ReasonNotFound      = "chunks not found"
)

type heldRev struct {
	rev     string
	source  string
	chunks  []engine.ChunkID // sorted, unique; immutable
	missing map[engine.ChunkID]struct{}
}

type entry struct {
	doc         string
	revs        []*heldRev // newest first
	state       State
	since       time.Time
	activeUntil time.Time // Active: when active hunting ends
	softUntil   time.Time // SoftExpired: when the document is dropped
	retryAt     time.Time // non-zero after a release failed for a non-permanent reason
	reason      string
	hunted      bool // Enqueue called and not Removed since
	waited      bool // it held a revision beyond one Hold call (then its released revision is remembered)
}

type memKey struct{ doc, rev string }

type memory struct {
	until    time.Time
	rejected bool // verification failed; otherwise expired
}

type mark struct {
	rev   string
	until time.Time
}

type counters struct {
	releases, softExpiries, expiries, revivals, verifyFailures, releaseErrors, superseded uint64
}

// Purgatory holds metadata revisions whose chunks are not all local, and
// releases them (late binding) when they are. It is safe for concurrent
// use. See the package documentation for the life of a held document.
type Purgatory struct {
	cfg  Config
	deps Deps
	log  *slog.Logger

	// relMu serialises releases and expiry, so that the release order of
	// one document is total. Lock order: relMu, then mu; inMu is a leaf.
	relMu sync.Mutex

	mu      sync.Mutex
	entries map[string]*entry
	byChunk map[engine.ChunkID][]string // missing chunk -> docs (a slice: usually one, and far smaller than a map per chunk)
	mem     map[memKey]memory
	marks   map[string]mark // doc -> last released revision
	n       counters
	closed  bool
	// due: no deadline (an entry's, a retry's, a memory's or a mark's)
	// is before it, zero meaning none, when dueKnown; set by a look at
	// every entry and lowered by each deadline set since.
	due      time.Time
	dueKnown bool

	inMu    sync.Mutex
	inbox   []engine.ChunkID
	stopped atomic.Bool // set by Close; ChunksArrived then drops ids

	kick   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Purgatory and starts its driver goroutine (timers and
// arrivals). Close stops it.
func New(cfg Config, deps Deps) (*Purgatory, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Local == nil || deps.Release == nil {
		return nil, errors.New("purgatory: Deps.Local and Deps.Release are required")
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	p := &Purgatory{
		cfg: cfg, deps: deps, log: cfg.Logger,
		entries: map[string]*entry{},
		byChunk: map[engine.ChunkID][]string{},
		mem:     map[memKey]memory{},
		marks:   map[string]mark{},
		kick:    make(chan struct{}, 1),
		ctx:     ctx, cancel: cancel,
		done: make(chan struct{}),
	}
	go p.run()
	return p, nil
}

// Close stops the driver and waits for it. Hold and Retry fail with
// ErrClosed afterwards. Close does not touch the Hunter.
func (p *Purgatory) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.stopped.Store(true)
	p.cancel()
	<-p.done
}

// Hold takes a metadata revision that arrived from source (ClientPush
// for a client's push, else the ThrottleKey of the source replication
// pulled it from). If its chunks are all local it is released at once
// and never held. Otherwise it joins its document's entry and is not
// served until its chunks arrive; the document is (re)enqueued in the
// Hunter with the source's delay and gets a fresh active period. A
// revision remembered as expired returns PreviouslyExpired without any
// hunting. The error is a *ReleaseError when a release failed, or the
// local store's error (then nothing changed).
func (p *Purgatory) Hold(ctx context.Context, r hold.Revision, source string) (hold.Outcome, error) {
	return p.hold(ctx, r, source, false)
}

// Retry is a user's explicit retry: like Hold, but it bypasses the
// memory of expired and rejected revisions, rechecks the local store and
// revives the document even if the revision is already held: active
// again for Config.ActiveFor and enqueued with no delay. A revision not
// newer than a released one stays Superseded.
func (p *Purgatory) Retry(ctx context.Context, r hold.Revision, source string) (hold.Outcome, error) {
	return p.hold(ctx, r, source, true)
}

// ChunksArrived tells the purgatory that chunks became local by any path
// (replication, a push, the hunt, a file open). It only queues the ids
// and wakes the driver, which releases every document that became
// complete. Safe to call from any goroutine, including the Hunter's.
func (p *Purgatory) ChunksArrived(ids []engine.ChunkID) {
	if len(ids) == 0 || p.stopped.Load() {
		return
	}
	p.inMu.Lock()
	p.inbox = append(p.inbox, ids...)
	p.inMu.Unlock()
	p.wake()
}

// Settle does at once, on the caller's goroutine, what the driver does
// when it wakes: it applies every arrival announced by ChunksArrived so
// far (releasing the documents that became complete), retries releases
// that are due and moves documents whose deadlines passed. It returns
// when that work is done, whether it or the driver did it. A process
// that ends with its request (a Cloudflare Worker) settles before it
// answers, so the releases the request caused are written by then. After
// Close it returns ErrClosed.
func (p *Purgatory) Settle(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.stopped.Load() {
		return ErrClosed
	}
	p.tick()
	return nil
}

// SettleArriving is Settle for a writer about to store the chunks ids
// (not stored yet): their arrival is applied with every one announced
// so far, and the documents that became complete are released at once,
// with ctx passed to Deps.Release and Deps.ReleaseMany (the driver uses
// its own). So a releaser that finds in ctx the write of those chunks
// can store them and the released revisions together; one that does
// not finds them missing and the documents stay held. The writer
// announces the chunks again with ChunksArrived once they are stored,
// for the revisions held meanwhile. After Close it returns ErrClosed.
func (p *Purgatory) SettleArriving(ctx context.Context, ids []engine.ChunkID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.stopped.Load() {
		return ErrClosed
	}
	p.tickWith(context.WithoutCancel(ctx), ids)
	return nil
}

func (p *Purgatory) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// hold is Hold and Retry: it answers at once from what the purgatory
// remembers, else registers the revision with the chunks it lacks, has
// them hunted, and settles the document (releasing what is complete).
func (p *Purgatory) hold(ctx context.Context, r hold.Revision, source string, retry bool) (hold.Outcome, error) {
	if r.Doc == "" || r.Rev == "" {
		return 0, fmt.Errorf("purgatory: revision without document id or rev: %w", engine.ErrMalformed)
	}
	known, out, err := p.recall(r, retry)
	if out != 0 || err != nil {
		return out, err
	}
	chunks := uniqueChunks(r)
	if known != nil {
		chunks = known.chunks
	}
	missing, err := p.missing(ctx, chunks)
	if err != nil {
		return 0, err
	}
	e, hr, isNew, out, err := p.register(r, source, chunks, missing)
	if out != 0 || err != nil {
		return out, err
	}
	if len(missing) > 0 {
		p.recheck(ctx, e, hr, r.Rev, missing)
	}
	p.schedule(e, hr, r.Rev, source, isNew, retry)
	p.wake() // the driver's next deadline may have changed
	return p.settled(ctx, r)
}

// recall answers a revision the purgatory remembers (expired, rejected,
// superseded, or already held when not retried) with its outcome; else
// it returns the held revision of that rev, if any (nil: a new one).
func (p *Purgatory) recall(r hold.Revision, retry bool) (*heldRev, hold.Outcome, error) {
	key := memKey{r.Doc, r.Rev}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, 0, ErrClosed
	}
	if m, ok := p.mem[key]; ok && now.Before(m.until) {
		if !retry {
			if m.rejected {
				return nil, hold.Rejected, nil
			}
			return nil, hold.PreviouslyExpired, nil
		}
		delete(p.mem, key)
	}
	if p.supersededLocked(r.Doc, r.Rev, now) {
		p.n.superseded++
		return nil, hold.Superseded, nil
	}
	var known *heldRev
	if e := p.entries[r.Doc]; e != nil {
		known = e.find(r.Rev)
	}
	if known != nil && !retry {
		return nil, hold.Held, nil
	}
	return known, 0, nil
}

// register records the revision in its document's entry (made if new)
// with the chunks it lacks, unless a release of a newer revision happened
// since recall (Superseded).
func (p *Purgatory) register(r hold.Revision, source string, chunks, missing []engine.ChunkID) (e *entry, hr *heldRev, isNew bool, out hold.Outcome, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil, false, 0, ErrClosed
	}
	now := time.Now()
	if p.supersededLocked(r.Doc, r.Rev, now) { // a release happened meanwhile
		p.n.superseded++
		return nil, nil, false, hold.Superseded, nil
	}
	e = p.entries[r.Doc]
	if e == nil {
		e = &entry{doc: r.Doc, state: Active, since: now, activeUntil: now.Add(p.cfg.ActiveFor), reason: ReasonMissing}
		p.entries[r.Doc] = e
		p.deadlineLocked(e.activeUntil)
	}
	hr = e.find(r.Rev)
	isNew = hr == nil
	if isNew {
		hr = &heldRev{rev: r.Rev, source: source, chunks: chunks, missing: map[engine.ChunkID]struct{}{}}
		e.insert(hr)
	} else {
		p.unindex(e, hr)
		clear(hr.missing)
	}
	for _, id := range missing {
		hr.missing[id] = struct{}{}
	}
	if len(missing) > 0 {
		e.waited = true
	}
	p.index(e, hr)
	return e, hr, isNew, 0, nil
}

// recheck reads the missing chunks again: a chunk persisted after the
// first read may have been announced (and applied) before hr was
// registered.
func (p *Purgatory) recheck(ctx context.Context, e *entry, hr *heldRev, rev string, missing []engine.ChunkID) {
	still, err := p.missing(ctx, missing)
	if err != nil || len(still) >= len(missing) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.find(rev) != hr {
		return
	}
	keep := map[engine.ChunkID]struct{}{}
	for _, id := range still {
		keep[id] = struct{}{}
	}
	p.unindex(e, hr)
	maps.DeleteFunc(hr.missing, func(id engine.ChunkID, _ struct{}) bool { _, ok := keep[id]; return !ok })
	p.index(e, hr)
}

// schedule makes a document with a new (or retried) incomplete revision
// active again and enqueues its hunt: after the source's delay, or at
// once for a retry.
func (p *Purgatory) schedule(e *entry, hr *heldRev, rev, source string, isNew, retry bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.find(rev) != hr || len(hr.missing) == 0 || !(isNew || retry) {
		return
	}
	now := time.Now()
	e.waited = true
	e.reason = ReasonMissing
	if e.state == SoftExpired {
		p.n.revivals++
		p.log.Info("purgatory: document revived", "doc", e.doc, "rev", rev, "source", sourceName(source), "retry", retry)
	} else if isNew {
		p.log.Info("purgatory: holding revision", "doc", e.doc, "rev", rev, "source", sourceName(source), "missing", len(hr.missing))
	}
	e.state = Active
	e.activeUntil = now.Add(p.cfg.ActiveFor)
	e.softUntil = time.Time{}
	p.deadlineLocked(e.activeUntil)
	delay := p.cfg.delayFor(source)
	if retry {
		delay = 0
	}
	p.enqueueLocked(e, delay)
}

// settled settles r's document and returns what became of r: its own
// result, or, when the driver settled it meanwhile (an arrival between
// the reads), what the purgatory now knows of it.
func (p *Purgatory) settled(ctx context.Context, r hold.Revision) (hold.Outcome, error) {
	p.relMu.Lock()
	results := p.settle(ctx, r.Doc)
	p.relMu.Unlock()
	for _, res := range results {
		if res.rev == r.Rev {
			return res.outcome, res.err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.entries[r.Doc]; e != nil && e.find(r.Rev) != nil {
		return hold.Held, nil
	}
	if m, ok := p.marks[r.Doc]; ok && m.rev == r.Rev {
		return hold.Released, nil
	}
	if m, ok := p.mem[memKey{r.Doc, r.Rev}]; ok && m.rejected {
		return hold.Rejected, nil
	}
	return hold.Superseded, nil
}

// missing returns the ids among ids (sorted, unique) that are not local.
func (p *Purgatory) missing(ctx context.Context, ids []engine.ChunkID) ([]engine.ChunkID, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	got, err := p.deps.Local.GetChunks(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("purgatory: reading local chunks: %w", err)
	}
	var out []engine.ChunkID
	for _, id := range ids {
		if _, ok := got[id]; !ok {
			out = append(out, id)
		}
	}
	return out, nil
}

func (p *Purgatory) supersededLocked(doc, rev string, now time.Time) bool {
	m, ok := p.marks[doc]
	return ok && now.Before(m.until) && CompareRevs(rev, m.rev) <= 0
}

type relResult struct {
	rev     string
	outcome hold.Outcome
	err     error
}

// settle releases the newest complete revision of doc, again and again
// while one qualifies (an older complete revision can qualify after the
// newest one failed verification). The caller holds relMu.
func (p *Purgatory) settle(ctx context.Context, doc string) []relResult {
	var res []relResult
	for {
		e, hr := p.candidate(doc)
		if hr == nil {
			return res
		}
		err := p.deps.Release(ctx, doc, hr.rev)
		r, stop := p.released(ctx, e, hr, err)
		res = append(res, r...)
		if stop {
			return res
		}
	}
}

// candidate returns doc's entry and its revision to release now, if any.
func (p *Purgatory) candidate(doc string) (*entry, *heldRev) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[doc]
	if e == nil {
		return nil, nil
	}
	return e, e.candidate(time.Now())
}

// settleMany settles docs (sorted): with Deps.ReleaseMany, the candidate
// revisions of them all are released in one call, then each document is
// settled on its own for what is left (an older complete revision after
// a rejected one); without it, one settle each. The caller holds relMu.
func (p *Purgatory) settleMany(ctx context.Context, docs []string) {
	if p.deps.ReleaseMany == nil || len(docs) < 2 {
		for _, doc := range docs {
			p.settle(ctx, doc)
		}
		return
	}
	type cand struct {
		e  *entry
		hr *heldRev
	}
	var cands []cand
	var revs []engine.DocRev
	for _, doc := range docs {
		if e, hr := p.candidate(doc); hr != nil {
			cands = append(cands, cand{e, hr})
			revs = append(revs, engine.DocRev{ID: doc, Rev: hr.rev})
		}
	}
	if len(revs) == 0 {
		return
	}
	errs := p.deps.ReleaseMany(ctx, revs)
	for i, c := range cands {
		var err error
		if i < len(errs) {
			err = errs[i]
		} else {
			err = errors.New("purgatory: ReleaseMany answered too few results")
		}
		if _, stop := p.released(ctx, c.e, c.hr, err); !stop {
			p.settle(ctx, c.e.doc)
		}
	}
}

// released records what the release of hr (doc's candidate) did, err
// being Deps.Release's answer, and reports whether settling doc stops
// there (a release failed and is retried later). The caller holds relMu.
func (p *Purgatory) released(ctx context.Context, e *entry, hr *heldRev, err error) (res []relResult, stop bool) {
	doc := e.doc
	class := classify(err)
	var recheck []engine.ChunkID
	if class == releaseMissing {
		var lerr error
		if recheck, lerr = p.missing(ctx, hr.chunks); lerr != nil || len(recheck) == 0 {
			class = releaseTransient
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if e.find(hr.rev) != hr { // cannot happen: revisions leave only under relMu
		return nil, false
	}
	src := sourceName(hr.source)
	switch class {
	case releaseOK:
		p.n.releases++
		res = append(res, relResult{hr.rev, hold.Released, nil})
		p.log.Info("purgatory: revision released", "doc", doc, "rev", hr.rev, "source", src)
		if e.waited || len(e.revs) > 1 {
			p.marks[doc] = mark{rev: hr.rev, until: now.Add(p.cfg.RememberExpired)}
			p.deadlineLocked(p.marks[doc].until)
		}
		for _, old := range slices.Clone(e.revs) {
			if CompareRevs(old.rev, hr.rev) <= 0 {
				if old != hr {
					p.n.superseded++
					res = append(res, relResult{old.rev, hold.Superseded, nil})
				}
				p.dropRev(e, old)
			}
		}
		p.afterDropLocked(e)
	case releaseRejected:
		p.n.verifyFailures++
		rerr := &ReleaseError{Doc: doc, Rev: hr.rev, Permanent: true, Err: err}
		res = append(res, relResult{hr.rev, hold.Rejected, rerr})
		p.log.Warn("purgatory: revision rejected", "doc", doc, "rev", hr.rev, "source", src, "reason", "verification failed", "err", err)
		p.mem[memKey{doc, hr.rev}] = memory{until: now.Add(p.cfg.RememberExpired), rejected: true}
		p.deadlineLocked(now.Add(p.cfg.RememberExpired))
		p.dropRev(e, hr)
		p.afterDropLocked(e)
	case releaseGone:
		res = append(res, relResult{hr.rev, hold.Dropped, nil})
		p.log.Info("purgatory: revision dropped", "doc", doc, "rev", hr.rev, "source", src, "reason", "not in store")
		p.dropRev(e, hr)
		p.afterDropLocked(e)
	case releaseMissing:
		p.unindex(e, hr)
		for _, id := range recheck {
			hr.missing[id] = struct{}{}
		}
		p.index(e, hr)
		e.waited = true
		e.reason = ReasonMissing
		p.log.Info("purgatory: release found chunks missing", "doc", doc, "rev", hr.rev, "source", src, "missing", len(recheck))
		if e.state == Active {
			p.enqueueLocked(e, p.cfg.PulledDelay)
		}
	default:
		p.n.releaseErrors++
		res = append(res, relResult{hr.rev, hold.Held, &ReleaseError{Doc: doc, Rev: hr.rev, Err: err}})
		p.log.Warn("purgatory: release failed", "doc", doc, "rev", hr.rev, "source", src, "reason", ReasonReleaseFailed, "err", err)
		e.waited = true
		e.reason = ReasonReleaseFailed
		e.retryAt = now.Add(p.cfg.ReleaseRetry)
		p.deadlineLocked(e.retryAt)
		p.wake()
		return res, true
	}
	return res, false
}

// afterDropLocked deletes an entry with no revisions left (and stops its
// hunt) or tells the Hunter the smaller needed set.
func (p *Purgatory) afterDropLocked(e *entry) {
	if len(e.revs) == 0 {
		delete(p.entries, e.doc)
		if e.hunted && p.deps.Hunter != nil {
			p.deps.Hunter.Remove(e.doc)
		}
		e.hunted = false
		return
	}
	if e.hunted {
		// Needed replaces the previous set; the Hunter also resets the
		// attempt count (a documented cost of keeping needed exact).
		p.enqueueLocked(e, p.cfg.delayFor(e.revs[0].source))
	}
}

// enqueueLocked hands the document's needed set to the Hunter.
func (p *Purgatory) enqueueLocked(e *entry, delay time.Duration) {
	needed := e.needed()
	if p.deps.Hunter == nil {
		return
	}
	if len(needed) == 0 { // only complete revisions left (a release to retry)
		if e.hunted {
			p.deps.Hunter.Remove(e.doc)
			e.hunted = false
		}
		return
	}
	p.deps.Hunter.Enqueue(e.doc, needed, e.revs[0].source, delay)
	e.hunted = true
}

func (p *Purgatory) index(e *entry, hr *heldRev) {
	for id := range hr.missing {
		if docs := p.byChunk[id]; !slices.Contains(docs, e.doc) {
			p.byChunk[id] = append(docs, e.doc)
		}
	}
}

// unindex removes hr's missing ids from the chunk index unless another
// revision of the same document still misses them.
func (p *Purgatory) unindex(e *entry, hr *heldRev) {
	for id := range hr.missing {
		other := false
		for _, o := range e.revs {
			if o != hr {
				if _, ok := o.missing[id]; ok {
					other = true
					break
				}
			}
		}
		if other {
			continue
		}
		if docs := slices.DeleteFunc(p.byChunk[id], func(d string) bool { return d == e.doc }); len(docs) > 0 {
			p.byChunk[id] = docs
		} else {
			delete(p.byChunk, id)
		}
	}
}

func (p *Purgatory) dropRev(e *entry, hr *heldRev) {
	p.unindex(e, hr)
	e.revs = slices.DeleteFunc(e.revs, func(x *heldRev) bool { return x == hr })
	if !slices.ContainsFunc(e.revs, func(x *heldRev) bool { return len(x.missing) == 0 }) {
		e.retryAt = time.Time{} // nothing left to retry
	}
}

func (e *entry) find(rev string) *heldRev {
	for _, hr := range e.revs {
		if hr.rev == rev {
			return hr
		}
	}
	return nil
}

// insert keeps revs sorted newest first.
func (e *entry) insert(hr *heldRev) {
	i, _ := slices.BinarySearchFunc(e.revs, hr.rev, func(x *heldRev, rev string) int { return -CompareRevs(x.rev, rev) })
	e.revs = slices.Insert(e.revs, i, hr)
}

// candidate is the newest complete revision, unless a failed release
// waits for its retry time.
func (e *entry) candidate(now time.Time) *heldRev {
	if !e.retryAt.IsZero() && now.Before(e.retryAt) {
		return nil
	}
	for _, hr := range e.revs {
		if len(hr.missing) == 0 {
			return hr
		}
	}
	return nil
}

// needed is the sorted union of the missing chunk ids of all revisions.
func (e *entry) needed() []engine.ChunkID {
	set := map[engine.ChunkID]struct{}{}
	for _, hr := range e.revs {
		for id := range hr.missing {
			set[id] = struct{}{}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func (e *entry) deadline() time.Time {
	if e.state == SoftExpired {
		return e.softUntil
	}
	return e.activeUntil
}

func sourceName(s string) string {
	if s == ClientPush {
		return "client"
	}
	return s
}

// Held lists the held documents, sorted by document id.
func (p *Purgatory) Held() []HeldDoc {
	out, _ := p.HeldFirst(-1)
	return out
}

// HeldFirst is Held bounded: at most limit documents, the first by
// document id (every one when limit is negative), and how many are held
// in all.
func (p *Purgatory) HeldFirst(limit int) (docs []HeldDoc, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	total = len(p.entries)
	if limit < 0 || limit > total {
		limit = total
	}
	out := make([]HeldDoc, 0, limit)
	for _, doc := range slices.Sorted(maps.Keys(p.entries))[:limit] {
		e := p.entries[doc]
		h := HeldDoc{Doc: doc, Missing: len(e.needed()), State: e.state, Since: e.since,
			Deadline: e.deadline(), Reason: e.reason, Source: e.revs[0].source}
		for _, hr := range e.revs {
			h.Revisions = append(h.Revisions, hr.rev)
		}
		out = append(out, h)
	}
	return out, total
}

// Stats returns the gauges and counters.
func (p *Purgatory) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{
		Releases: p.n.releases, SoftExpiries: p.n.softExpiries, Expiries: p.n.expiries, Revivals: p.n.revivals,
		VerifyFailures: p.n.verifyFailures, ReleaseErrors: p.n.releaseErrors, Superseded: p.n.superseded,
		Remembered: len(p.mem),
	}
	for _, e := range p.entries {
		if e.state == SoftExpired {
			s.SoftExpired++
		} else {
			s.Active++
		}
	}
	return s
}
