//go:build !js

package livesyncp2p

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
)

// MaxChunkIDs is the most ids one FetchChunks may ask for, as
// engine.ChunkSource's callers promise.
const MaxChunkIDs = 100

// ThrottlePrefix begins the throttle key of a peer's chunk source; the
// peer id follows.
const ThrottlePrefix = "livesync-p2p:"

// chunkSource fetches chunk documents from one peer with db.bulkGet.
type chunkSource struct {
	n      *Node
	peer   string
	authed atomic.Bool // the peer has answered legacy/!reqAuth with true
}

var _ engine.ChunkSource = (*chunkSource)(nil)

// ChunkSource returns an engine.ChunkSource that fetches chunks from
// peer (a peer id) over the room: db.bulkGet of the chunk ids without
// revisions, which the plugin's database (PouchDB's bulkGet) and this
// package's peers answer with each document's winning revision. The
// documents are the peer's plaintext local form, so the chunks need no
// decoding. An id the peer answers not_found (or deleted) is Missing; a
// peer that is gone, does not answer (one that has not accepted this node
// drops the request) or answers nonsense is an error. Before its first
// fetch, the source asks the peer whether it accepts this node
// (legacy/!reqAuth, which an interactive plugin turns into its prompt):
// a refusal is an error wrapping livesyncrpc.ErrRejected at once rather
// than a dropped request's 40-second timeout, and the question is asked
// again on the next fetch.
func (n *Node) ChunkSource(peer string) engine.ChunkSource { return &chunkSource{n: n, peer: peer} }

// CanFetchDirect is true: a peer serves documents by id.
func (s *chunkSource) CanFetchDirect() bool { return true }

// ThrottleKey is ThrottlePrefix followed by the peer id.
func (s *chunkSource) ThrottleKey() string { return ThrottlePrefix + s.peer }

type bulkGetAnswer struct {
	Results []struct {
		ID   string `json:"id"`
		Docs []struct {
			OK    json.RawMessage `json:"ok"`
			Error json.RawMessage `json:"error"`
		} `json:"docs"`
	} `json:"results"`
}

// FetchChunks asks the peer for ids (at most MaxChunkIDs, each once).
func (s *chunkSource) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	if err := ctx.Err(); err != nil {
		return engine.FetchResult{}, err
	}
	if len(ids) > MaxChunkIDs {
		return engine.FetchResult{}, fmt.Errorf("livesyncp2p: fetch chunks: %d ids, at most %d per request", len(ids), MaxChunkIDs)
	}
	if len(ids) == 0 {
		return engine.FetchResult{}, nil
	}
	want := make(map[string]bool, len(ids))
	reqs := make([]map[string]string, len(ids))
	for i, id := range ids {
		if want[id] {
			return engine.FetchResult{}, fmt.Errorf("livesyncp2p: fetch chunks: id %q twice in one request", id)
		}
		want[id] = true
		reqs[i] = map[string]string{"id": id}
	}
	if err := s.auth(ctx); err != nil {
		return engine.FetchResult{}, err
	}
	raw, err := s.n.hosted.RPC.Call(ctx, s.peer, livesyncrpc.MethodBulkGet, map[string]any{"docs": reqs})
	if err != nil {
		return engine.FetchResult{}, s.callError(ctx, err)
	}
	found, err := parseBulkGet(raw, want)
	if err != nil {
		return engine.FetchResult{}, &engine.Error{Op: "p2p fetch chunks", Stage: engine.StageProtocol, Err: fmt.Errorf("peer %s: %w", s.peer, err)}
	}
	var res engine.FetchResult
	for _, id := range ids {
		if c, ok := found[id]; ok {
			res.Found = append(res.Found, c)
		} else {
			res.Missing = append(res.Missing, id)
		}
	}
	return res, nil
}

// auth asks the peer once whether it accepts this node.
func (s *chunkSource) auth(ctx context.Context) error {
	if s.authed.Load() {
		return nil
	}
	_ = s.n.hosted.Advertise(s.peer) // see WaitPeer
	raw, err := s.n.hosted.RPC.Call(ctx, s.peer, livesyncrpc.MethodReqAuth, s.n.SelfID())
	if err != nil {
		return s.callError(ctx, err)
	}
	if string(raw) != "true" {
		return &engine.Error{Op: "p2p fetch chunks", Stage: engine.StageAuth,
			Err: fmt.Errorf("peer %s: %w", s.peer, livesyncrpc.ErrRejected)}
	}
	s.authed.Store(true)
	return nil
}

// callError describes a failed call: ctx's end as itself, anything
// else as a transport failure.
func (s *chunkSource) callError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("livesyncp2p: fetch chunks from %s: %w", s.peer, ctx.Err())
	}
	return &engine.Error{Op: "p2p fetch chunks", Stage: engine.StageTransport, Err: fmt.Errorf("peer %s: %w", s.peer, err)}
}

// parseBulkGet reads a bulkGet answer: the chunks found among want. An
// error entry or a deleted document is an omission; a result for an id
// not asked for, a document under another id or one that is not a
// plaintext chunk is malformed.
func parseBulkGet(raw json.RawMessage, want map[string]bool) (map[string]engine.Chunk, error) {
	var a bulkGetAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("%w: bulkGet answer: %v", engine.ErrMalformed, err)
	}
	found := map[string]engine.Chunk{}
	for _, r := range a.Results {
		if !want[r.ID] {
			return nil, fmt.Errorf("%w: bulkGet answered id %q, which was not asked for", engine.ErrMalformed, r.ID)
		}
		for _, d := range r.Docs {
			if len(d.OK) == 0 || string(d.OK) == "null" {
				continue
			}
			doc, err := livesync.ParseDoc(d.OK)
			if err != nil {
				return nil, err
			}
			if doc.ID() != r.ID {
				return nil, fmt.Errorf("%w: bulkGet answered document %q for id %q", engine.ErrMalformed, doc.ID(), r.ID)
			}
			if doc.Deleted() {
				continue
			}
			c, err := livesync.ParseChunk(doc)
			if err != nil {
				return nil, err
			}
			found[r.ID] = c
		}
	}
	return found, nil
}
