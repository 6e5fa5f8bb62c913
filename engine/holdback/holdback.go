package holdback

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/purgatory"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Stats are the Store's gauges and counters, for /status and metrics.
type Stats struct {
	// Mode is the current Mode.
	Mode Mode
	// Held is a gauge: revisions in the holding area (held, or being
	// handed to the purgatory).
	Held int
	// Documents is a gauge: documents with revisions in the holding
	// area, which Config.MaxHeldDocuments bounds.
	Documents int
	// MaxHeldDocuments and MaxHeldPerOwner are the limits in force
	// (Config with its defaults).
	MaxHeldDocuments, MaxHeldPerOwner int
	// ChunkIDs is a gauge: the chunk ids the held revisions need (each
	// revision's distinct ids), which Config.MaxHeldChunkIDs bounds.
	ChunkIDs int
	// MaxHeldChunkIDs and MaxHeldChunkIDsPerOwner are the limits in
	// force (Config with its defaults).
	MaxHeldChunkIDs, MaxHeldChunkIDsPerOwner int
	// Refused counts metadata revisions refused because holding them
	// would have exceeded a limit (answered TooManyHeld).
	Refused uint64
	// HeldByOwner is a gauge: per owner (WithOwner), the documents held
	// that count against it; owners with none are absent. The caller
	// owns the map.
	HeldByOwner map[string]int
	// WrittenThrough counts metadata revisions written at once because
	// their chunks were present (stored already or in the same batch).
	WrittenThrough uint64
	// Holds counts metadata revisions held on arrival.
	Holds uint64
	// Released counts held revisions written to the inner store once
	// their chunks were present.
	Released uint64
	// Dropped counts held or pushed revisions dropped unserved:
	// superseded by a newer revision, expired, previously expired or
	// refused by the inner store.
	Dropped uint64
	// Unreadable counts metadata revisions written through unjudged
	// because their chunk list is encrypted and no passphrase is
	// configured.
	Unreadable uint64
	// Undecodable counts metadata revisions written through unjudged
	// because the codec could not decode them (a wrong passphrase,
	// malformed fields).
	Undecodable uint64
	// SaveErrors counts failed writes of the purgatory state, the index
	// or the pruning of the holding area (each is retried at the next
	// save).
	SaveErrors uint64
	// Purgatory are the purgatory core's gauges and counters.
	Purgatory purgatory.Stats
}

type counters struct {
	writtenThrough, holds, released, dropped, unreadable, undecodable, saveErrors, refused uint64
}

// hrev is a revision in the holding area. gen is 0 until the purgatory
// answered Held for it, then the value of Store.gen at that moment: the
// pruning only drops revisions the purgatory had accepted before it
// listed what it holds.
type hrev struct {
	gen uint64
	ids int // distinct chunk ids of the revision, counted in Store.ids
	// chunks are the revision's distinct chunk ids, when known (a
	// revision held by this process's hold), so that its release need
	// not read its body again to check them.
	chunks []engine.ChunkID
	known  bool
	// body is the revision as held, kept in memory (cached) so that its
	// release need not read it from the holding area (see
	// maxCachedBodies).
	body   heldBody
	cached bool
}

// Store is a store.Store that holds back pushed metadata revisions whose
// chunks are not stored: see the package documentation. It is safe for
// concurrent use.
type Store struct {
	cfg     Config
	log     *slog.Logger
	inner   store.Store
	codec   *livesync.Codec // never nil
	decrypt bool            // Deps.Codec was set
	p       *purgatory.Purgatory
	area    area
	locks   keyLocks

	// gate is held for reading by every write call and for writing by
	// Close, which so waits for writes in flight.
	gate   sync.RWMutex
	closed bool

	// mu guards the fields below. Lock order: a document's key lock,
	// then the purgatory's locks (through its methods), then mu; area.mu
	// and area.imu are leaves, and mu is never held while calling the
	// purgatory or the inner store.
	mu      sync.Mutex
	held    map[string]map[string]*hrev // doc -> rev -> state; a document is in it while it has a revision
	owners  map[string]string           // held doc -> the owner it counts against (none: not in it)
	owned   map[string]int              // owner -> documents in owners
	ids     int                         // chunk ids of the held revisions (hrev.ids summed)
	ownIDs  map[string]int              // owner -> ids of the revisions of its documents
	indexed map[string]struct{}         // documents the last index write listed; nil = unknown
	gen     uint64
	n       counters
	cached  int // bytes of the held bodies kept in memory (hrev.body)

	// rm are the holding-area removals of released revisions not
	// written yet (see removals).
	rm removals

	obfuscated atomic.Bool // no codec, and the latest judged metadata was unreadable

	// follower: another process saves the purgatory state of the shared
	// inner store (see sharing); this Store never writes it.
	follower atomic.Bool

	// savedKey is the content (contentKey) of the purgatory state the
	// inner store holds, as resume read it or save last wrote it; nil
	// when unknown. Only resume and save use it, never at once.
	savedKey []byte
	// restoredKey is savedKey as resume left it; never changed after.
	restoredKey []byte

	saveCancel context.CancelFunc
	saveDone   chan struct{}
	closeOnce  sync.Once
	closeErr   error
}

var _ store.Store = (*Store)(nil)

// New returns a Store over deps.Inner. It reads the holding area and the
// purgatory state the inner store keeps from an earlier run (timers
// continue with the downtime subtracted; held revisions saved after the
// last state save are held again), then starts the purgatory and the
// periodic save. On error the inner store is left open.
func New(cfg Config, deps Deps) (*Store, error) {
	return newStore(context.Background(), cfg, deps, sharing{})
}

// newStore is New, sharing the inner store with other processes as sh
// says; ctx bounds the reads of what the inner store keeps.
func newStore(ctx context.Context, cfg Config, deps Deps, sh sharing) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Inner == nil {
		return nil, errors.New("holdback: Deps.Inner is required")
	}
	cfg = cfg.withDefaults()
	codec := deps.Codec
	if codec == nil {
		var err error
		if codec, err = livesync.New(livesync.Config{}); err != nil {
			return nil, err
		}
	}
	s := &Store{
		cfg: cfg, log: cfg.Logger, inner: deps.Inner, codec: codec, decrypt: deps.Codec != nil,
		held: map[string]map[string]*hrev{}, owners: map[string]string{}, owned: map[string]int{}, ownIDs: map[string]int{},
	}
	s.area.inner, s.area.upd = areaStore(deps.Inner)
	if sh.shared {
		if s.area.upd == nil {
			return nil, errors.New("holdback: a store shared with other processes must be a store.LocalUpdater")
		}
		s.area.shared = true
		s.follower.Store(sh.follower)
	}
	p, err := purgatory.New(cfg.Purgatory, purgatory.Deps{Local: deps.Inner, Hunter: deps.Hunter,
		Release: s.release, ReleaseMany: s.releaseMany})
	if err != nil {
		return nil, err
	}
	s.p = p
	if err := s.resume(ctx); err != nil {
		p.Close()
		return nil, err
	}
	s.restoredKey = s.savedKey
	if sh.shared {
		s.forgetPhantoms()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.saveCancel, s.saveDone = cancel, make(chan struct{})
	go s.saver(ctx)
	return s, nil
}

// Close stops accepting writes, waits for those in flight, stops the
// purgatory (its Hunter is the caller's), saves the purgatory state if it
// changed and closes the inner store. Later calls return the first
// result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.gate.Lock()
		s.closed = true
		s.gate.Unlock()
		s.saveCancel()
		<-s.saveDone
		s.p.Close()
		s.save(context.Background())
		s.closeErr = s.inner.Close()
	})
	return s.closeErr
}

// enter admits a write call; the caller must call s.gate.RUnlock.
func (s *Store) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.gate.RLock()
	if s.closed {
		s.gate.RUnlock()
		return store.ErrClosed
	}
	return nil
}

// Mode says how metadata is judged now (see the Mode constants).
func (s *Store) Mode() Mode {
	switch {
	case s.decrypt:
		return ModeDecrypt
	case s.obfuscated.Load():
		return ModePassthroughObfuscated
	}
	return ModeReadable
}

// Held lists the held documents with their reasons (missing chunk count,
// state, since, deadline, source), sorted by document id, for /status.
func (s *Store) Held() []purgatory.HeldDoc { return s.p.Held() }

// HeldFirst lists at most limit held documents, the first by document
// id, as Held does, and how many are held in all: a bounded /status.
func (s *Store) HeldFirst(limit int) (docs []purgatory.HeldDoc, total int) {
	return s.p.HeldFirst(limit)
}

// Stats returns the gauges and counters.
func (s *Store) Stats() Stats {
	ps := s.p.Stats()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{
		Mode: s.Mode(), WrittenThrough: s.n.writtenThrough, Holds: s.n.holds, Released: s.n.released,
		Dropped: s.n.dropped, Unreadable: s.n.unreadable, Undecodable: s.n.undecodable,
		SaveErrors: s.n.saveErrors, Purgatory: ps,
		Documents: len(s.held), MaxHeldDocuments: s.cfg.MaxHeldDocuments, MaxHeldPerOwner: s.cfg.MaxHeldPerOwner,
		Refused: s.n.refused, HeldByOwner: maps.Clone(s.owned),
		ChunkIDs: s.ids, MaxHeldChunkIDs: s.cfg.MaxHeldChunkIDs, MaxHeldChunkIDsPerOwner: s.cfg.MaxHeldChunkIDsPerOwner,
	}
	for _, revs := range s.held {
		st.Held += len(revs)
	}
	return st
}

// ChunksArrived tells the Store that chunks were written to the inner
// store by another path (the hunt's Deps.OnDelivered, a bridge writing
// the inner store directly): held documents that became complete are
// released. Chunks written through the Store need no call.
func (s *Store) ChunksArrived(ids []engine.ChunkID) { s.p.ChunksArrived(ids) }

// Settle writes now the releases that arrivals so far have made due
// (see purgatory.Purgatory.Settle) and returns when they are written. A
// process that ends with its request calls it before answering.
func (s *Store) Settle(ctx context.Context) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.gate.RUnlock()
	return s.p.Settle(ctx)
}

// BulkDocs writes replicated revisions (new_edits=false) pushed by a
// client: BulkDocsFrom with purgatory.ClientPush.
func (s *Store) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	return s.BulkDocsFrom(ctx, purgatory.ClientPush, docs)
}

// BulkDocsFrom writes replicated revisions (new_edits=false) that came
// from source: purgatory.ClientPush for a client's push (first hunt
// after 3 minutes), else the throttle key of the upstream a replication
// pulled them from (first hunt after 500 ms). Chunks and documents that
// are not file metadata are written through, with every metadata
// revision whose chunks are stored or in docs, in one inner BulkDocs
// call; metadata revisions with chunks missing are kept in the holding
// area and handed to the purgatory, and answered like written ones
// ({id, rev}, no error), as CouchDB would; a metadata revision that
// would make one document more held than Config.MaxHeldDocuments, or
// than Config.MaxHeldPerOwner for the owner ctx names (WithOwner), is
// refused with Error TooManyHeld and the rest of docs is written as
// usual. Results are in docs order. An error means the call may have
// written part of docs; repeating it is safe.
func (s *Store) BulkDocsFrom(ctx context.Context, source string, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.gate.RUnlock()

	js := make([]judged, len(docs))
	inBatch := map[engine.ChunkID]struct{}{}
	for i, raw := range docs {
		js[i] = classify(s.codec, raw)
		switch js[i].kind {
		case kindChunk:
			inBatch[js[i].id] = struct{}{}
		case kindMeta:
			s.obfuscated.Store(false)
		case kindUnreadable:
			s.obfuscated.Store(true)
		}
	}
	// Chunks only ever appear, so reading them before taking the locks
	// is safe: a stale "missing" sends the revision to the purgatory,
	// which reads the store again.
	var ask []engine.ChunkID
	var noteIDs []string
	asked := map[engine.ChunkID]struct{}{}
	for _, j := range js {
		if j.note {
			noteIDs = append(noteIDs, j.id)
		}
		if j.kind != kindMeta {
			continue
		}
		for _, id := range j.r.Chunks {
			if _, ok := inBatch[id]; ok {
				continue
			}
			if _, ok := asked[id]; !ok {
				asked[id] = struct{}{}
				ask = append(ask, id)
			}
		}
	}
	have := map[engine.ChunkID]engine.Chunk{}
	if len(ask) > 0 {
		var err error
		if have, err = s.inner.GetChunks(ctx, ask); err != nil {
			return nil, err
		}
	}

	unlock := s.locks.lock(noteIDs)
	defer unlock()

	var through, slow []int
	slowDoc := map[string]bool{}
	for i, j := range js {
		switch {
		case !j.note:
			through = append(through, i)
		case j.kind == kindMeta && (slowDoc[j.id] || s.isHeld(j.id) || !complete(j.r, have, inBatch)):
			slowDoc[j.id] = true // later revisions of it in docs follow it through the purgatory
			js[i].missing = !complete(j.r, have, inBatch)
			slow = append(slow, i)
		case j.kind != kindMeta && (slowDoc[j.id] || s.isHeld(j.id)):
			// A revision of a held document that cannot be judged
			// (foreign, unreadable): it needs no chunk, but only the
			// purgatory may order it against the held ones.
			js[i].r = hold.Revision{Doc: j.id, Rev: j.rev}
			slow = append(slow, i)
		default:
			through = append(through, i)
		}
	}

	results := make([]engine.BulkDocResult, len(docs))
	if len(through) > 0 {
		carried := settles(ctx) && len(inBatch) > 0 && s.carries()
		if err := s.writeThrough(ctx, docs, js, through, results, carried); err != nil {
			return nil, err
		}
	}
	if len(slow) > 0 {
		if err := s.hold(ctx, source, Owner(ctx), docs, js, slow, results); err != nil {
			return nil, err
		}
	}
	if settles(ctx) && len(inBatch) > 0 {
		// The notes a client's chunks complete are released before the
		// client is answered (WithSettle): a pusher that has had its
		// last answer finds every note it completed served, by GET and
		// the feed.
		if err := s.p.Settle(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("holdback: releasing the notes completed by a push", "err", err)
		}
	}
	return results, nil
}

// complete reports whether every chunk of r is stored or in the batch.
func complete(r hold.Revision, have map[engine.ChunkID]engine.Chunk, inBatch map[engine.ChunkID]struct{}) bool {
	for _, id := range r.Chunks {
		if _, ok := have[id]; ok {
			continue
		}
		if _, ok := inBatch[id]; !ok {
			return false
		}
	}
	return true
}

// writeThrough writes docs[idx] to the inner store in one call and
// announces the chunks among them. With carried, the releases those
// chunks make due are written in the same call (see carry).
func (s *Store) writeThrough(ctx context.Context, docs []json.RawMessage, js []judged, idx []int, results []engine.BulkDocResult, carried bool) error {
	batch := make([]json.RawMessage, len(idx))
	for k, i := range idx {
		batch[k] = docs[i]
	}
	var res []engine.BulkDocResult
	var err error
	if carried {
		res, err = s.writeCarried(ctx, batch, js, idx)
	} else {
		res, err = s.inner.BulkDocs(ctx, batch)
	}
	if err != nil {
		return err
	}
	if len(res) != len(batch) {
		return &engine.Error{Op: "bulk docs", Stage: engine.StageStorage,
			Err: fmt.Errorf("holdback: the inner store answered %d results for %d documents", len(res), len(batch))}
	}
	var arrived []engine.ChunkID
	var c counters
	for k, i := range idx {
		results[i] = res[k]
		j := js[i]
		if res[k].Error != "" {
			continue
		}
		switch j.kind {
		case kindChunk:
			arrived = append(arrived, j.id)
		case kindMeta:
			c.writtenThrough++
		case kindUnreadable:
			c.unreadable++
		case kindUndecodable:
			c.undecodable++
			s.log.Warn("holdback: metadata written unjudged: cannot decode it", "doc", j.id, "rev", j.rev, "err", j.err)
		}
	}
	s.mu.Lock()
	s.n.writtenThrough += c.writtenThrough
	s.n.unreadable += c.unreadable
	s.n.undecodable += c.undecodable
	s.mu.Unlock()
	s.p.ChunksArrived(arrived)
	return nil
}

func (s *Store) isHeld(doc string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held[doc]) > 0
}

// hold keeps docs[idx] (metadata revisions under their documents' key
// locks) in the holding area, durably, then lets the purgatory decide:
// held, released at once (its chunks are there, or it is a newer
// revision of a held document) or dropped. A revision that would make
// its document held beyond a limit is refused instead (TooManyHeld).
func (s *Store) hold(ctx context.Context, source, owner string, docs []json.RawMessage, js []judged, idx []int, results []engine.BulkDocResult) error {
	var todo []int
	bodies := map[string]map[string]heldBody{}
	owners := map[string]string{}
	newDoc := false
	var refused []int
	s.mu.Lock()
	for _, i := range idx {
		j := js[i]
		revs := s.held[j.id]
		if revs == nil {
			if reason := s.fullLocked(owner); reason != "" {
				results[i] = engine.BulkDocResult{ID: j.id, Rev: j.rev, Error: TooManyHeld, Reason: reason}
				refused = append(refused, i)
				continue
			}
			revs = s.claimLocked(j.id, owner)
		}
		if revs[j.rev] != nil {
			results[i] = engine.BulkDocResult{ID: j.id, Rev: j.rev}
			continue // held already: the client sent it again
		}
		n := distinct(j.r.Chunks)
		if reason := s.tooManyIDsLocked(j.id, n); j.missing && reason != "" { // a complete revision releases the note
			results[i] = engine.BulkDocResult{ID: j.id, Rev: j.rev, Error: TooManyHeld, Reason: reason}
			refused = append(refused, i)
			if len(revs) == 0 {
				s.unclaimLocked(j.id)
			}
			continue
		}
		if n := len(revs); j.missing && n >= s.cfg.MaxHeldRevisions {
			results[i] = engine.BulkDocResult{ID: j.id, Rev: j.rev, Error: TooManyHeld, Reason: fmt.Sprintf(
				"this note already has %d revisions waiting for their chunks (the limit), so this revision's metadata was not stored. "+
					"Push the note's chunks before its metadata (a note is served only once all its chunks are stored)", n)}
			refused = append(refused, i)
			continue
		}
		results[i] = engine.BulkDocResult{ID: j.id, Rev: j.rev}
		s.addRevLocked(j.id, j.rev, n)
		if h := s.held[j.id][j.rev]; h != nil {
			h.chunks, h.known = slices.Compact(slices.Sorted(slices.Values(j.r.Chunks))), true
			s.cacheBodyLocked(h, source, docs[i])
		}
		todo = append(todo, i)
		if bodies[j.id] == nil {
			bodies[j.id] = map[string]heldBody{}
			owners[j.id] = s.owners[j.id]
		}
		bodies[j.id][j.rev] = heldBody{Source: source, Body: docs[i]}
		if _, ok := s.indexed[j.id]; !ok {
			newDoc = true
		}
	}
	s.n.refused += uint64(len(refused))
	s.mu.Unlock()
	if len(refused) > 0 {
		s.log.Warn("holdback: metadata refused: too many held documents", "docs", len(refused),
			"doc", js[refused[0]].id, "owner", owner, "source", sourceName(source), "reason", results[refused[0]].Reason)
	}

	// Durable before the client is answered, and before the purgatory
	// can release (Release reads the body from the holding area).
	fail := func(from int, err error) error {
		for _, i := range todo[from:] {
			s.forget(ctx, js[i].id, js[i].rev)
		}
		return err
	}
	indexed := false
	if len(bodies) > 0 {
		// The removals waiting are written in the same transaction:
		// all of them when it is one, else those of these documents.
		var drop map[string]string
		if s.area.atomicMany() {
			drop = s.rm.takeAll()
		} else {
			drop = s.rm.take(slices.Collect(maps.Keys(bodies)))
		}
		var err error
		if indexed, err = s.area.addMany(ctx, bodies, owners, drop); err != nil {
			s.rm.add(drop)
			return fail(0, fmt.Errorf("holdback: keeping %d held documents: %w", len(bodies), err))
		}
	}
	if !indexed && (newDoc || s.area.upd != nil) {
		if err := s.writeIndex(ctx, slices.Sorted(maps.Keys(bodies))); err != nil {
			return fail(0, fmt.Errorf("holdback: writing the holding index: %w", err))
		}
	}
	for k, i := range todo {
		j := js[i]
		out, err := s.p.Hold(ctx, j.r, source)
		if err := s.settled(ctx, j.r, source, out, err, true); err != nil {
			return fail(k, err)
		}
	}
	return nil
}

// settled records what the purgatory did with a revision handed to it;
// arrival is false for revisions held again after a restart (not
// counted). It returns an error only when the purgatory did not take the
// revision at all (closed, the store failed); the caller forgets it then.
func (s *Store) settled(ctx context.Context, r hold.Revision, source string, out hold.Outcome, err error, arrival bool) error {
	var rerr *purgatory.ReleaseError
	if err != nil && !errors.As(err, &rerr) {
		return err
	}
	switch out {
	case hold.Held:
		s.mu.Lock()
		if h := s.held[r.Doc][r.Rev]; h != nil { // not released meanwhile
			s.gen++
			h.gen = s.gen
			if arrival {
				s.n.holds++
			}
		}
		s.mu.Unlock()
		if rerr != nil {
			s.log.Warn("holdback: release failed, will retry", "doc", r.Doc, "rev", r.Rev, "err", rerr)
		}
	case hold.Released:
		// release wrote it and emptied the holding area of it.
	default:
		// Superseded, PreviouslyExpired, Rejected, Dropped: never served.
		s.forget(ctx, r.Doc, r.Rev)
		s.mu.Lock()
		s.n.dropped++
		s.mu.Unlock()
		s.log.Info("holdback: revision dropped unserved", "doc", r.Doc, "rev", r.Rev, "source", sourceName(source), "reason", out.String())
	}
	return nil
}

// fullLocked returns why a document held for owner would exceed a
// limit, or "" if it would not.
func (s *Store) fullLocked(owner string) string {
	const advice = "so this note's metadata was not stored. Push the notes' chunks before their metadata " +
		"(a note is served only once all its chunks are stored), wait until held notes are released or expire, or raise "
	if n := len(s.held); n >= s.cfg.MaxHeldDocuments {
		return fmt.Sprintf("this database already holds %d notes waiting for their chunks (its limit), %s%s",
			n, advice, s.cfg.MaxHeldDocumentsName)
	}
	if owner == "" {
		return ""
	}
	if n := s.owned[owner]; n >= s.cfg.MaxHeldPerOwner {
		return fmt.Sprintf("user %q already has %d notes waiting for their chunks in this database (the per-user limit), %s%s",
			owner, n, advice, s.cfg.MaxHeldPerOwnerName)
	}
	return ""
}

// distinct returns how many distinct ids are in ids.
func distinct(ids []engine.ChunkID) int {
	if len(ids) < 2 {
		return len(ids)
	}
	return len(slices.Compact(slices.Sorted(slices.Values(ids))))
}

// tooManyIDsLocked returns why holding a revision of doc (claimed
// already) that needs n distinct chunk ids would exceed a limit, or "".
func (s *Store) tooManyIDsLocked(doc string, n int) string {
	const advice = "so this note's metadata was not stored. Push the notes' chunks before their metadata " +
		"(a note is served only once all its chunks are stored), wait until held notes are released or expire, or raise "
	if s.ids+n > s.cfg.MaxHeldChunkIDs {
		return fmt.Sprintf("this database's held notes already wait for %d chunk ids and this revision needs %d more, past its limit of %d, %s%s",
			s.ids, n, s.cfg.MaxHeldChunkIDs, advice, s.cfg.MaxHeldChunkIDsName)
	}
	owner, ok := s.owners[doc]
	if !ok {
		return ""
	}
	if have := s.ownIDs[owner]; have+n > s.cfg.MaxHeldChunkIDsPerOwner {
		return fmt.Sprintf("user %q's held notes in this database already wait for %d chunk ids and this revision needs %d more, past the per-user limit of %d, %s%s",
			owner, have, n, s.cfg.MaxHeldChunkIDsPerOwner, advice, s.cfg.MaxHeldChunkIDsPerOwnerName)
	}
	return ""
}

// addRevLocked puts rev, needing n distinct chunk ids, in the holding
// area of doc (claimed already) and counts its ids.
func (s *Store) addRevLocked(doc, rev string, n int) {
	s.held[doc][rev] = &hrev{ids: n}
	s.ids += n
	if owner, ok := s.owners[doc]; ok {
		s.ownIDs[owner] += n
	}
}

// uncountLocked takes a revision of doc leaving the holding area out of
// the counts of chunk ids; doc is still claimed.
func (s *Store) uncountLocked(doc string, h *hrev) {
	s.ids -= h.ids
	if h.cached {
		s.cached -= len(h.body.Body)
		h.body, h.cached = heldBody{}, false
	}
	if owner, ok := s.owners[doc]; ok {
		if s.ownIDs[owner] -= h.ids; s.ownIDs[owner] <= 0 {
			delete(s.ownIDs, owner)
		}
	}
}

// claimLocked makes doc held (no revision yet), counted against owner,
// and returns its revisions.
func (s *Store) claimLocked(doc, owner string) map[string]*hrev {
	revs := map[string]*hrev{}
	s.held[doc] = revs
	if owner != "" {
		s.owners[doc] = owner
		s.owned[owner]++
	}
	return revs
}

// unclaimLocked makes doc not held, freeing its slot.
func (s *Store) unclaimLocked(doc string) {
	delete(s.held, doc)
	if owner, ok := s.owners[doc]; ok {
		delete(s.owners, doc)
		if s.owned[owner]--; s.owned[owner] <= 0 {
			delete(s.owned, owner)
		}
	}
}

// dropLocked removes the held revisions of doc for which drop is true,
// and the document when none is left.
func (s *Store) dropLocked(doc string, drop func(rev string) bool) {
	revs := s.held[doc]
	if revs == nil {
		return
	}
	maps.DeleteFunc(revs, func(r string, h *hrev) bool {
		if drop(r) {
			s.uncountLocked(doc, h)
			return true
		}
		return false
	})
	if len(revs) == 0 {
		s.unclaimLocked(doc)
	}
}

// forget removes one revision from the holding area.
func (s *Store) forget(ctx context.Context, doc, rev string) {
	s.mu.Lock()
	s.dropLocked(doc, func(r string) bool { return r == rev })
	s.mu.Unlock()
	if err := s.area.remove(ctx, doc, func(r string) bool { return r == rev }); err != nil {
		s.saveFailed("holding area", err)
	}
}

func sourceName(s string) string {
	if s == purgatory.ClientPush {
		return "client"
	}
	return s
}

func (s *Store) saveFailed(what string, err error) {
	s.mu.Lock()
	s.n.saveErrors++
	s.mu.Unlock()
	s.log.Warn("holdback: save failed", "what", what, "stage", engine.StageStorage, "err", err)
}

// writeIndex indexes the documents added, which a hold has just written
// to the holding area: with a LocalUpdater by adding them to the index
// (see area), else by writing every document of the holding area as the
// index.
func (s *Store) writeIndex(ctx context.Context, added []string) error {
	if s.area.upd != nil {
		return s.area.indexAdd(ctx, added)
	}
	err := s.area.writeIndex(ctx, func() []string {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.indexed = make(map[string]struct{}, len(s.held))
		for doc := range s.held {
			s.indexed[doc] = struct{}{}
		}
		return slices.Collect(maps.Keys(s.indexed))
	})
	if err != nil {
		s.mu.Lock()
		s.indexed = nil // unknown: the next hold writes it again
		s.mu.Unlock()
	}
	return err
}

// saver saves every SaveInterval until ctx ends.
func (s *Store) saver(ctx context.Context) {
	defer close(s.saveDone)
	t := time.NewTicker(s.cfg.SaveInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.save(ctx)
		}
	}
}

// save drops from the holding area the revisions the purgatory gave up
// (expired), saves the purgatory state and rewrites the index when it
// lists documents that left.
func (s *Store) save(ctx context.Context) {
	s.flushRemovals(ctx)
	s.mu.Lock()
	g0 := s.gen
	s.mu.Unlock()
	inP := map[[2]string]struct{}{}
	for _, h := range s.p.Held() {
		for _, rev := range h.Revisions {
			inP[[2]string{h.Doc, rev}] = struct{}{}
		}
	}
	gone := map[string][]string{}
	s.mu.Lock()
	for doc, revs := range s.held {
		for rev, h := range revs {
			if _, ok := inP[[2]string{doc, rev}]; ok || h.gen == 0 || h.gen > g0 {
				continue
			}
			gone[doc] = append(gone[doc], rev)
			s.uncountLocked(doc, h)
			delete(revs, rev)
			s.n.dropped++
		}
		if len(revs) == 0 {
			s.unclaimLocked(doc)
		}
	}
	stale := s.indexed == nil
	for doc := range s.indexed {
		if s.held[doc] == nil {
			stale = true
		}
	}
	s.mu.Unlock()
	for _, doc := range slices.Sorted(maps.Keys(gone)) {
		revs := gone[doc]
		s.log.Info("holdback: held revisions dropped unserved", "doc", doc, "revisions", len(revs), "reason", "given up by the purgatory")
		if err := s.area.remove(ctx, doc, func(r string) bool { return slices.Contains(revs, r) }); err != nil {
			s.saveFailed("holding area", err)
		}
	}
	s.saveState(ctx)
	if stale {
		if err := s.writeIndex(ctx, nil); err != nil {
			s.saveFailed("holding index", err)
		}
	}
}

// found is a held revision resume found in the holding area.
type found struct {
	doc, rev string
	hb       heldBody
}

// resumeArea reads the holding area (counting what it holds) and the
// purgatory's state (nil when none was saved). With a LocalUpdater, the
// documents indexed with no revision left (their remover stopped between
// its two writes) leave the index.
func (s *Store) resumeArea(ctx context.Context) ([]found, json.RawMessage, error) {
	docs, state, err := s.area.readIndex(ctx)
	if errors.Is(err, engine.ErrMalformed) {
		s.log.Error("holdback: the holding index is unreadable; held revisions are lost", "err", err)
		docs, err = nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("holdback: reading the holding index: %w", err)
	}
	got, err := s.area.getMany(ctx, docs)
	if err != nil {
		return nil, nil, fmt.Errorf("holdback: reading the holding area: %w", err)
	}
	var all []found
	var empty []string
	s.indexed = map[string]struct{}{}
	for _, doc := range docs {
		s.indexed[doc] = struct{}{}
		h := got[doc]
		if h.err != nil {
			s.log.Error("holdback: a holding document is unreadable; its held revisions are lost", "doc", doc, "err", h.err)
			continue
		}
		if len(h.doc.Revs) == 0 {
			empty = append(empty, doc)
		}
		s.mu.Lock()
		for rev, hb := range h.doc.Revs {
			all = append(all, found{doc, rev, hb})
			if s.held[doc] == nil {
				s.claimLocked(doc, h.doc.Owner) // over a lowered limit, it stays held
			}
			n := 0
			if j := classify(s.codec, hb.Body); j.kind == kindMeta {
				n = distinct(j.r.Chunks)
			}
			s.addRevLocked(doc, rev, n)
			s.cacheBodyLocked(s.held[doc][rev], hb.Source, hb.Body)
		}
		s.mu.Unlock()
	}
	if s.area.upd != nil && len(empty) > 0 {
		if err := s.area.unindex(ctx, empty); err != nil {
			s.saveFailed("holding index", err)
		}
	}
	return all, state, nil
}

// resume loads what an earlier run left: the holding area, then the
// purgatory state, and hands every held revision the restored purgatory
// does not know (held after its last save) to it again.
func (s *Store) resume(ctx context.Context) error {
	all, state, err := s.resumeArea(ctx)
	if err != nil {
		return err
	}
	if state != nil {
		if err := s.p.Restore(state, time.Now()); err != nil {
			s.log.Error("holdback: the purgatory state is unreadable; held revisions start afresh", "err", err)
		} else {
			s.savedKey = contentKey(state)
		}
	} else if snap, err := s.p.Snapshot(); err == nil { // empty: none saved is the same as an empty one
		s.savedKey = contentKey(snap)
	}
	known := map[[2]string]struct{}{}
	for _, h := range s.p.Held() {
		for _, rev := range h.Revisions {
			known[[2]string{h.Doc, rev}] = struct{}{}
		}
	}
	if !s.area.shared {
		if all, err = s.dropServed(ctx, all, known); err != nil {
			return fmt.Errorf("holdback: reading which held revisions are stored: %w", err)
		}
	}
	// Older revisions first, so late binding sees them in arrival order.
	slices.SortFunc(all, func(a, b found) int {
		return cmp.Or(cmp.Compare(a.doc, b.doc), purgatory.CompareRevs(a.rev, b.rev))
	})
	for _, f := range all {
		if _, ok := known[[2]string{f.doc, f.rev}]; ok {
			s.settled(ctx, hold.Revision{Doc: f.doc, Rev: f.rev}, f.hb.Source, hold.Held, nil, false)
			continue
		}
		s.mu.Lock()
		still := s.held[f.doc][f.rev] != nil
		s.mu.Unlock()
		if !still {
			continue // released meanwhile by the restored purgatory
		}
		r := hold.Revision{Doc: f.doc, Rev: f.rev}
		if j := classify(s.codec, f.hb.Body); j.kind == kindMeta {
			r = j.r
		} else {
			// It cannot be judged any more (the passphrase was removed
			// from the configuration): it is written through, as such
			// metadata is now.
			s.log.Warn("holdback: a held revision cannot be judged any more; writing it through", "doc", f.doc, "rev", f.rev)
		}
		out, err := s.p.Hold(ctx, r, f.hb.Source)
		if err := s.settled(ctx, r, f.hb.Source, out, err, false); err != nil {
			return fmt.Errorf("holdback: holding %q again: %w", f.doc, err)
		}
	}
	return nil
}

// RevsDiff returns the revisions the store lacks; a held revision counts
// as present, so its pusher does not send it again.
func (s *Store) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	out, err := s.inner.RevsDiff(ctx, revs)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, missing := range out {
		h := s.held[id]
		if h == nil {
			continue
		}
		var keep []string
		for _, rev := range missing {
			if h[rev] == nil {
				keep = append(keep, rev)
			}
		}
		if len(keep) == 0 {
			delete(out, id)
		} else {
			out[id] = keep
		}
	}
	return out, nil
}

// Put writes a local edit (new_edits=true). It is never held: its
// revision is chosen by the inner store as it writes. A chunk written by
// Put is announced; a complete revision written to a held document goes
// through the purgatory so that an older held revision is never released
// after it.
func (s *Store) Put(ctx context.Context, doc json.RawMessage) (string, error) {
	if err := s.enter(ctx); err != nil {
		return "", err
	}
	defer s.gate.RUnlock()
	d, err := livesync.ParseDoc(doc)
	if err != nil {
		return s.inner.Put(ctx, doc) // the inner store explains the refusal
	}
	id := d.ID()
	if docid.IsChunkID(id) {
		rev, err := s.inner.Put(ctx, doc)
		if err == nil && !d.Deleted() {
			s.p.ChunksArrived([]engine.ChunkID{id})
		}
		return rev, err
	}
	unlock := s.locks.lock([]string{id})
	defer unlock()
	rev, err := s.inner.Put(ctx, doc)
	if err != nil || !s.isHeld(id) {
		return rev, err
	}
	body, err := s.inner.Get(ctx, id, store.GetOptions{Rev: rev, Revs: true})
	if err != nil {
		s.log.Warn("holdback: could not bind a local edit of a held document", "doc", id, "rev", rev, "err", err)
		return rev, nil // written all the same
	}
	j := classify(s.codec, body)
	switch {
	case !j.note:
		return rev, nil
	case j.kind != kindMeta:
		j.r = hold.Revision{Doc: id, Rev: rev} // cannot be judged: needs no chunk
	case len(j.r.Chunks) > 0:
		got, err := s.inner.GetChunks(ctx, j.r.Chunks)
		if err != nil || !complete(j.r, got, nil) {
			return rev, nil // incomplete: served already, nothing to bind
		}
	}
	results := make([]engine.BulkDocResult, 1)
	if err := s.hold(ctx, purgatory.ClientPush, Owner(ctx), []json.RawMessage{body}, []judged{j}, []int{0}, results); err != nil {
		s.log.Warn("holdback: could not bind a local edit of a held document", "doc", id, "rev", rev, "err", err)
	}
	return rev, nil
}

// PutChunks writes chunks to the inner store and releases the documents
// they complete.
func (s *Store) PutChunks(ctx context.Context, chunks []engine.Chunk) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.gate.RUnlock()
	if err := s.inner.PutChunks(ctx, chunks); err != nil {
		return err
	}
	ids := make([]engine.ChunkID, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID
	}
	s.p.ChunksArrived(ids)
	return nil
}

// GetLocal reads a _local document; the Store's own are not found.
func (s *Store) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	if reserved(id) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("get local %q: %w", id, engine.ErrNotFound)
	}
	return s.inner.GetLocal(ctx, id)
}

// PutLocal writes a _local document; the Store's own ids are refused
// with an error wrapping store.ErrInvalid.
func (s *Store) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.gate.RUnlock()
	if reserved(id) {
		return fmt.Errorf("holdback: _local/%s is reserved: %w", id, store.ErrInvalid)
	}
	return s.inner.PutLocal(ctx, id, doc)
}

// Info describes the inner store; held revisions are not counted.
func (s *Store) Info(ctx context.Context) (engine.EndpointInfo, error) { return s.inner.Info(ctx) }

// Changes lists the inner store's changes: held revisions are not in it
// until released, and then at a new sequence.
func (s *Store) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	return s.inner.Changes(ctx, req)
}

// BulkGet reads revisions from the inner store; held ones are left out.
func (s *Store) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	return s.inner.BulkGet(ctx, revs)
}

// Get reads a document from the inner store; a held revision is
// engine.ErrNotFound and is in no _revs_info (held revisions are not in
// the inner store's trees until released).
func (s *Store) Get(ctx context.Context, id string, opts store.GetOptions) (json.RawMessage, error) {
	return s.inner.Get(ctx, id, opts)
}

// AllDocs lists the inner store's documents; a document with only held
// revisions is not listed.
func (s *Store) AllDocs(ctx context.Context, opts store.AllDocsOptions) ([]store.DocInfo, error) {
	return s.inner.AllDocs(ctx, opts)
}

// Compact compacts the inner store (earlier revisions' bodies dropped,
// documents stemmed to the revs limit). Held revisions are not in the
// inner store, so compaction neither sees nor drops them.
func (s *Store) Compact(ctx context.Context) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.gate.RUnlock()
	return s.inner.Compact(ctx)
}

// RevsLimit returns the inner store's revs limit.
func (s *Store) RevsLimit(ctx context.Context) (int, error) { return s.inner.RevsLimit(ctx) }

// SetRevsLimit sets the inner store's revs limit; a held revision is
// stemmed to it when it is released (written to the inner store).
func (s *Store) SetRevsLimit(ctx context.Context, n int) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.gate.RUnlock()
	return s.inner.SetRevsLimit(ctx, n)
}

// GetChunks reads chunks from the inner store.
func (s *Store) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	return s.inner.GetChunks(ctx, ids)
}
