package fetch

import "github.com/livesync-go/livesync-go/engine"

// The wire registry is the single flight of chunk requests: an
// identifier is "on the wire" while exactly one request, from any Fetcher
// sharing the Coordinator or from the purgatory hunt, may carry it. Claims
// say who will deliver an id (and keep readers waiting); the wire registry
// says who is asking a remote for it right now. A party that finds an id
// on the wire does not ask for it; it is told when that flight lands and
// then rechecks the local store, where the winner persisted what it found
// before landing.

// wireRec is one identifier on the wire: its owner and the parties to
// tell when it lands (one callback per owner, so repeated losers do not
// pile up).
type wireRec struct {
	owner   any
	waiters map[any]func(engine.ChunkID)
	order   []any // waiters in registration order (deterministic callbacks)
}

// Flight is a reservation of identifiers on the wire, taken with
// Coordinator.Reserve before a request goes out and landed when its
// outcome is settled (found chunks persisted, misses recorded). A Flight
// is safe for concurrent use.
type Flight struct {
	co  *Coordinator
	ids []engine.ChunkID // reserved ids, in request order
}

// Reserve puts on the wire every id of ids (duplicates ignored) that is
// not on the wire already, and returns them as a Flight. Ids already on
// the wire, by another Flight or by a Fetcher's request, are returned in
// busy, in order; for each, if onLand is not nil, onLand(id) is called
// once when that flight lands. onLand runs on the landing goroutine,
// without the Coordinator's lock and after the lander's own locks are
// released; it must not block. The check and the reservation are one
// atomic step, so two racing callers never both hold an id.
func (co *Coordinator) Reserve(ids []engine.ChunkID, onLand func(engine.ChunkID)) (fl *Flight, busy []engine.ChunkID) {
	fl = &Flight{co: co}
	seen := make(map[engine.ChunkID]struct{}, len(ids))
	co.mu.Lock()
	defer co.mu.Unlock()
	for _, id := range ids {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		if r := co.wire[id]; r != nil {
			busy = append(busy, id)
			if onLand != nil {
				r.wait(fl, onLand)
			}
			continue
		}
		co.wire[id] = &wireRec{owner: fl}
		fl.ids = append(fl.ids, id)
	}
	return fl, busy
}

// OnWire reports whether a request may be carrying id right now.
func (co *Coordinator) OnWire(id engine.ChunkID) bool {
	co.mu.Lock()
	defer co.mu.Unlock()
	return co.wire[id] != nil
}

// IDs returns the identifiers the flight reserved, in request order
// (landed ones included).
func (fl *Flight) IDs() []engine.ChunkID { return fl.ids }

// Land takes ids off the wire and then calls the waiters' onLand. Ids
// the flight does not hold are ignored, so Land is idempotent and a stale
// lander cannot free a later reservation. Call it after found chunks are
// persisted and without holding locks that the waiters' callbacks take.
func (fl *Flight) Land(ids ...engine.ChunkID) {
	fl.co.freeWire(fl, ids)()
}

// LandAll lands every id the flight still holds.
func (fl *Flight) LandAll() { fl.Land(fl.ids...) }

func (r *wireRec) wait(who any, fn func(engine.ChunkID)) {
	if r.waiters == nil {
		r.waiters = make(map[any]func(engine.ChunkID))
	}
	if _, ok := r.waiters[who]; !ok {
		r.order = append(r.order, who)
	}
	r.waiters[who] = fn
}

// takeWire reserves one id for owner, or registers onLand (keyed by
// owner) and reports false when another owner holds it.
func (co *Coordinator) takeWire(owner any, id engine.ChunkID, onLand func(engine.ChunkID)) bool {
	co.mu.Lock()
	defer co.mu.Unlock()
	if r := co.wire[id]; r != nil {
		if r.owner == owner {
			return true
		}
		r.wait(owner, onLand)
		return false
	}
	co.wire[id] = &wireRec{owner: owner}
	return true
}

// freeWire takes ids held by owner off the wire and returns a function
// that notifies their waiters; the caller runs it after releasing its own
// locks.
func (co *Coordinator) freeWire(owner any, ids []engine.ChunkID) (notify func()) {
	type call struct {
		fn func(engine.ChunkID)
		id engine.ChunkID
	}
	var calls []call
	co.mu.Lock()
	for _, id := range ids {
		r := co.wire[id]
		if r == nil || r.owner != owner {
			continue
		}
		delete(co.wire, id)
		for _, w := range r.order {
			calls = append(calls, call{r.waiters[w], id})
		}
	}
	co.mu.Unlock()
	return func() {
		for _, c := range calls {
			c.fn(c.id)
		}
	}
}
