//go:build !js || upstreams

package main

import (
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/purgatory"
)

// huntGate is the purgatory's Hunter during a run: it keeps what the
// purgatory asks (the held documents it restores, new holds) until
// release, then hands it to the hunt in the same order, each with what
// is left of its delay, and passes everything on after that. A document
// the hunt first sees at release keeps the backoff restored from the
// last run (hunt.Restore applies to a document's first Enqueue).
type huntGate struct {
	h purgatory.Hunter

	mu      sync.Mutex
	open    bool
	order   []string
	pending map[string]gated
}

type gated struct {
	needed []engine.ChunkID
	origin string
	due    time.Time
}

var _ purgatory.Hunter = (*huntGate)(nil)

func (g *huntGate) Enqueue(doc string, needed []engine.ChunkID, origin string, delay time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open {
		g.h.Enqueue(doc, needed, origin, delay)
		return
	}
	if g.pending == nil {
		g.pending = map[string]gated{}
	}
	if _, ok := g.pending[doc]; !ok {
		g.order = append(g.order, doc)
	}
	g.pending[doc] = gated{needed: needed, origin: origin, due: time.Now().Add(delay)}
}

func (g *huntGate) Remove(doc string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open {
		g.h.Remove(doc)
		return
	}
	delete(g.pending, doc)
}

// release hands what was kept to the hunt and opens the gate.
func (g *huntGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock() // held throughout: a later call must not overtake what is kept
	if g.open {
		return
	}
	g.open = true
	for _, doc := range g.order {
		if e, ok := g.pending[doc]; ok {
			g.h.Enqueue(doc, e.needed, e.origin, max(0, time.Until(e.due)))
		}
	}
	g.order, g.pending = nil, nil
}

func (g *huntGate) isOpen() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}
