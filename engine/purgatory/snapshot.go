package purgatory

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// snapshotVersion is the version of the Snapshot format.
const snapshotVersion = 1

// The Snapshot format: JSON, timers as the time left at SavedAt (in
// nanoseconds), so Restore can subtract the downtime. It names documents,
// revisions, sources and chunk ids; never note contents.
type snapshot struct {
	Version  int          `json:"version"`
	SavedAt  time.Time    `json:"saved_at"`
	Entries  []snapEntry  `json:"entries"`
	Memory   []snapMemory `json:"memory,omitempty"`
	Released []snapMark   `json:"released,omitempty"`
}

type snapEntry struct {
	Doc       string        `json:"doc"`
	State     string        `json:"state"`
	SinceAgo  time.Duration `json:"since_ago_ns"` // held for this long at SavedAt
	Left      time.Duration `json:"left_ns"`      // until the end of the current state
	RetryLeft time.Duration `json:"retry_left_ns,omitempty"`
	Reason    string        `json:"reason"`
	Waited    bool          `json:"waited,omitempty"`
	Revisions []snapRev     `json:"revisions"`
}

type snapRev struct {
	Rev     string           `json:"rev"`
	Source  string           `json:"source"`
	Chunks  []engine.ChunkID `json:"chunks"`
	Missing []engine.ChunkID `json:"missing"`
}

type snapMemory struct {
	Doc      string        `json:"doc"`
	Rev      string        `json:"rev"`
	Rejected bool          `json:"rejected,omitempty"`
	Left     time.Duration `json:"left_ns"`
}

type snapMark struct {
	Doc  string        `json:"doc"`
	Rev  string        `json:"rev"`
	Left time.Duration `json:"left_ns"`
}

// Snapshot serialises the held documents, the memory of expired and
// rejected revisions and the last released revisions, as JSON. Chunks
// announced by ChunksArrived but not yet applied are not included (the
// restore rechecks the local store instead).
func (p *Purgatory) Snapshot() ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	s := snapshot{Version: snapshotVersion, SavedAt: now.Round(0), Entries: []snapEntry{}}
	for _, doc := range slices.Sorted(maps.Keys(p.entries)) {
		e := p.entries[doc]
		se := snapEntry{Doc: doc, State: e.state.String(), SinceAgo: now.Sub(e.since), Left: e.deadline().Sub(now),
			Reason: e.reason, Waited: e.waited}
		if !e.retryAt.IsZero() {
			se.RetryLeft = max(e.retryAt.Sub(now), 1)
		}
		for _, hr := range e.revs {
			se.Revisions = append(se.Revisions, snapRev{Rev: hr.rev, Source: hr.source, Chunks: hr.chunks,
				Missing: slices.Sorted(maps.Keys(hr.missing))})
		}
		s.Entries = append(s.Entries, se)
	}
	for _, k := range slices.SortedFunc(maps.Keys(p.mem), cmpKey) {
		m := p.mem[k]
		s.Memory = append(s.Memory, snapMemory{Doc: k.doc, Rev: k.rev, Rejected: m.rejected, Left: m.until.Sub(now)})
	}
	for _, doc := range slices.Sorted(maps.Keys(p.marks)) {
		m := p.marks[doc]
		s.Released = append(s.Released, snapMark{Doc: doc, Rev: m.rev, Left: m.until.Sub(now)})
	}
	return json.Marshal(s)
}

func cmpKey(a, b memKey) int {
	if a.doc != b.doc {
		if a.doc < b.doc {
			return -1
		}
		return 1
	}
	return CompareRevs(a.rev, b.rev)
}

// Restore loads a Snapshot into a purgatory that holds nothing yet
// (else ErrNotEmpty). now is the current wall time (normally
// time.Now()); the downtime now − SavedAt is subtracted from every timer,
// so timers continue where they were. A document whose deadlines passed
// during the downtime moves on at once: to soft expiry, or to expiry
// (dropped, remembered, logged) exactly as if the process had run. Held
// documents still active are enqueued in the Hunter with the pulled
// delay (the hunt's own schedule is not persisted), and the local store
// is rechecked for chunks that arrived while the purgatory was down.
func (p *Purgatory) Restore(data []byte, now time.Time) error {
	var s snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("purgatory: restore: %w: %v", engine.ErrMalformed, err)
	}
	if s.Version != snapshotVersion {
		return fmt.Errorf("purgatory: restore: snapshot version %d: %w", s.Version, engine.ErrUnsupported)
	}
	downtime := max(now.Sub(s.SavedAt), 0) // a clock that went back counts as no downtime
	p.relMu.Lock()
	defer p.relMu.Unlock()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	if len(p.entries) > 0 || len(p.mem) > 0 || len(p.marks) > 0 {
		p.mu.Unlock()
		return ErrNotEmpty
	}
	base := time.Now()
	at := func(left time.Duration) time.Time { return base.Add(left - downtime) }
	var recheck []engine.ChunkID
	for _, se := range s.Entries {
		if se.Doc == "" || len(se.Revisions) == 0 {
			continue
		}
		e := &entry{doc: se.Doc, since: at(-se.SinceAgo), reason: se.Reason, waited: se.Waited}
		switch se.State {
		case SoftExpired.String():
			e.state, e.softUntil = SoftExpired, at(se.Left)
		default:
			e.state, e.activeUntil = Active, at(se.Left)
		}
		if se.RetryLeft > 0 {
			e.retryAt = at(se.RetryLeft)
		}
		for _, sr := range se.Revisions {
			if e.find(sr.Rev) != nil {
				continue
			}
			hr := &heldRev{rev: sr.Rev, source: sr.Source, chunks: sr.Chunks, missing: map[engine.ChunkID]struct{}{}}
			for _, id := range sr.Missing {
				hr.missing[id] = struct{}{}
			}
			if len(hr.missing) == 0 && e.retryAt.IsZero() {
				e.retryAt = base // complete but not released: release now
			}
			e.insert(hr)
			p.index(e, hr)
		}
		p.entries[e.doc] = e
	}
	for _, m := range s.Memory {
		if until := at(m.Left); base.Before(until) {
			p.mem[memKey{m.Doc, m.Rev}] = memory{until: until, rejected: m.Rejected}
		}
	}
	for _, m := range s.Released {
		if until := at(m.Left); base.Before(until) {
			p.marks[m.Doc] = mark{rev: m.Rev, until: until}
		}
	}
	p.expireLocked(base)
	p.dueKnown = false // deadlines restored: the next tick looks at every entry
	for _, doc := range slices.Sorted(maps.Keys(p.entries)) {
		e := p.entries[doc]
		if e.state == Active {
			p.enqueueLocked(e, p.cfg.PulledDelay)
		}
	}
	recheck = slices.Sorted(maps.Keys(p.byChunk))
	p.log.Info("purgatory: restored", "held", len(p.entries), "remembered", len(p.mem), "downtime", downtime)
	p.mu.Unlock()

	if len(recheck) > 0 {
		got, err := p.deps.Local.GetChunks(context.Background(), recheck)
		if err != nil {
			p.log.Warn("purgatory: restore: local recheck failed", "reason", err.Error())
		} else if len(got) > 0 {
			p.ChunksArrived(slices.Sorted(maps.Keys(got)))
		}
	}
	p.wake()
	return nil
}
