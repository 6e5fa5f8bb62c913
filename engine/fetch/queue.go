package fetch

import (
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// state is where an accepted identifier is in its lifecycle.
type state uint8

const (
	// stEntering: claimed, waiting for its bounded-activity boundary to
	// be entered; not yet eligible.
	stEntering state = iota
	// stQueued: in the heap, eligible at entry.at (now, or after backoff).
	stQueued
	// stBlocked: eligible, but a stale request for the same id is still
	// on the wire; it is requeued (with a local recheck) when that
	// request ends, so no id is ever on the wire twice.
	stBlocked
	// stBatched: taken by a request: local recheck, throttle wait, or on
	// the wire.
	stBatched
)

// entry is the fetcher's state for one claimed identifier. Its pointer is
// the claim identity used by requests: a request acts on an entry only
// while fetcher.entries[id] is that same pointer.
type entry struct {
	id      engine.ChunkID
	claim   *Claim
	state   state
	stage   int       // successful omissions so far (0: initial, ≥1: retrying)
	at      time.Time // earliest eligible time while stQueued
	seq     uint64    // FIFO tie-break among equal times
	idx     int       // index in the heap, -1 when not in it
	recheck bool      // read the local store before the next request
}

// entryHeap orders queued entries by (at, seq): the earliest eligible
// first, and among equally eligible entries the one queued first. New
// arrivals get at = now, so they never overtake older eligible work.
type entryHeap []*entry

func (h entryHeap) Len() int { return len(h) }
func (h entryHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}
func (h *entryHeap) Push(x any) {
	e := x.(*entry)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *entryHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.idx = -1
	*h = old[:n-1]
	return e
}
