package holdback

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/purgatory"
)

// release is the purgatory's Deps.Release: releaseMany for one revision.
func (s *Store) release(ctx context.Context, doc, rev string) error {
	return s.releaseMany(ctx, []engine.DocRev{{ID: doc, Rev: rev}})[0]
}

// releaseMany is the purgatory's Deps.ReleaseMany: the held bodies are
// written to the inner store (new_edits=false) in one call, where each
// gets a new sequence after every sequence a reader can have seen, and
// each released revision and every older one of its document leave the
// holding area, in one more write. A revision is released only if every
// chunk it names is stored, whatever announced them. Called one at a
// time by the purgatory, with one revision per document.
func (s *Store) releaseMany(ctx context.Context, revs []engine.DocRev) []error {
	errs := make([]error, len(revs))
	fail := func(err error) []error {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	docs := make([]string, len(revs))
	for i, r := range revs {
		docs[i] = r.ID
	}
	got, err := s.area.getMany(ctx, docs)
	if err != nil {
		return fail(err)
	}
	bodies := make([]json.RawMessage, len(revs))
	chunks := make([][]engine.ChunkID, len(revs))
	var ask []engine.ChunkID
	for i, r := range revs {
		h, ok := got[r.ID]
		if ok && h.err != nil {
			errs[i] = h.err // a malformed holding document is ErrMalformed: rejected
			continue
		}
		hb, ok := h.doc.Revs[r.Rev]
		if !ok {
			// Bodies are kept before the purgatory sees a revision, so a
			// missing one left for good (pruned, or lost with its
			// holding document).
			s.mu.Lock()
			s.dropLocked(r.ID, func(x string) bool { return x == r.Rev })
			s.mu.Unlock()
			errs[i] = fmt.Errorf("holdback: no held body for %q rev %s: %w", r.ID, r.Rev, engine.ErrNotFound)
			continue
		}
		bodies[i] = hb.Body
		if cs, ok := s.heldChunks(r.ID, r.Rev); ok {
			chunks[i] = cs
		} else if j := classify(s.codec, hb.Body); j.kind == kindMeta && len(j.r.Chunks) > 0 {
			chunks[i] = slices.Compact(slices.Sorted(slices.Values(j.r.Chunks)))
		}
		ask = append(ask, chunks[i]...)
	}
	have := map[engine.ChunkID]engine.Chunk{}
	if len(ask) > 0 {
		if have, err = s.inner.GetChunks(ctx, slices.Compact(slices.Sorted(slices.Values(ask)))); err != nil {
			return fail(err)
		}
	}
	var batch []json.RawMessage
	var idx []int
	for i, r := range revs {
		if errs[i] != nil {
			continue
		}
		n := 0
		for _, id := range chunks[i] {
			if _, ok := have[id]; ok {
				n++
			}
		}
		if n < len(chunks[i]) { // never served before its chunks
			errs[i] = fmt.Errorf("holdback: %q rev %s: %d of %d chunks stored: %w", r.ID, r.Rev, n, len(chunks[i]), engine.ErrMissingChunk)
			continue
		}
		batch = append(batch, bodies[i])
		idx = append(idx, i)
	}
	if len(batch) == 0 {
		return errs
	}
	res, err := s.inner.BulkDocs(ctx, batch)
	if err == nil && len(res) != len(batch) {
		err = &engine.Error{Op: "release held revisions", Stage: engine.StageStorage,
			Err: fmt.Errorf("holdback: the inner store answered %d results for %d documents", len(res), len(batch))}
	}
	if err != nil {
		return fail(err)
	}
	return s.released(ctx, revs, idx, res, errs)
}

// released records the inner store's answers res to the releases of
// revs[idx]: a written revision and the older ones of its document leave
// the holding area (in memory, then in one area write).
func (s *Store) released(ctx context.Context, revs []engine.DocRev, idx []int, res []engine.BulkDocResult, errs []error) []error {
	upTo := map[string]string{}
	for k, i := range idx {
		r := revs[i]
		if res[k].Error != "" {
			errs[i] = &engine.Error{Op: "release held revision", DocID: r.ID, Stage: engine.StageStorage,
				Err: fmt.Errorf("holdback: the store refused rev %s (%s: %s): %w", r.Rev, res[k].Error, res[k].Reason, engine.ErrMalformed)}
			continue
		}
		upTo[r.ID] = r.Rev
	}
	older := func(r, rev string) bool { return purgatory.CompareRevs(r, rev) <= 0 }
	s.mu.Lock()
	for doc, rev := range upTo {
		s.dropLocked(doc, func(r string) bool { return older(r, rev) })
		s.n.released++
	}
	s.mu.Unlock()
	if len(upTo) == 0 {
		return errs
	}
	if err := s.area.removeMany(ctx, upTo, older); err != nil {
		s.saveFailed("holding area", err)
	}
	for doc, rev := range upTo {
		s.log.Debug("holdback: held revision released", "doc", doc, "rev", rev)
	}
	s.log.Info("holdback: held revisions released", "notes", len(upTo))
	return errs
}

// heldChunks returns the distinct chunk ids of a held revision, if its
// hold recorded them.
func (s *Store) heldChunks(doc, rev string) ([]engine.ChunkID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.held[doc][rev]; h != nil && h.known {
		return h.chunks, true
	}
	return nil, false
}
