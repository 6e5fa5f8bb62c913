package holdback

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/purgatory"
	"github.com/livesync-go/livesync-go/engine/store"
)

// A database served by several processes over one shared inner store
// (relays in front of one CouchDB): each process's hold-back holds,
// releases and drops through the shared holding area by atomic deltas
// (see area), so any of them releases a held note once its chunks are
// stored, and a release by two of them writes one revision (the held
// body is written with new_edits=false). One process at a time, the
// leader, hunts (its hold-back has the hunt as Hunter) and saves the
// purgatory state; the others, followers, never write that state and
// pick up the leader's. Every process refreshes its hold-back from the
// area now and then (Served.Refresh): it holds what others held (so the
// leader hunts every held note and a survivor releases a dead process's
// holds) and forgets what others released or dropped.

// sharing says how a Store shares its inner store.
type sharing struct {
	shared   bool // other processes serve the inner store too
	follower bool // another process saves the purgatory state
}

// newHold builds a hold-back over the Served's inner store with codec
// (nil: none) and hunter, shared as the configuration and the
// leadership say. ctx bounds the reads of the area and the state.
func (v *Served) newHold(ctx context.Context, codec *livesync.Codec, h purgatory.Hunter) (*Store, error) {
	return newStore(ctx, v.cfg.Holdback, Deps{Inner: noClose{v.inner}, Codec: codec, Hunter: h},
		sharing{shared: v.cfg.Shared, follower: v.cfg.Shared && !v.leader})
}

// Refresh makes this process's hold-back agree with the shared holding
// area: revisions held there that it does not know are held here too
// (and handed to the hunter, if any: a leader hunts every held note);
// revisions it holds that left the area (released or dropped by another
// process) are forgotten without writing anything. It reads only the
// index (one read, with the purgatory state) when the area did not
// change since the last Refresh. A follower whose leader saved a
// different purgatory state rebuilds its hold-back from the area and
// that state, so its timers are the leader's (absolute times). Without
// ServedConfig.Shared it does nothing.
func (v *Served) Refresh(ctx context.Context) error {
	if !v.cfg.Shared {
		return nil
	}
	got, err := store.GetLocals(ctx, v.inner, []string{localIndex, localState})
	if err != nil {
		return fmt.Errorf("database %q: refresh: %w", v.cfg.Name, err)
	}
	// Read before taking the lock: a rebuild meanwhile read the area
	// after this, so what follows is at worst a comparison too many.
	if err := v.lockRefresh(ctx); err != nil {
		return err
	}
	defer v.unlockRefresh()
	index, state := got[localIndex], got[localState]
	v.mu.RLock()
	leader, closed := v.leader, v.closed
	v.mu.RUnlock()
	if closed {
		return store.ErrClosed
	}
	// The state's bytes change with every save; its content (contentKey,
	// a parse) is compared only then.
	if !leader && state != nil && !bytes.Equal(state, v.seenStateRaw) {
		if key := contentKey(state); !bytes.Equal(key, v.seenState) {
			if err := v.rebuild(ctx, v.hooks.Hunter, false); err != nil {
				return err
			}
			// What decided the rebuild: a state that does not restore
			// is not rebuilt from again and again.
			v.synced, v.seenIndex, v.seenState, v.seenStateRaw = true, index, key, state
			return nil
		}
		v.seenStateRaw = state
	}
	if v.synced && bytes.Equal(index, v.seenIndex) {
		return nil
	}
	err = do(v, func(s *Store) error { return s.refresh(ctx) })
	if err != nil {
		return fmt.Errorf("database %q: refresh: %w", v.cfg.Name, err)
	}
	v.synced, v.seenIndex = true, index
	return nil
}

// SetHunter rebuilds the hold-back with hunter h (nil: none), as the
// vault's codec change does, and makes this process the leader (it
// saves the purgatory state from now) or a follower. The new hold-back
// resumes from the area and the purgatory state, and hands every held
// note that is still hunted to h. The old one saves the purgatory state
// first only if this process was the leader and stays it: one that
// loses the leadership leaves the state to the process that took it
// over (a save now could overwrite what that one saved since).
func (v *Served) SetHunter(ctx context.Context, h purgatory.Hunter, leader bool) error {
	if err := v.lockRefresh(ctx); err != nil {
		return fmt.Errorf("database %q: set hunter: %w", v.cfg.Name, err)
	}
	defer v.unlockRefresh()
	return v.rebuild(ctx, h, leader)
}

// rebuild replaces the hold-back with one with hunter h, as leader or
// follower. The caller holds rsem.
func (v *Served) rebuild(ctx context.Context, h purgatory.Hunter, leader bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return store.ErrClosed
	}
	old := v.cur.Load()
	wasLeader := v.leader
	v.beginSwap()
	if !v.cfg.Shared || wasLeader && leader {
		// Saved first, so that the new one resumes what the old one
		// knew last; nothing else writes meanwhile (v.mu).
		v.carry = addStats(v.carry, old.Stats())
		if err := old.Close(); err != nil {
			v.cfg.Log.Warn("saving the hold-back before the rebuild", "err", err)
		}
		old = nil
	} else {
		old.follower.Store(true)
	}
	v.leader = leader
	hb, err := v.newHold(ctx, v.codec, h)
	if err != nil {
		v.endSwap(nil)
		if old == nil {
			v.leader = wasLeader
			v.cfg.Log.Error("the hold-back could not be reopened; writes fail until it is", "err", err)
		} else {
			v.leader = !old.follower.Load() // the old one serves on, as it is now
		}
		return fmt.Errorf("database %q: rebuilding the hold-back: %w", v.cfg.Name, err)
	}
	v.endSwap(hb)
	if old != nil {
		// Closed after the new one resumed: a failed resume keeps it
		// serving. What it releases meanwhile (arrivals up to the swap,
		// applied by Settle) the new one sees done (the area lost the
		// revision) or makes again, to no effect.
		v.carry = addStats(v.carry, old.Stats())
		_ = old.Settle(ctx)
		if err := old.Close(); err != nil {
			v.cfg.Log.Warn("closing the hold-back after the rebuild", "err", err)
		}
	}
	v.hooks.Hunter = h
	v.seenState = hb.restoredKey
	v.cfg.Log.Info("the hold-back was rebuilt", "leader", leader, "hunter", h != nil, "held", len(hb.p.Held()))
	return nil
}

// lockRefresh takes rsem, or returns ctx's error when ctx ends first.
func (v *Served) lockRefresh(ctx context.Context) error {
	select {
	case v.rsem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (v *Served) unlockRefresh() { <-v.rsem }

// beginSwap starts keeping the chunk arrivals for the hold-back a
// rebuild is building: it may have read the store before they were
// written, and the one it replaces may be closed before applying them.
// The caller holds mu and calls endSwap.
func (v *Served) beginSwap() {
	v.amu.Lock()
	defer v.amu.Unlock()
	v.recording, v.pending = true, nil
}

// endSwap makes hb the hold-back (nil: the current one stays) and hands
// it the arrivals kept since beginSwap.
func (v *Served) endSwap(hb *Store) {
	v.amu.Lock()
	if hb != nil {
		v.cur.Store(hb)
	}
	ids := v.pending
	v.recording, v.pending = false, nil
	cur := v.cur.Load()
	v.amu.Unlock()
	cur.ChunksArrived(ids)
}

// Leader reports whether this process saves the shared purgatory state
// (SetHunter's leader).
func (v *Served) Leader() bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.leader
}

// forgetPhantoms forgets the revisions the restored purgatory state
// holds that are not in the holding area: released or dropped by
// another process after the state was saved. Called by newStore only.
func (s *Store) forgetPhantoms() {
	for _, h := range s.p.Held() {
		for _, rev := range h.Revisions {
			s.mu.Lock()
			in := s.held[h.Doc][rev] != nil
			s.mu.Unlock()
			if !in {
				s.p.Forget(h.Doc, rev)
			}
		}
	}
}

// refresh compares the holding area with what this Store holds: it
// holds the revisions others added and forgets, without writing, those
// that left it.
func (s *Store) refresh(ctx context.Context) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.gate.RUnlock()
	s.mu.Lock()
	g0 := s.gen // a revision held by then was in the area before the read below
	mine := slices.Collect(maps.Keys(s.held))
	s.mu.Unlock()
	docs, _, err := s.area.readIndex(ctx)
	if errors.Is(err, engine.ErrMalformed) {
		s.log.Error("holdback: the holding index is unreadable; only the documents held here are compared", "err", err)
		docs, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("holdback: reading the holding index: %w", err)
	}
	docs = slices.Compact(slices.Sorted(slices.Values(append(docs, mine...))))
	got, err := s.area.getMany(ctx, docs)
	if err != nil {
		return fmt.Errorf("holdback: reading the holding area: %w", err)
	}
	var adopt []found
	gone := map[string][]string{}
	s.mu.Lock()
	for _, doc := range docs {
		h, ok := got[doc]
		if ok && h.err != nil {
			continue // unreadable: neither adopted nor forgotten
		}
		for rev, hb := range h.doc.Revs {
			if s.held[doc][rev] == nil {
				adopt = append(adopt, found{doc, rev, hb})
			}
		}
		for rev, hr := range s.held[doc] {
			if _, in := h.doc.Revs[rev]; !in && hr.gen != 0 && hr.gen <= g0 {
				gone[doc] = append(gone[doc], rev)
			}
		}
	}
	s.mu.Unlock()
	s.forgetGone(gone, g0)
	return s.adopt(ctx, adopt, got)
}

// forgetGone forgets the revisions that left the holding area, held
// here (and accepted by the purgatory) by generation g0.
func (s *Store) forgetGone(gone map[string][]string, g0 uint64) {
	for _, doc := range slices.Sorted(maps.Keys(gone)) {
		revs := gone[doc]
		var left []string
		s.mu.Lock()
		s.dropLocked(doc, func(r string) bool {
			if h := s.held[doc][r]; slices.Contains(revs, r) && h.gen != 0 && h.gen <= g0 {
				left = append(left, r)
				return true
			}
			return false
		})
		s.mu.Unlock()
		for _, rev := range left {
			s.p.Forget(doc, rev)
		}
		if len(left) > 0 {
			s.log.Info("holdback: held revisions left the shared holding area", "doc", doc, "revisions", len(left))
		}
	}
}

// adopt holds revisions another process put in the holding area, older
// ones first, as resume holds those an earlier run left. got is the
// area as read, for the owners.
func (s *Store) adopt(ctx context.Context, adopt []found, got map[string]held) error {
	if len(adopt) == 0 {
		return nil
	}
	slices.SortFunc(adopt, func(a, b found) int {
		return cmp.Or(cmp.Compare(a.doc, b.doc), purgatory.CompareRevs(a.rev, b.rev))
	})
	ids := make([]string, 0, len(adopt))
	for _, f := range adopt {
		ids = append(ids, f.doc)
	}
	unlock := s.locks.lock(slices.Compact(ids))
	defer unlock()
	n := 0
	for _, f := range adopt {
		r := hold.Revision{Doc: f.doc, Rev: f.rev}
		j := classify(s.codec, f.hb.Body)
		if j.kind == kindMeta {
			r = j.r
		}
		s.mu.Lock()
		if s.held[f.doc][f.rev] != nil { // held here meanwhile
			s.mu.Unlock()
			continue
		}
		if s.held[f.doc] == nil {
			s.claimLocked(f.doc, got[f.doc].doc.Owner) // over a limit, it stays held
		}
		s.addRevLocked(f.doc, f.rev, distinct(r.Chunks))
		s.mu.Unlock()
		n++
		out, err := s.p.Hold(ctx, r, f.hb.Source)
		if err := s.settled(ctx, r, f.hb.Source, out, err, false); err != nil {
			s.mu.Lock()
			s.dropLocked(f.doc, func(rev string) bool { return rev == f.rev })
			s.mu.Unlock()
			return fmt.Errorf("holdback: holding %q: %w", f.doc, err)
		}
	}
	if n > 0 {
		s.log.Info("holdback: held revisions adopted from the shared holding area", "revisions", n)
	}
	return nil
}
