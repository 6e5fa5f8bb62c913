package holdback

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/livesync-go/livesync-go/engine"
)

// release is the purgatory's Deps.Release: releaseMany for one revision.
func (s *Store) release(ctx context.Context, doc, rev string) error {
	return s.releaseMany(ctx, []engine.DocRev{{ID: doc, Rev: rev}})[0]
}

// releaseMany is the purgatory's Deps.ReleaseMany: the held bodies are
// written to the inner store (new_edits=false) in one call, where each
// gets a new sequence after every sequence a reader can have seen, and
// each released revision and every older one of its document leave the
// holding area (a write that waits to be gathered with others: see
// removals). A revision is released only if every
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
	bodies := make([]json.RawMessage, len(revs))
	var docs []string // read from the holding area: not kept in memory
	for i, r := range revs {
		if b, ok := s.cachedBody(r.ID, r.Rev); ok {
			bodies[i] = b
		} else {
			docs = append(docs, r.ID)
		}
	}
	var got map[string]held
	if len(docs) > 0 {
		var err error
		if got, err = s.area.getMany(ctx, docs); err != nil {
			return fail(err)
		}
	}
	chunks := make([][]engine.ChunkID, len(revs))
	var ask []engine.ChunkID
	for i, r := range revs {
		if bodies[i] != nil {
			chunks[i] = s.revChunks(r, bodies[i])
			ask = append(ask, chunks[i]...)
			continue
		}
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
		chunks[i] = s.revChunks(r, hb.Body)
		ask = append(ask, chunks[i]...)
	}
	c := carryOf(ctx) // chunks being written, counted as stored if it writes them
	if c != nil {
		ask = slices.DeleteFunc(ask, c.has)
	}
	have := map[engine.ChunkID]engine.Chunk{}
	if len(ask) > 0 {
		var err error
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
			} else if c.has(id) {
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
	res, err := s.writeReleases(ctx, c, batch)
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
	s.mu.Lock()
	for doc, rev := range upTo {
		s.dropLocked(doc, func(r string) bool { return older(r, rev) })
		s.n.released++
	}
	s.mu.Unlock()
	if len(upTo) == 0 {
		return errs
	}
	s.removeReleased(ctx, upTo)
	for doc, rev := range upTo {
		s.log.Debug("holdback: held revision released", "doc", doc, "rev", rev)
	}
	s.log.Info("holdback: held revisions released", "notes", len(upTo))
	return errs
}

// revChunks returns the distinct chunk ids of the held revision r, whose
// body is body: as its hold recorded them, else read from body.
func (s *Store) revChunks(r engine.DocRev, body json.RawMessage) []engine.ChunkID {
	if cs, ok := s.heldChunks(r.ID, r.Rev); ok {
		return cs
	}
	if j := classify(s.codec, body); j.kind == kindMeta && len(j.r.Chunks) > 0 {
		return slices.Compact(slices.Sorted(slices.Values(j.r.Chunks)))
	}
	return nil
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

// writeReleases writes the released bodies batch to the inner store in
// one call, after the carried documents of c (nil: none), and returns
// the answers to batch.
func (s *Store) writeReleases(ctx context.Context, c *carry, batch []json.RawMessage) ([]engine.BulkDocResult, error) {
	all := batch
	if c != nil {
		all = append(append(make([]json.RawMessage, 0, len(c.docs)+len(batch)), c.docs...), batch...)
	}
	res, err := s.inner.BulkDocs(ctx, all)
	if err == nil && len(res) != len(all) {
		err = &engine.Error{Op: "release held revisions", Stage: engine.StageStorage,
			Err: fmt.Errorf("holdback: the inner store answered %d results for %d documents", len(res), len(all))}
	}
	if c == nil {
		return res, err
	}
	if err != nil {
		c.err = err
		return nil, err
	}
	c.written, c.res = true, res[:len(c.docs)]
	return res[len(c.docs):], nil
}
