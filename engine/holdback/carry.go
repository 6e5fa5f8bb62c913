package holdback

import (
	"context"
	"encoding/json"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// A client's batch of chunks that completes held notes releases them
// before it is answered (WithSettle). When the inner store writes a
// batch in one transaction, the batch and the notes it completes are
// written in one inner BulkDocs: BulkDocsFrom hands its write to the
// purgatory's SettleArriving in a carry, and the release writes the
// carried documents first, then the released notes, or BulkDocsFrom
// writes them itself when nothing was released. One transaction instead
// of two per batch of chunks; the released notes still come after their
// chunks, in the same commit.

// carry is a write that a release may take on (see above).
type carry struct {
	docs []json.RawMessage
	// chunks are the chunks among docs that the inner store accepts, as
	// far as their classification can tell: a release counts them as
	// stored.
	chunks map[engine.ChunkID]struct{}
	// written: a release wrote docs, answered res (docs order), or
	// failed with err (then nothing was written).
	written bool
	res     []engine.BulkDocResult
	err     error
}

type carryKey struct{}

// has reports whether id is among the carried chunks (c may be nil).
func (c *carry) has(id engine.ChunkID) bool {
	if c == nil {
		return false
	}
	_, ok := c.chunks[id]
	return ok
}

// carryOf returns the carry of ctx that no release has written yet.
func carryOf(ctx context.Context) *carry {
	c, _ := ctx.Value(carryKey{}).(*carry)
	if c == nil || c.written || c.err != nil {
		return nil
	}
	return c
}

// carries reports whether writes can be carried by releases: the area
// is this Store's alone, over the store's own kind, which writes a
// batch in one transaction (area.exclusive).
func (s *Store) carries() bool { return s.area.exclusive() }

// carriedChunks returns the chunks of js[idx] that the inner store
// accepts as far as their classification tells.
func carriedChunks(js []judged, idx []int) map[engine.ChunkID]struct{} {
	out := map[engine.ChunkID]struct{}{}
	for _, i := range idx {
		j := js[i]
		if j.kind == kindChunk && len(j.id) <= store.MaxIDLength && len(j.rev) <= store.MaxRevLength {
			out[j.id] = struct{}{}
		}
	}
	return out
}

// writeCarried writes batch (docs[idx] of a client's push bringing
// chunks) with the releases those chunks make due, in one inner write
// when a release takes the batch on, and returns the inner store's
// answers to batch.
func (s *Store) writeCarried(ctx context.Context, batch []json.RawMessage, js []judged, idx []int) ([]engine.BulkDocResult, error) {
	c := &carry{docs: batch, chunks: carriedChunks(js, idx)}
	ids := make([]engine.ChunkID, 0, len(c.chunks))
	for id := range c.chunks {
		ids = append(ids, id)
	}
	if err := s.p.SettleArriving(context.WithValue(ctx, carryKey{}, c), ids); err != nil && ctx.Err() == nil {
		s.log.Warn("holdback: releasing the notes completed by a push", "err", err)
	}
	switch {
	case c.err != nil:
		return nil, c.err
	case c.written:
		return c.res, nil
	}
	return s.inner.BulkDocs(ctx, batch)
}
