package fetch

import (
	"errors"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// Reasons carried in Event.Err for EventReleased, and by Results that end
// without an answer. Test with errors.Is.
var (
	// ErrStalled: the inactivity fuse released the claim. It says nothing
	// about whether the remote has the chunk.
	ErrStalled = errors.New("fetch: claim released by the inactivity fuse")
	// ErrNoSource: no active chunk source (upstream: no active
	// Replicator) could serve the request.
	ErrNoSource = errors.New("fetch: no active chunk source")
	// ErrRejected: the activity runner refused to enter the request's
	// bounded-activity boundary.
	ErrRejected = errors.New("fetch: activity runner rejected the request")
	// ErrClosed: the fetcher, coordinator or wait layer was closed.
	ErrClosed = errors.New("fetch: closed")
)

// EventKind says what happened to one claimed identifier.
type EventKind uint8

// Event kinds, in the order an identifier can meet them.
const (
	// EventClaimed: a claim now owns the id.
	EventClaimed EventKind = iota + 1
	// EventDelivered: a valid chunk for the id arrived (Event.Chunk),
	// from the remote or from a local recheck.
	EventDelivered
	// EventRemoteMissing: terminal explicit remote absence; the current
	// final probe, made after every finite producer ended, omitted it.
	EventRemoteMissing
	// EventFailed: terminal failure without an answer about the id: a
	// transport or auth error, or an invalid answer (Event.Err).
	EventFailed
	// EventReleased: the claim let go of the id without an answer
	// (Event.Err is ErrStalled, ErrNoSource, ErrRejected or ErrClosed).
	EventReleased
)

func (k EventKind) String() string {
	switch k {
	case EventClaimed:
		return "claimed"
	case EventDelivered:
		return "delivered"
	case EventRemoteMissing:
		return "remote-missing"
	case EventFailed:
		return "failed"
	case EventReleased:
		return "released"
	}
	return "unknown"
}

// Event is one change of one claimed identifier.
type Event struct {
	ID    engine.ChunkID
	Kind  EventKind
	Chunk engine.Chunk // EventDelivered only
	Err   error        // EventFailed and EventReleased
}

// Coordinator tracks per-identifier claims of on-demand deliveries, as
// upstream's ChunkDeliveryCoordinator (commonlib
// src/managers/ChunkDeliveryCoordinator.ts): an identifier is claimed
// while at least one live claim owns it, overlapping claims are counted,
// and each claim has an inactivity fuse. Fetchers and the purgatory hunt
// claim through one shared Coordinator; the wait layer observes it. A
// Coordinator is safe for concurrent use.
type Coordinator struct {
	mu      sync.Mutex
	active  map[engine.ChunkID]int
	live    map[*Claim]struct{}
	subs    []eventSub
	nextSub uint64
	stalls  uint64
	closed  bool
	wire    map[engine.ChunkID]*wireRec // the single flight of requests (wire.go)
}

type eventSub struct {
	id uint64
	fn func([]Event)
}

// NewCoordinator returns an empty Coordinator.
func NewCoordinator() *Coordinator {
	return &Coordinator{active: make(map[engine.ChunkID]int), live: make(map[*Claim]struct{}),
		wire: make(map[engine.ChunkID]*wireRec)}
}

// ClaimOptions configures one claim.
type ClaimOptions struct {
	// StallTimeout is the inactivity fuse; zero means
	// DefaultStallTimeout.
	StallTimeout time.Duration
	// OnStalled, if set, is called after the fuse released the claim,
	// with the ids it still owned.
	OnStalled func(c *Claim, remaining []engine.ChunkID)
}

// Claim is one owner of a set of identifiers. Its identity matters: a
// Claim settles, refreshes and reports only for itself, never for a later
// claim of the same identifier.
type Claim struct {
	co        *Coordinator
	ids       []engine.ChunkID // accepted ids in order (deterministic events)
	stall     time.Duration
	onStalled func(*Claim, []engine.ChunkID)
	done      chan struct{}

	// guarded by co.mu
	pending  map[engine.ChunkID]struct{}
	deadline time.Time
	timer    *time.Timer
	released bool
}

// Claim claims ids (duplicates ignored) and arms the claim's fuse. An
// empty claim, or one made after Close, is released at once.
func (co *Coordinator) Claim(ids []engine.ChunkID, opts ClaimOptions) *Claim {
	cl := &Claim{co: co, stall: opts.StallTimeout, onStalled: opts.OnStalled, done: make(chan struct{})}
	if cl.stall <= 0 {
		cl.stall = DefaultStallTimeout
	}
	cl.pending = make(map[engine.ChunkID]struct{}, len(ids))
	for _, id := range ids {
		if _, dup := cl.pending[id]; !dup {
			cl.pending[id] = struct{}{}
			cl.ids = append(cl.ids, id)
		}
	}
	co.mu.Lock()
	if co.closed || len(cl.ids) == 0 {
		cl.pending = nil
		cl.released = true
		close(cl.done)
		co.mu.Unlock()
		return cl
	}
	events := make([]Event, len(cl.ids))
	for i, id := range cl.ids {
		co.active[id]++
		events[i] = Event{ID: id, Kind: EventClaimed}
	}
	co.live[cl] = struct{}{}
	cl.deadline = time.Now().Add(cl.stall)
	cl.timer = time.AfterFunc(cl.stall, cl.fire)
	subs := co.subscribers()
	co.mu.Unlock()
	notify(subs, events)
	return cl
}

// Claimed reports whether a live claim owns id.
func (co *Coordinator) Claimed(id engine.ChunkID) bool {
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.active[id] > 0
}

// CoordinatorStats is a snapshot of a Coordinator.
type CoordinatorStats struct {
	Claims     int    // live claims
	ClaimedIDs int    // distinct identifiers owned by at least one claim
	Stalls     uint64 // fuse firings since creation
}

// Stats returns a snapshot.
func (co *Coordinator) Stats() CoordinatorStats {
	co.mu.Lock()
	defer co.mu.Unlock()
	return CoordinatorStats{Claims: len(co.live), ClaimedIDs: len(co.active), Stalls: co.stalls}
}

// Subscribe registers fn for every batch of events. fn runs on the
// goroutine that caused them, without the Coordinator's lock; it must not
// block. Claims and releases are visible through Claimed when fn runs; a
// terminal outcome (delivered, remote-missing, failed) is published while
// its id still counts as claimed, and stops counting right after. The
// returned function unsubscribes.
func (co *Coordinator) Subscribe(fn func([]Event)) (cancel func()) {
	co.mu.Lock()
	id := co.nextSub
	co.nextSub++
	co.subs = append(co.subs, eventSub{id, fn})
	co.mu.Unlock()
	return func() {
		co.mu.Lock()
		defer co.mu.Unlock()
		for i, s := range co.subs {
			if s.id == id {
				co.subs = append(co.subs[:i:i], co.subs[i+1:]...)
				return
			}
		}
	}
}

// Close releases every live claim with ErrClosed; later claims are
// released at once.
func (co *Coordinator) Close() {
	co.mu.Lock()
	co.closed = true
	claims := make([]*Claim, 0, len(co.live))
	for cl := range co.live {
		claims = append(claims, cl)
	}
	co.mu.Unlock()
	for _, cl := range claims {
		cl.Release(ErrClosed)
	}
}

func (co *Coordinator) subscribers() []func([]Event) {
	fns := make([]func([]Event), len(co.subs))
	for i, s := range co.subs {
		fns[i] = s.fn
	}
	return fns
}

func notify(subs []func([]Event), events []Event) {
	if len(events) == 0 {
		return
	}
	for _, fn := range subs {
		fn(events)
	}
}

// Done is closed when the claim owns no identifier any more.
func (cl *Claim) Done() <-chan struct{} { return cl.done }

// Owns reports whether the claim still owns id.
func (cl *Claim) Owns(id engine.ChunkID) bool {
	cl.co.mu.Lock()
	defer cl.co.mu.Unlock()
	_, ok := cl.pending[id]
	return ok
}

// Pending returns the ids the claim still owns, in claim order.
func (cl *Claim) Pending() []engine.ChunkID {
	cl.co.mu.Lock()
	defer cl.co.mu.Unlock()
	return cl.pendingLocked()
}

func (cl *Claim) pendingLocked() []engine.ChunkID {
	var out []engine.ChunkID
	for _, id := range cl.ids {
		if _, ok := cl.pending[id]; ok {
			out = append(out, id)
		}
	}
	return out
}

// Settle records the outcome ev for ev.ID: the claim stops owning it and
// ev is published. Settling is progress, so the fuse is rearmed; the
// claim is released when it owns nothing. Settle reports false, and
// publishes nothing, if this claim does not own ev.ID (already settled,
// expired or released): a stale request cannot settle a replacement.
func (cl *Claim) Settle(ev Event) bool {
	co := cl.co
	co.mu.Lock()
	if _, ok := cl.pending[ev.ID]; !ok {
		co.mu.Unlock()
		return false
	}
	// A terminal outcome keeps the id counted as claimed until it is
	// published: an observer that looks between the two must not see
	// "no producer" and settle the id otherwise.
	terminal := ev.Kind != EventReleased
	if terminal {
		delete(cl.pending, ev.ID)
	} else {
		cl.drop(ev.ID)
	}
	if len(cl.pending) == 0 {
		cl.releaseLocked()
	} else {
		cl.touchLocked()
	}
	subs := co.subscribers()
	co.mu.Unlock()
	notify(subs, []Event{ev})
	if terminal {
		co.mu.Lock()
		co.unclaim(ev.ID)
		co.mu.Unlock()
	}
	return true
}

// Touch records observable progress: the fuse is rearmed to StallTimeout
// from now. It does nothing on a released claim.
func (cl *Claim) Touch() {
	cl.co.mu.Lock()
	defer cl.co.mu.Unlock()
	if !cl.released {
		cl.touchLocked()
	}
}

func (cl *Claim) touchLocked() {
	cl.deadline = time.Now().Add(cl.stall)
	cl.timer.Reset(cl.stall)
}

// Release lets go of every id the claim still owns, publishing
// EventReleased with reason. It is idempotent.
func (cl *Claim) Release(reason error) {
	co := cl.co
	co.mu.Lock()
	if cl.released {
		co.mu.Unlock()
		return
	}
	events := cl.releaseAll(reason)
	subs := co.subscribers()
	co.mu.Unlock()
	notify(subs, events)
}

func (cl *Claim) releaseAll(reason error) []Event {
	remaining := cl.pendingLocked()
	events := make([]Event, len(remaining))
	for i, id := range remaining {
		cl.drop(id)
		events[i] = Event{ID: id, Kind: EventReleased, Err: reason}
	}
	cl.releaseLocked()
	return events
}

func (cl *Claim) drop(id engine.ChunkID) {
	delete(cl.pending, id)
	cl.co.unclaim(id)
}

// unclaim lowers id's claim count; co.mu is held.
func (co *Coordinator) unclaim(id engine.ChunkID) {
	if co.active[id]--; co.active[id] <= 0 {
		delete(co.active, id)
	}
}

func (cl *Claim) releaseLocked() {
	cl.released = true
	cl.timer.Stop()
	delete(cl.co.live, cl)
	close(cl.done)
}

// fire runs when the fuse timer expires. A Touch after the timer was
// queued moved the deadline; then the timer is rearmed instead.
func (cl *Claim) fire() {
	co := cl.co
	co.mu.Lock()
	if cl.released {
		co.mu.Unlock()
		return
	}
	if now := time.Now(); now.Before(cl.deadline) {
		cl.timer.Reset(cl.deadline.Sub(now))
		co.mu.Unlock()
		return
	}
	remaining := cl.pendingLocked()
	events := cl.releaseAll(ErrStalled)
	co.stalls++
	subs := co.subscribers()
	co.mu.Unlock()
	notify(subs, events)
	if cl.onStalled != nil {
		cl.onStalled(cl, remaining)
	}
}
