package purgatory

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// run is the driver: the one goroutine that owns the timer. It applies
// announced arrivals, retries failed releases and moves documents
// through soft expiry and expiry at their deadlines.
func (p *Purgatory) run() {
	defer close(p.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.kick:
		case <-timer.C:
		}
		p.tick()
		if next := p.nextWake(); !next.IsZero() {
			timer.Reset(time.Until(next))
		} else {
			timer.Stop()
		}
	}
}

// tick does all work that is due now.
func (p *Purgatory) tick() { p.tickWith(p.ctx, nil) }

// tickWith is tick, with the chunks arriving applied as if announced,
// and ctx passed to the releases.
func (p *Purgatory) tickWith(ctx context.Context, arriving []engine.ChunkID) {
	p.relMu.Lock()
	defer p.relMu.Unlock()
	p.inMu.Lock()
	ids := append(p.inbox, arriving...)
	p.inbox = nil
	p.inMu.Unlock()

	now := time.Now()
	p.mu.Lock()
	ready := map[string]struct{}{}
	for _, id := range ids {
		for _, doc := range p.byChunk[id] {
			e := p.entries[doc]
			if e == nil {
				continue
			}
			for _, hr := range e.revs {
				delete(hr.missing, id)
			}
			ready[doc] = struct{}{}
		}
		delete(p.byChunk, id)
	}
	if p.dueLocked(now) {
		for doc, e := range p.entries {
			if !e.retryAt.IsZero() && !now.Before(e.retryAt) {
				e.retryAt = time.Time{}
				ready[doc] = struct{}{}
			}
		}
	}
	p.mu.Unlock()
	// Arrivals win over a deadline that falls at the same instant.
	p.settleMany(ctx, slices.Sorted(maps.Keys(ready)))
	p.mu.Lock()
	if now := time.Now(); p.dueLocked(now) {
		p.expireLocked(now)
		p.due, p.dueKnown = p.nextWakeLocked(), true
	}
	p.mu.Unlock()
}

// dueLocked reports whether a deadline may have passed at now, so that
// a tick looks at every entry: only then, since a tick runs for every
// write that brings chunks and a held document's deadlines are minutes
// to days away.
func (p *Purgatory) dueLocked(now time.Time) bool {
	return !p.dueKnown || (!p.due.IsZero() && !now.Before(p.due))
}

// deadlineLocked records a deadline just set (of an entry, a retry, a
// memory or a mark): the next tick at or after it looks at every entry.
func (p *Purgatory) deadlineLocked(t time.Time) {
	if p.dueKnown && !t.IsZero() && (p.due.IsZero() || t.Before(p.due)) {
		p.due = t
	}
}

// expireLocked moves documents whose deadline passed: Active to
// SoftExpired at activeUntil, SoftExpired to dropped at softUntil. The
// new deadlines derive from the old ones, not from now, so a late tick
// (or Restore after downtime) lands where an on-time one would have.
func (p *Purgatory) expireLocked(now time.Time) {
	// Only the documents whose deadline passed, in id order: a tick runs
	// for every write that brings chunks, and most find none due.
	var due []string
	for doc, e := range p.entries {
		if (e.state == Active && !now.Before(e.activeUntil)) || (e.state == SoftExpired && !now.Before(e.softUntil)) {
			due = append(due, doc)
		}
	}
	slices.Sort(due)
	for _, doc := range due {
		e := p.entries[doc]
		if e.state == Active && !now.Before(e.activeUntil) {
			e.state = SoftExpired
			e.softUntil = e.activeUntil.Add(p.cfg.SoftExpiry)
			p.deadlineLocked(e.softUntil)
			p.n.softExpiries++
			if e.hunted && p.deps.Hunter != nil {
				p.deps.Hunter.Remove(doc)
			}
			e.hunted = false
			p.log.Info("purgatory: active hunting ended", "doc", doc, "source", sourceName(e.revs[0].source),
				"reason", e.reason, "missing", len(e.needed()), "state", SoftExpired.String())
		}
		if e.state == SoftExpired && !now.Before(e.softUntil) {
			until := e.softUntil.Add(p.cfg.RememberExpired)
			for _, hr := range e.revs {
				if now.Before(until) {
					p.mem[memKey{doc, hr.rev}] = memory{until: until}
					p.deadlineLocked(until)
				}
			}
			reason := e.reason
			if reason == ReasonMissing {
				reason = ReasonNotFound
			}
			p.n.expiries++
			p.log.Warn("purgatory: document expired", "doc", doc, "source", sourceName(e.revs[0].source),
				"reason", reason, "revisions", len(e.revs), "missing", len(e.needed()), "held_for", e.softUntil.Sub(e.since))
			for _, hr := range slices.Clone(e.revs) {
				p.dropRev(e, hr)
			}
			delete(p.entries, doc)
		}
	}
	for k, m := range p.mem {
		if !now.Before(m.until) {
			delete(p.mem, k)
		}
	}
	for doc, m := range p.marks {
		if !now.Before(m.until) {
			delete(p.marks, doc)
		}
	}
}

// nextWake is the earliest deadline of any entry, retry or memory (as
// the last look at every entry found it, or earlier).
func (p *Purgatory) nextWake() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.dueKnown {
		p.due, p.dueKnown = p.nextWakeLocked(), true
	}
	return p.due
}

// nextWakeLocked computes nextWake from every entry, retry and memory.
func (p *Purgatory) nextWakeLocked() time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, e := range p.entries {
		consider(e.deadline())
		consider(e.retryAt)
	}
	for _, m := range p.mem {
		consider(m.until)
	}
	for _, m := range p.marks {
		consider(m.until)
	}
	return next
}
