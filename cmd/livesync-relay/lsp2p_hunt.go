package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/livesync-go/livesync-go/adapters/p2p/livesyncp2p"
	"github.com/livesync-go/livesync-go/engine"
	ebridge "github.com/livesync-go/livesync-go/engine/bridge"
	"github.com/livesync-go/livesync-go/engine/decorate"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
	"github.com/livesync-go/livesync-go/engine/store"
)

// The relay's purgatory hunt asks the room's devices too: every device
// present that the relay accepts is a chunk source of the database's
// hunt (throttle key "livesync-p2p:" and its peer id, within the hunt's
// per-source limits) until it leaves. A device serves its chunks in the
// plaintext local form with their revisions; the relay encodes each with
// the vault's codec, keeping the revision, and the hunt stores it as it
// stores an upstream's, through the hold-back, which releases the held
// notes it completes.

// huntOf is the database's hunt (nil without a bridge).
func (rm *lsp2pRoom) huntOf() *hunt.Hunt {
	br := rm.held.Bridge()
	if br == nil {
		return nil
	}
	return br.Hunt()
}

// syncHunt adds the accepted devices present to the hunt and removes
// those gone.
func (rm *lsp2pRoom) syncHunt(ctx context.Context) {
	h := rm.huntOf()
	rm.mu.Lock()
	node, v := rm.node, rm.view
	rm.mu.Unlock()
	if h == nil || node == nil {
		return
	}
	want := map[string]bool{}
	hosted := node.Hosted()
	for _, ad := range node.Known() {
		if hosted.CanAccept(ctx, ad.PeerID, livesyncrpc.MethodBulkGet) {
			want[ad.PeerID] = true
		}
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	rm.sourcesFor(h)
	for id := range want {
		if rm.sources[id] {
			continue
		}
		rm.sources[id] = true
		h.AddSource(&lsp2pSource{chunks: node.ChunkClient(id), codec: v.codec, plain: v.plain, unusable: &rm.unusable}, nil)
		rm.log.Info("a LiveSync P2P device is a source of the hunt for held notes' chunks", "peer", id)
	}
	for id := range rm.sources {
		if !want[id] {
			delete(rm.sources, id)
			h.RemoveSource(livesyncp2p.ThrottlePrefix + id)
			rm.log.Info("a LiveSync P2P device left the hunt", "peer", id)
		}
	}
}

// sourcesFor makes rm.sources those of h: none when h is not the hunt
// they were added to (a database kept on CouchDB gets a new hunt each
// time this relay becomes its leader, and that hunt has no devices yet).
// rm.mu is held.
func (rm *lsp2pRoom) sourcesFor(h *hunt.Hunt) {
	if rm.sourcesOf != h {
		rm.sources, rm.sourcesOf = map[string]bool{}, h
	}
}

// dropSources takes every device out of the hunt.
func (rm *lsp2pRoom) dropSources() {
	h := rm.huntOf()
	rm.mu.Lock()
	defer rm.mu.Unlock()
	for id := range rm.sources {
		if h != nil {
			h.RemoveSource(livesyncp2p.ThrottlePrefix + id)
		}
	}
	clear(rm.sources)
}

// huntSources returns the peer ids in the hunt now.
func (rm *lsp2pRoom) huntSources() map[string]bool {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	out := make(map[string]bool, len(rm.sources))
	for id := range rm.sources {
		out[id] = true
	}
	return out
}

// lsp2pSource is a device as a chunk source of the bridge's hunt: its
// chunks, fetched by id with their revisions by the node's chunk client
// (which asks the device first whether it accepts the relay, so a
// refusal fails at once) and encoded into the remote form with the
// vault's codec, in the bridge's envelopes. The device's own revision is
// kept (a chunk the hunt stores and the device's replication later
// brings are the same revision, not two), the one LiveSync gives a new
// chunk when it sent none.
type lsp2pSource struct {
	chunks   *livesyncp2p.ChunkClient
	codec    *livesync.Codec
	plain    bool
	unusable *atomic.Uint64
}

var _ engine.ChunkSource = (*lsp2pSource)(nil)

func (s *lsp2pSource) CanFetchDirect() bool { return true }

func (s *lsp2pSource) ThrottleKey() string { return livesyncp2p.ThrottlePrefix + s.chunks.Peer() }

// FetchChunks asks the device for ids. A chunk that cannot be stored (an
// encrypted vault's chunk while the database has no passphrase, a
// malformed revision) counts as missing from it.
func (s *lsp2pSource) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	got, _, err := s.chunks.FetchRaw(ctx, ids)
	if err != nil {
		return engine.FetchResult{}, err
	}
	docs := make(map[engine.ChunkID]json.RawMessage, len(got))
	for _, r := range got {
		if doc, err := s.remote(r); err == nil {
			docs[r.Chunk.ID] = doc
		} else {
			s.unusable.Add(1)
		}
	}
	var res engine.FetchResult
	for _, id := range ids {
		if doc, ok := docs[id]; ok {
			res.Found = append(res.Found, ebridge.RawChunk{ID: id, Doc: doc}.Envelope())
		} else {
			res.Missing = append(res.Missing, id)
		}
	}
	return res, nil
}

// remote encodes a device's plaintext chunk into the remote form, with
// the device's revision or, when it sent none, LiveSync's for a new
// chunk.
func (s *lsp2pSource) remote(r livesyncp2p.RawChunk) (json.RawMessage, error) {
	c := r.Chunk
	if s.plain && decorate.IsE2EEChunkID(c.ID) {
		return nil, errPlainVault
	}
	rev := r.Rev
	if rev == "" {
		rev = store.ChunkRev(c.ID, c.Data)
	} else if !validRev(rev) {
		return nil, fmt.Errorf("%w: revision %q", engine.ErrMalformed, rev)
	}
	e, err := s.codec.EncodeRemote(livesync.ChunkDoc(c))
	if err != nil {
		return nil, err
	}
	e["_rev"], _ = json.Marshal(rev)
	return e.MarshalJSON()
}
