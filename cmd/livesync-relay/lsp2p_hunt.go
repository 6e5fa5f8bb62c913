package main

import (
	"context"
	"sync/atomic"

	"github.com/livesync-go/livesync-go/adapters/p2p/livesyncp2p"
	"github.com/livesync-go/livesync-go/engine"
	ebridge "github.com/livesync-go/livesync-go/engine/bridge"
	"github.com/livesync-go/livesync-go/engine/decorate"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
)

// The relay's purgatory hunt asks the room's devices too: every device
// present that the relay accepts is a chunk source of the database's
// hunt (throttle key "livesync-p2p:" and its peer id, within the hunt's
// per-source limits) until it leaves. A device serves its chunks in the
// plaintext local form; the relay encodes each with the vault's codec
// (decorate.EncodeChunk: the revision every LiveSync writer gives a new
// chunk) and the hunt stores it as it stores an upstream's, through the
// hold-back, which releases the held notes it completes.

// huntOf is the database's hunt (nil without a bridge).
func (rm *lsp2pRoom) huntOf() *hunt.Hunt {
	if rm.held.Bridge == nil {
		return nil
	}
	return rm.held.Bridge.Hunt()
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
	for id := range want {
		if rm.sources[id] {
			continue
		}
		rm.sources[id] = true
		h.AddSource(&lsp2pSource{src: node.ChunkSource(id), codec: v.codec, plain: v.plain, unusable: &rm.unusable}, nil)
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
// plaintext chunks, encoded into the remote form, in the bridge's
// envelopes.
type lsp2pSource struct {
	src      engine.ChunkSource
	codec    *livesync.Codec
	plain    bool
	unusable *atomic.Uint64
}

var _ engine.ChunkSource = (*lsp2pSource)(nil)

func (s *lsp2pSource) CanFetchDirect() bool { return true }

func (s *lsp2pSource) ThrottleKey() string { return s.src.ThrottleKey() }

// FetchChunks asks the device; a chunk that cannot be encoded (an
// encrypted vault's chunk while the database has no passphrase) counts
// as missing from it.
func (s *lsp2pSource) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	res, err := s.src.FetchChunks(ctx, ids)
	if err != nil {
		return engine.FetchResult{}, err
	}
	out := engine.FetchResult{Missing: res.Missing, Found: make([]engine.Chunk, 0, len(res.Found))}
	for _, c := range res.Found {
		if s.plain && decorate.IsE2EEChunkID(c.ID) {
			s.unusable.Add(1)
			out.Missing = append(out.Missing, c.ID)
			continue
		}
		raw, err := decorate.EncodeChunk(s.codec, c)
		if err != nil {
			s.unusable.Add(1)
			out.Missing = append(out.Missing, c.ID)
			continue
		}
		out.Found = append(out.Found, ebridge.RawChunk{ID: c.ID, Doc: raw}.Envelope())
	}
	return out, nil
}
