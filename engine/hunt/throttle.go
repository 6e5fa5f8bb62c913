package hunt

import (
	"slices"
	"sync"
	"time"
)

// throttle is the politeness state of one throttle key: requests in
// flight, request starts in the sliding window, and the round-robin queue
// of documents waiting for capacity. Capacity is checked and reserved in
// one step under its own lock (tryAcquire), so racing documents can never
// all take the final slot, as they could if the check and the
// reservation were two steps.
type throttle struct {
	key          string
	maxInFlight  int
	maxPerWindow int
	window       time.Duration

	mu       sync.Mutex
	inFlight int
	starts   []time.Time // reserved starts inside the window, oldest first
	queue    []waiting   // documents waiting for capacity, in arrival order
	rr       int         // round-robin position in queue
}

// waiting is one document queued on a throttle since a time.
type waiting struct {
	doc   string
	since time.Time
}

func newThrottle(key string, cfg Config) *throttle {
	return &throttle{key: key, maxInFlight: cfg.MaxInFlight, maxPerWindow: cfg.MaxPerWindow, window: cfg.Window}
}

// permit is one reserved request start. Exactly one of release (the
// request ran) and cancel (it never went out) takes effect.
type permit struct {
	t     *throttle
	start time.Time
	done  bool
}

func (t *throttle) prune(now time.Time) {
	cut := now.Add(-t.window)
	i := 0
	for i < len(t.starts) && !t.starts[i].After(cut) {
		i++
	}
	if i > 0 {
		t.starts = append(t.starts[:0], t.starts[i:]...)
	}
}

// hasCapacity reports whether a request could start at now. It is only a
// routing hint; tryAcquire decides.
func (t *throttle) hasCapacity(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.capacityLocked(now)
}

func (t *throttle) capacityLocked(now time.Time) bool {
	t.prune(now)
	return t.inFlight < t.maxInFlight && len(t.starts) < t.maxPerWindow
}

// tryAcquire checks capacity and reserves one request start at now in a
// single critical section.
func (t *throttle) tryAcquire(now time.Time) (*permit, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.capacityLocked(now) {
		return nil, false
	}
	t.inFlight++
	t.starts = append(t.starts, now)
	return &permit{t: t, start: now}, true
}

// release ends a request that was made: its slot frees, its start stays
// in the window.
func (p *permit) release() {
	t := p.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if !p.done {
		p.done = true
		t.inFlight--
	}
}

// cancel gives back a reservation that never reached the wire: the slot
// and the window entry.
func (p *permit) cancel() {
	t := p.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.done {
		return
	}
	p.done = true
	t.inFlight--
	for i := len(t.starts) - 1; i >= 0; i-- {
		if t.starts[i].Equal(p.start) {
			t.starts = slices.Delete(t.starts, i, i+1)
			break
		}
	}
}

// windowFreeAt returns when the rate window next admits a request if
// that is after now and the window is what blocks; otherwise zero (free
// now, or only the in-flight bound blocks, which a release triggers).
func (t *throttle) windowFreeAt(now time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.prune(now)
	if t.inFlight >= t.maxInFlight || len(t.starts) < t.maxPerWindow {
		return time.Time{}
	}
	return t.starts[len(t.starts)-t.maxPerWindow].Add(t.window)
}

// idle reports whether nothing is in flight, queued or inside the window.
func (t *throttle) idle(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.prune(now)
	return t.inFlight == 0 && len(t.queue) == 0 && len(t.starts) == 0
}

// enqueue adds doc to the round-robin queue; a queued doc keeps its place
// and its since.
func (t *throttle) enqueue(doc string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, w := range t.queue {
		if w.doc == doc {
			return
		}
	}
	t.queue = append(t.queue, waiting{doc, now})
}

// remove drops doc from the queue and keeps the round-robin position on
// the document that was next.
func (t *throttle) remove(doc string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, w := range t.queue {
		if w.doc != doc {
			continue
		}
		t.queue = slices.Delete(t.queue, i, i+1)
		if i < t.rr {
			t.rr--
		}
		if t.rr >= len(t.queue) {
			t.rr = 0
		}
		return
	}
}

// next returns the next queued document, round robin from the current
// position, for which ready reports true (documents in progress are
// skipped), and advances the position past it.
func (t *throttle) next(ready func(doc string) bool) (waiting, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.queue)
	for i := range n {
		idx := (t.rr + i) % n
		if w := t.queue[idx]; ready(w.doc) {
			t.rr = (idx + 1) % n
			return w, true
		}
	}
	return waiting{}, false
}

// queued returns the queued documents in queue order.
func (t *throttle) queued() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, len(t.queue))
	for i, w := range t.queue {
		out[i] = w.doc
	}
	return out
}

// load returns the requests in flight and the starts inside the window.
func (t *throttle) load(now time.Time) (inFlight, inWindow int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.prune(now)
	return t.inFlight, len(t.starts)
}

// inWindow returns a copy of the starts inside the window at now.
func (t *throttle) inWindow(now time.Time) []time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.prune(now)
	out := make([]time.Time, len(t.starts))
	for i, s := range t.starts {
		out[i] = s.Round(0) // wall clock only: it is for another process
	}
	return out
}

// restore adds starts of an earlier process: those inside the window at
// now count against maxPerWindow, a start in the future counts as now,
// and only the newest maxPerWindow are kept (older ones cannot block
// anything the newer ones do not).
func (t *throttle) restore(starts []time.Time, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cut := now.Add(-t.window)
	for _, s := range starts {
		if s.After(now) {
			s = now
		}
		if s.After(cut) {
			t.starts = append(t.starts, s)
		}
	}
	slices.SortFunc(t.starts, func(a, b time.Time) int { return a.Compare(b) })
	if n := len(t.starts); n > t.maxPerWindow {
		t.starts = slices.Delete(t.starts, 0, n-t.maxPerWindow)
	}
}

// saturate adds maxPerWindow starts at at (see Hunt.Saturate).
func (t *throttle) saturate(at, now time.Time) {
	starts := make([]time.Time, t.maxPerWindow)
	for i := range starts {
		starts[i] = at
	}
	t.restore(starts, now)
}
