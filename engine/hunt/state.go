package hunt

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// State is what a Hunt knows that must outlive its process so that a
// bounded run (a Cron Trigger, a short-lived command) hands its
// politeness, backoff and memo to the next: see Hunt.State and
// Hunt.Restore. It holds throttle keys, document ids, fingerprints, chunk
// ids and times; never chunk contents. Times are wall-clock instants.
type State struct {
	// Throttles are, per throttle key, the request starts still inside
	// the sliding Window, oldest first.
	Throttles map[string][]time.Time `json:"throttles,omitempty"`
	// Docs are the hunted documents' backoff.
	Docs map[string]DocState `json:"docs,omitempty"`
	// Memo is the lacked-ids memo, one element per source.
	Memo []MemoState `json:"memo,omitempty"`
}

// DocState is one hunted document's backoff: the passes that ended
// incomplete since its last fresh start, and the earliest start of its
// next pass.
type DocState struct {
	Attempts int       `json:"attempts"`
	Next     time.Time `json:"next"`
}

// MemoState is one source's memo: the ids it answered it lacks while its
// fingerprint was Fingerprint, valid until Until.
type MemoState struct {
	Source      string           `json:"source"`
	Fingerprint string           `json:"fingerprint"`
	IDs         []engine.ChunkID `json:"ids"`
	Until       time.Time        `json:"until"`
}

// Bounds on what Restore accepts from a State (it may come from storage
// another party can write): the excess is ignored, in a deterministic
// order, and logged. Variables only so that a test can lower them.
var (
	maxStateThrottles = 4096
	maxStateDocs      = 100_000
	maxStateMemoIDs   = 100_000
)

const maxStateAttempts = 1 << 16

// State returns a consistent copy of what a later Hunt needs to continue
// this one (see Restore). It may be called at any time, also after
// Close. Throttle starts that left the Window and expired memos are
// left out.
func (h *Hunt) State() State {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	var s State
	for _, k := range slices.Sorted(maps.Keys(h.throttles)) {
		if starts := h.throttles[k].inWindow(now); len(starts) > 0 {
			if s.Throttles == nil {
				s.Throttles = make(map[string][]time.Time)
			}
			s.Throttles[k] = starts
		}
	}
	for _, e := range h.list {
		if s.Docs == nil {
			s.Docs = make(map[string]DocState, len(h.list))
		}
		s.Docs[e.doc] = DocState{Attempts: e.attempts, Next: e.next.Round(0)}
	}
	s.Memo = h.memo.state(now)
	return s
}

// Restore seeds the Hunt with s, the State of an earlier Hunt: call it
// after New, before or after AddSource, and before Enqueue. Request
// starts older than the Window are dropped and the rest count against
// their throttle key's MaxPerWindow; memos keep applying while their
// source's fingerprint is unchanged, until they expire. A document
// Enqueued later whose DocState is known keeps its Attempts, and its
// first pass here is not due before max(now+delay, Next). A restored
// document that is never Enqueued is not hunted and is not in the next
// State.
//
// s is validated, not trusted: negative attempts count as 0, times in
// the future are clamped to what this Hunt could have produced (a start
// to now, a Next to now+BackoffCap, a memo to now+MemoTTL), empty keys
// are ignored, and beyond fixed bounds (4096 throttle keys, 100 000
// documents, 100 000 memo ids, MemoSources memos) the rest is ignored.
// Restore never fails; what it ignored is logged.
func (h *Hunt) Restore(s State) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	now := time.Now()
	ignored := 0
	for i, k := range slices.Sorted(maps.Keys(s.Throttles)) {
		if k == "" || i >= maxStateThrottles {
			ignored++
			continue
		}
		h.throttle(k).restore(s.Throttles[k], now)
	}
	ignored += h.restoreDocs(s.Docs, now)
	ignored += h.memo.restore(s.Memo, now, maxStateMemoIDs)
	if ignored > 0 {
		h.log.Warn("hunt: restored state had entries out of bounds; ignored", "ignored", ignored)
	}
	h.log.Debug("hunt state restored", "throttles", len(s.Throttles), "docs", len(s.Docs), "memos", len(s.Memo))
	h.trigger()
}

// Saturate counts MaxPerWindow request starts at at (clamped to now)
// against every throttle key, those known now and those first used
// later, so no request starts to any source before at+Window. It is for
// a Hunt that continues one whose last requests are unknown: one that
// ended without saving its State, when at is the last instant it could
// have made a request. Its requests, at most MaxPerWindow per key in any
// Window and none after at, have then all left the Window before this
// Hunt makes its first, so the limits hold across both. The starts are
// part of State, so a Hunt that continues this one keeps them.
func (h *Hunt) Saturate(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	now := time.Now()
	if at.After(now) {
		at = now
	}
	if at.After(h.saturated) {
		h.saturated = at
	}
	for _, t := range h.throttles {
		t.saturate(h.saturated, now)
	}
	h.log.Debug("hunt: every source's window counted as full", "until", h.saturated.Add(h.cfg.Window))
	h.trigger()
}

// restoreDocs records the backoff of docs for their Enqueue (under the
// lock) and applies it to documents already enqueued and not in a pass.
// It returns how many it ignored.
func (h *Hunt) restoreDocs(docs map[string]DocState, now time.Time) int {
	ignored := 0
	if h.restored == nil && len(docs) > 0 {
		h.restored = make(map[string]DocState, min(len(docs), maxStateDocs))
	}
	for _, doc := range slices.Sorted(maps.Keys(docs)) {
		if doc == "" || len(h.restored) >= maxStateDocs {
			ignored++
			continue
		}
		ds := docs[doc]
		ds.Attempts = min(max(ds.Attempts, 0), maxStateAttempts)
		if limit := now.Add(h.cfg.BackoffCap); ds.Next.After(limit) {
			ds.Next = limit // no pass ever waits longer than the cap
		}
		if e := h.entries[doc]; e != nil {
			if !e.inPass {
				e.restore(ds)
			}
			continue
		}
		h.restored[doc] = ds
	}
	return ignored
}

// Quiet returns nil when the Hunt has nothing to do now: no request is
// in flight and every document still hunted waits for a later pass (its
// last pass ended incomplete, or its restored backoff runs: Next in the
// future), and every event was delivered. A document waiting for its
// first pass after an Enqueue delay is work to do, not quiet. Quiet
// returns ctx's error if that does not happen first, and nil once the
// Hunt is closed. A bounded run hunts until Quiet (or its deadline),
// then saves State.
func (h *Hunt) Quiet(ctx context.Context) error {
	return h.waitFor(ctx, func() bool { return h.quietLocked(time.Now()) })
}

func (h *Hunt) quietLocked(now time.Time) bool {
	if len(h.pending) > 0 || h.flushing > 0 {
		return false
	}
	for _, t := range h.throttles {
		if n, _ := t.load(now); n > 0 {
			return false
		}
	}
	for _, e := range h.list {
		if e.inPass || e.checkRunning || len(e.running) > 0 || !e.backoff || !e.next.After(now) {
			return false
		}
	}
	return true
}
