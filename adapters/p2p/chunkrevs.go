//go:build !js

package p2p

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// ChunkRevReader is a ChunkReader that also knows the revision of each
// chunk document it holds. The chunks server sends those revisions with
// the chunks, so that a peer keeping the remote form (the relay) can
// store what it fetched as the very document the other replicas hold,
// same id and revision, with new_edits=false. A ChunkReader without it
// serves chunks without revisions.
type ChunkRevReader interface {
	// ChunkRevs returns the revision of each chunk of ids that is
	// stored; absent ids are left out.
	ChunkRevs(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]string, error)
}

// addRevs fills in the revisions of found when r knows them. They are
// optional on the wire: a failed look-up serves the chunks without them.
func addRevs(ctx context.Context, r ChunkReader, found []wireChunk) {
	rr, ok := r.(ChunkRevReader)
	if !ok || len(found) == 0 {
		return
	}
	ids := make([]engine.ChunkID, len(found))
	for i, c := range found {
		ids[i] = c.ID
	}
	revs, err := rr.ChunkRevs(ctx, ids)
	if err != nil {
		return
	}
	for i := range found {
		found[i].Rev = revs[found[i].ID]
	}
}

// DocStore is a store whose chunks are documents read by Get (a
// store.Store, such as the relay's hold-back database).
type DocStore interface {
	ChunkReader
	Get(ctx context.Context, id string, opts store.GetOptions) (json.RawMessage, error)
}

// DocChunks serves st's chunks with their revisions, read from the
// chunk documents (a ChunkRevReader).
func DocChunks(st DocStore) ChunkReader { return docChunks{st} }

type docChunks struct{ DocStore }

// ChunkRevs reads each chunk document's _rev.
func (d docChunks) ChunkRevs(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]string, error) {
	out := make(map[engine.ChunkID]string, len(ids))
	for _, id := range ids {
		raw, err := d.Get(ctx, id, store.GetOptions{})
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var head struct {
			Rev string `json:"_rev"`
		}
		if json.Unmarshal(raw, &head) == nil && head.Rev != "" {
			out[id] = head.Rev
		}
	}
	return out, nil
}

// RawChunk is a chunk as a peer serves it: its data in the remote form
// (encrypted for an end-to-end encrypted vault), never decoded, and the
// chunk document's revision ("" when the peer did not send one).
type RawChunk struct {
	ID   engine.ChunkID
	Data string
	Rev  string
}

// ChunkClient returns a client of the peer's chunks that serves them as
// the peer holds them (FetchRaw); what it fetches is counted in the
// group's meter.
func (r *Remote) ChunkClient() *ChunkClient {
	return &ChunkClient{host: r.host, peer: r.peer, timeout: r.c.timeout, meter: r.meter}
}

// FetchRaw asks the peer for ids on a new stream and returns the chunks
// in the remote form with their revisions, and the ids the peer lacks.
// Errors are FetchChunks's.
func (c *ChunkClient) FetchRaw(ctx context.Context, ids []engine.ChunkID) ([]RawChunk, []engine.ChunkID, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.roundTrip(ctx, ids)
	if err != nil {
		if ctxErr := context.Cause(ctx); ctx.Err() != nil && !errors.Is(err, ErrRefused) {
			return nil, nil, &engine.Error{Op: "p2p fetch chunks", Stage: engine.StageTransport,
				Err: fmt.Errorf("peer %s: %w", c.peer, ctxErr)}
		}
		return nil, nil, err
	}
	if _, err := checkAnswer(ids, resp); err != nil {
		return nil, nil, &engine.Error{Op: "p2p fetch chunks", Stage: engine.StageProtocol, Err: err}
	}
	found := make([]RawChunk, len(resp.Found))
	for i, w := range resp.Found {
		found[i] = RawChunk{ID: w.ID, Data: w.Data, Rev: w.Rev}
	}
	c.meter.add(c.peer, func(pc *PeerCounters) { pc.ChunksIn += uint64(len(found)) })
	return found, resp.Missing, nil
}
