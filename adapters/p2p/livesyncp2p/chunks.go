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
	"github.com/livesync-go/livesync-go/engine/store"
)

// MaxChunkIDs is the most ids one FetchChunks may ask for, as
// engine.ChunkSource's callers promise.
const MaxChunkIDs = 100

// ThrottlePrefix begins the throttle key of a peer's chunk source; the
// peer id follows.
const ThrottlePrefix = "livesync-p2p:"

// RawChunk is a chunk as a peer holds it: the plaintext chunk and its
// document's revision on the peer ("" when the peer sent none), so that
// a node keeping another form of the vault (the relay keeps the remote
// form) can store it as the very revision the peer will replicate.
type RawChunk struct {
	Chunk engine.Chunk
	Rev   string
}

// ChunkClient fetches chunk documents from one peer with db.bulkGet. It
// is safe for concurrent use.
type ChunkClient struct {
	n      *Node
	peer   string
	authed atomic.Bool // the peer has answered legacy/!reqAuth with true
}

// ChunkClient returns a client of peer's chunks (peer is a peer id):
// db.bulkGet of the chunk ids without revisions, which the plugin's
// database (PouchDB's bulkGet) and this package's peers answer with each
// document's winning revision. The documents are the peer's plaintext
// local form, so the chunks need no decoding. Before its first fetch,
// the client asks the peer whether it accepts this node
// (legacy/!reqAuth, which an interactive plugin turns into its prompt):
// a refusal is an error wrapping livesyncrpc.ErrRejected at once rather
// than a dropped request's 40-second timeout, and the question is asked
// again on the next fetch.
func (n *Node) ChunkClient(peer string) *ChunkClient { return &ChunkClient{n: n, peer: peer} }

// Peer returns the peer id the client fetches from.
func (c *ChunkClient) Peer() string { return c.peer }

// chunkSource is a ChunkClient as an engine.ChunkSource.
type chunkSource struct{ c *ChunkClient }

var _ engine.ChunkSource = chunkSource{}

// ChunkSource returns an engine.ChunkSource that fetches chunks from
// peer (a peer id) over the room with a ChunkClient. An id the peer
// answers not_found (or deleted) is Missing; a peer that is gone, does
// not answer (one that has not accepted this node drops the request) or
// answers nonsense is an error, and a refusal wraps
// livesyncrpc.ErrRejected.
func (n *Node) ChunkSource(peer string) engine.ChunkSource { return chunkSource{n.ChunkClient(peer)} }

// CanFetchDirect is true: a peer serves documents by id.
func (s chunkSource) CanFetchDirect() bool { return true }

// ThrottleKey is ThrottlePrefix followed by the peer id.
func (s chunkSource) ThrottleKey() string { return ThrottlePrefix + s.c.peer }

// FetchChunks is FetchRaw without the revisions.
func (s chunkSource) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	found, missing, err := s.c.FetchRaw(ctx, ids)
	if err != nil {
		return engine.FetchResult{}, err
	}
	res := engine.FetchResult{Missing: missing}
	for _, r := range found {
		res.Found = append(res.Found, r.Chunk)
	}
	return res, nil
}

type bulkGetAnswer struct {
	Results []struct {
		ID   string `json:"id"`
		Docs []struct {
			OK    json.RawMessage `json:"ok"`
			Error json.RawMessage `json:"error"`
		} `json:"docs"`
	} `json:"results"`
}

// FetchRaw asks the peer for ids (at most MaxChunkIDs, each once) and
// returns the chunks it holds with their revisions, and the ids it
// lacks, both in the order of ids. A revision, when the peer sends one,
// is a string of at most store.MaxRevLength bytes; its form is the
// caller's to check.
func (c *ChunkClient) FetchRaw(ctx context.Context, ids []engine.ChunkID) ([]RawChunk, []engine.ChunkID, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if len(ids) > MaxChunkIDs {
		return nil, nil, fmt.Errorf("livesyncp2p: fetch chunks: %d ids, at most %d per request", len(ids), MaxChunkIDs)
	}
	if len(ids) == 0 {
		return nil, nil, nil
	}
	want := make(map[string]bool, len(ids))
	reqs := make([]map[string]string, len(ids))
	for i, id := range ids {
		if want[id] {
			return nil, nil, fmt.Errorf("livesyncp2p: fetch chunks: id %q twice in one request", id)
		}
		want[id] = true
		reqs[i] = map[string]string{"id": id}
	}
	if err := c.auth(ctx); err != nil {
		return nil, nil, err
	}
	raw, err := c.n.hosted.RPC.Call(ctx, c.peer, livesyncrpc.MethodBulkGet, map[string]any{"docs": reqs})
	if err != nil {
		return nil, nil, c.callError(ctx, err)
	}
	got, err := parseBulkGet(raw, want)
	if err != nil {
		return nil, nil, &engine.Error{Op: "p2p fetch chunks", Stage: engine.StageProtocol, Err: fmt.Errorf("peer %s: %w", c.peer, err)}
	}
	var found []RawChunk
	var missing []engine.ChunkID
	for _, id := range ids {
		if r, ok := got[id]; ok {
			found = append(found, r)
		} else {
			missing = append(missing, id)
		}
	}
	return found, missing, nil
}

// auth asks the peer whether it accepts this node, until it says yes.
func (c *ChunkClient) auth(ctx context.Context) error {
	if c.authed.Load() {
		return nil
	}
	_ = c.n.hosted.Advertise(c.peer) // see WaitPeer
	raw, err := c.n.hosted.RPC.Call(ctx, c.peer, livesyncrpc.MethodReqAuth, c.n.SelfID())
	if err != nil {
		return c.callError(ctx, err)
	}
	if string(raw) != "true" {
		return &engine.Error{Op: "p2p fetch chunks", Stage: engine.StageAuth,
			Err: fmt.Errorf("peer %s: %w", c.peer, livesyncrpc.ErrRejected)}
	}
	c.authed.Store(true)
	return nil
}

// callError describes a failed call: ctx's end as itself, anything
// else as a transport failure.
func (c *ChunkClient) callError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("livesyncp2p: fetch chunks from %s: %w", c.peer, ctx.Err())
	}
	return &engine.Error{Op: "p2p fetch chunks", Stage: engine.StageTransport, Err: fmt.Errorf("peer %s: %w", c.peer, err)}
}

// parseBulkGet reads a bulkGet answer: the chunks found among want, with
// their revisions. An error entry or a deleted document is an omission;
// a result for an id not asked for, a document under another id, one
// that is not a plaintext chunk or one whose _rev is not a string of at
// most store.MaxRevLength bytes is malformed.
func parseBulkGet(raw json.RawMessage, want map[string]bool) (map[string]RawChunk, error) {
	var a bulkGetAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("%w: bulkGet answer: %v", engine.ErrMalformed, err)
	}
	found := map[string]RawChunk{}
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
			rev := doc.Rev()
			if _, has := doc["_rev"]; has && (rev == "" || len(rev) > store.MaxRevLength) {
				return nil, fmt.Errorf("%w: bulkGet answered id %q with _rev %.40q", engine.ErrMalformed, r.ID, doc["_rev"])
			}
			found[r.ID] = RawChunk{Chunk: c, Rev: rev}
		}
	}
	return found, nil
}
