package holdback

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"github.com/livesync-go/livesync-go/engine/purgatory"
)

// A released revision is written to the inner store first, which is
// what serves it; taking it (and the older ones of its document) out of
// the holding area is only housekeeping. When the area is this Store's
// alone (area.exclusive), that second write is deferred and gathered:
// the removals of many releases are written together, once removeBatch
// documents wait, with the next hold (in the same transaction) and at
// every save and Close. A crash before they are written leaves released
// revisions in the holding area; resume finds them in the inner store
// and drops them without serving anything again.

// removeBatch is how many documents' removals wait before they are
// written.
const removeBatch = 512

// maxCachedBodies bounds the bytes of held bodies kept in memory, so that
// a release need not read and decode them from the holding area again.
// Past it, bodies are read from the holding area as before.
const maxCachedBodies = 64 << 20

// removals are the holding-area removals waiting to be written: per
// document, the newest released revision (its revisions not newer leave).
type removals struct {
	mu   sync.Mutex
	upTo map[string]string
}

// add merges upTo into the waiting removals and returns how many
// documents wait.
func (r *removals) add(upTo map[string]string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.upTo == nil {
		r.upTo = make(map[string]string, len(upTo))
	}
	for doc, rev := range upTo {
		if old, ok := r.upTo[doc]; !ok || purgatory.CompareRevs(old, rev) < 0 {
			r.upTo[doc] = rev
		}
	}
	return len(r.upTo)
}

// takeAll returns every waiting removal and forgets them.
func (r *removals) takeAll() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.upTo
	r.upTo = nil
	return out
}

// take returns the waiting removals of docs and forgets them.
func (r *removals) take(docs []string) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out map[string]string
	for _, doc := range docs {
		if rev, ok := r.upTo[doc]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[doc] = rev
			delete(r.upTo, doc)
		}
	}
	return out
}

// older is the removal predicate: a revision not newer than the released
// one leaves.
func older(r, rev string) bool { return purgatory.CompareRevs(r, rev) <= 0 }

// removeReleased takes the revisions up to upTo out of the holding area:
// at once unless the area is this Store's alone, else when enough wait
// (see removals).
func (s *Store) removeReleased(ctx context.Context, upTo map[string]string) {
	if !s.area.exclusive() {
		if err := s.area.removeMany(ctx, upTo, older); err != nil {
			s.saveFailed("holding area", err)
		}
		return
	}
	if s.rm.add(upTo) >= removeBatch {
		s.flushRemovals(ctx)
	}
}

// flushRemovals writes every waiting removal; on failure they wait
// again.
func (s *Store) flushRemovals(ctx context.Context) {
	upTo := s.rm.takeAll()
	if len(upTo) == 0 {
		return
	}
	if err := s.area.removeMany(ctx, upTo, older); err != nil {
		s.rm.add(upTo)
		s.saveFailed("holding area", err)
	}
}

// dropServed takes out of the holding area (and of the counts) the
// revisions of found that the inner store has already: released by a
// run that stopped before it removed them. It returns the others.
func (s *Store) dropServed(ctx context.Context, all []found, known map[[2]string]struct{}) ([]found, error) {
	ask := map[string][]string{}
	for _, f := range all {
		if _, ok := known[[2]string{f.doc, f.rev}]; !ok {
			ask[f.doc] = append(ask[f.doc], f.rev)
		}
	}
	if len(ask) == 0 {
		return all, nil
	}
	missing, err := s.inner.RevsDiff(ctx, ask)
	if err != nil {
		return nil, err
	}
	served := map[string][]string{}
	for doc, revs := range ask {
		for _, rev := range revs {
			if !slices.Contains(missing[doc], rev) {
				served[doc] = append(served[doc], rev)
			}
		}
	}
	if len(served) == 0 {
		return all, nil
	}
	s.mu.Lock()
	for doc, revs := range served {
		s.dropLocked(doc, func(r string) bool { return slices.Contains(revs, r) })
	}
	s.mu.Unlock()
	err = s.area.removeWhere(ctx, slices.Sorted(maps.Keys(served)), func(doc, r string) bool {
		return slices.Contains(served[doc], r)
	})
	if err != nil {
		s.saveFailed("holding area", err)
	}
	s.log.Info("holdback: released revisions left in the holding area were dropped", "documents", len(served))
	return slices.DeleteFunc(all, func(f found) bool { return slices.Contains(served[f.doc], f.rev) }), nil
}

// cacheBodyLocked keeps body as the held body of h, within
// maxCachedBodies.
func (s *Store) cacheBodyLocked(h *hrev, source string, body json.RawMessage) {
	if h == nil || !s.area.exclusive() || s.cached+len(body) > maxCachedBodies {
		return
	}
	h.body = heldBody{Source: source, Body: append(json.RawMessage(nil), body...)}
	h.cached = true
	s.cached += len(body)
}

// cachedBody returns the held body of doc's rev kept in memory.
func (s *Store) cachedBody(doc, rev string) (json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.held[doc][rev]; h != nil && h.cached {
		return h.body.Body, true
	}
	return nil, false
}
