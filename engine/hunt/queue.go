package hunt

import (
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// entry is one hunted document (its place in the queue plus the state
// of its current pass). All fields are guarded by the Hunt's lock.
type entry struct {
	doc    string
	seq    uint64 // creation order: deterministic iteration
	origin string // throttle key tried first ("" = a client push)

	needed map[engine.ChunkID]struct{}
	order  []engine.ChunkID // needed in the caller's order (requests are deterministic)

	// Timing.
	attempts int       // passes that ended incomplete since the last fresh start
	next     time.Time // earliest start of the next pass
	sooner   time.Time // an Enqueue during a pass: the next pass starts no later than this
	backoff  bool      // next was set by a pass that ended incomplete (or a restored one), not by an Enqueue delay

	// The current pass.
	inPass    bool
	checking  bool                                   // the local recheck at the start of the pass runs
	asked     map[string]map[engine.ChunkID]struct{} // per throttle key: ids asked (or skipped by the memo) in this pass
	busy      map[engine.ChunkID]struct{}            // ids another party's flight carries (or a recheck after it landed)
	running   []*attempt                             // at most two: a primary and its hedge
	hedged    bool                                   // the running primary already has its hedge
	idleSince time.Time                              // since when the entry wants a source (the per-source wait)

	// Local rechecks (pass start, after another party's flight landed).
	toCheck      []engine.ChunkID
	checkRunning bool
}

func newEntry(doc string, seq uint64) *entry {
	return &entry{doc: doc, seq: seq, needed: make(map[engine.ChunkID]struct{})}
}

// enqueue applies an Enqueue to the entry: the
// needed set is replaced, the attempt count resets to 0 (fresh start),
// and the next attempt moves to now+delay only if that is earlier
// (debounce). A new entry (fresh) simply starts at now+delay.
func (e *entry) enqueue(needed []engine.ChunkID, origin string, delay time.Duration, now time.Time, fresh bool) {
	e.setNeeded(needed)
	e.origin = origin
	e.attempts = 0
	at := now.Add(delay)
	if fresh || at.Before(e.next) {
		e.next = at
		e.backoff = false
	}
	if e.inPass && (e.sooner.IsZero() || at.Before(e.sooner)) {
		e.sooner = at
	}
}

func (e *entry) setNeeded(ids []engine.ChunkID) {
	clear(e.needed)
	e.order = e.order[:0]
	for _, id := range ids {
		if _, dup := e.needed[id]; !dup {
			e.needed[id] = struct{}{}
			e.order = append(e.order, id)
		}
	}
}

// drop removes ids from the needed set (they are local now).
func (e *entry) drop(id engine.ChunkID) bool {
	if _, ok := e.needed[id]; !ok {
		return false
	}
	delete(e.needed, id)
	for i, o := range e.order {
		if o == id {
			e.order = append(e.order[:i], e.order[i+1:]...)
			break
		}
	}
	return true
}

// inProgress reports whether a pass runs.
func (e *entry) inProgress() bool { return e.inPass }

// ready reports whether a new pass may start: not in progress AND the
// next attempt time has come. Both conditions are needed.
func (e *entry) ready(now time.Time) bool {
	return !e.inProgress() && !now.Before(e.next)
}

// startPass begins a pass: every source is untried again.
func (e *entry) startPass(now time.Time) {
	e.inPass = true
	e.asked = make(map[string]map[engine.ChunkID]struct{})
	e.busy = make(map[engine.ChunkID]struct{})
	e.hedged = false
	e.idleSince = now
	e.sooner = time.Time{}
}

// endPass ends a pass that left ids missing: the attempt count grows and
// the next pass waits for the backoff, or less if an Enqueue during the
// pass asked for sooner.
func (e *entry) endPass(now time.Time, cfg Config) {
	e.inPass = false
	e.attempts++
	e.backoff = true
	e.next = now.Add(cfg.backoff(e.attempts))
	if !e.sooner.IsZero() && e.sooner.Before(e.next) {
		e.next = later(e.sooner, now)
	}
	e.sooner = time.Time{}
	e.asked = nil
	e.busy = nil
}

// restore applies a restored backoff to an entry not in a pass: its
// attempt count, and a next pass no earlier than ds.Next.
func (e *entry) restore(ds DocState) {
	e.attempts = ds.Attempts
	if ds.Next.After(e.next) {
		e.next = ds.Next
		e.backoff = true
	}
}

// idle reports whether the entry is in a pass with nothing running.
func (e *entry) idle() bool { return e.inPass && !e.checking && len(e.running) == 0 }

// markAsked records that id was asked of (or skipped at) key this pass.
func (e *entry) markAsked(key string, id engine.ChunkID) {
	m := e.asked[key]
	if m == nil {
		m = make(map[engine.ChunkID]struct{})
		e.asked[key] = m
	}
	m[id] = struct{}{}
}

func (e *entry) wasAsked(key string, id engine.ChunkID) bool {
	_, ok := e.asked[key][id]
	return ok
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
