package main

import (
	"context"
	"encoding/json"
	"errors"
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
		h.AddSource(&lsp2pSource{node: node, peer: id, codec: v.codec, plain: v.plain, unusable: &rm.unusable}, nil)
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
// chunk documents, fetched by id over db.bulkGet with their revisions
// and encoded into the remote form with the vault's codec, in the
// bridge's envelopes. The device's own revision is kept (a chunk the
// hunt stores and the device's replication later brings are the same
// revision, not two), the one LiveSync gives a new chunk when it sent
// none.
type lsp2pSource struct {
	node     *livesyncp2p.Node
	peer     string
	codec    *livesync.Codec
	plain    bool
	unusable *atomic.Uint64
}

var _ engine.ChunkSource = (*lsp2pSource)(nil)

func (s *lsp2pSource) CanFetchDirect() bool { return true }

func (s *lsp2pSource) ThrottleKey() string { return livesyncp2p.ThrottlePrefix + s.peer }

// lsp2pBulkGet is a db.bulkGet answer.
type lsp2pBulkGet struct {
	Results []struct {
		ID   string `json:"id"`
		Docs []struct {
			OK json.RawMessage `json:"ok"`
		} `json:"docs"`
	} `json:"results"`
}

// FetchChunks asks the device for ids. A chunk that cannot be stored (an
// encrypted vault's chunk while the database has no passphrase, a
// malformed document) counts as missing from it.
func (s *lsp2pSource) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	if len(ids) == 0 {
		return engine.FetchResult{}, nil
	}
	if len(ids) > livesyncp2p.MaxChunkIDs {
		return engine.FetchResult{}, fmt.Errorf("fetch chunks: %d ids, at most %d per request", len(ids), livesyncp2p.MaxChunkIDs)
	}
	want := make(map[string]bool, len(ids))
	reqs := make([]map[string]string, len(ids))
	for i, id := range ids {
		want[id] = true
		reqs[i] = map[string]string{"id": id}
	}
	raw, err := s.node.Hosted().RPC.Call(ctx, s.peer, livesyncrpc.MethodBulkGet, map[string]any{"docs": reqs})
	if err != nil {
		return engine.FetchResult{}, &engine.Error{Op: "livesync p2p fetch chunks", Stage: engine.StageTransport, Err: fmt.Errorf("device %s: %w", s.peer, err)}
	}
	var a lsp2pBulkGet
	if err := json.Unmarshal(raw, &a); err != nil {
		return engine.FetchResult{}, &engine.Error{Op: "livesync p2p fetch chunks", Stage: engine.StageProtocol, Err: fmt.Errorf("%w: %v", engine.ErrMalformed, err)}
	}
	found := map[string]json.RawMessage{}
	for _, r := range a.Results {
		if !want[r.ID] {
			continue
		}
		for _, d := range r.Docs {
			if len(d.OK) == 0 || string(d.OK) == "null" || found[r.ID] != nil {
				continue
			}
			if doc, err := s.remote(r.ID, d.OK); err == nil {
				found[r.ID] = doc
			} else if !errors.Is(err, errGone) {
				s.unusable.Add(1)
			}
		}
	}
	var res engine.FetchResult
	for _, id := range ids {
		if doc, ok := found[id]; ok {
			res.Found = append(res.Found, ebridge.RawChunk{ID: id, Doc: doc}.Envelope())
		} else {
			res.Missing = append(res.Missing, id)
		}
	}
	return res, nil
}

// errGone: the device's document is deleted.
var errGone = errors.New("deleted")

// remote checks a device's plaintext chunk document for id and encodes
// it into the remote form, keeping its revision.
func (s *lsp2pSource) remote(id string, raw json.RawMessage) (json.RawMessage, error) {
	doc, err := livesync.ParseDoc(raw)
	if err != nil {
		return nil, err
	}
	if doc.ID() != id {
		return nil, fmt.Errorf("%w: document %q for id %q", engine.ErrMalformed, doc.ID(), id)
	}
	if doc.Deleted() {
		return nil, errGone
	}
	c, err := livesync.ParseChunk(doc)
	if err != nil {
		return nil, err
	}
	if s.plain && decorate.IsE2EEChunkID(id) {
		return nil, errPlainVault
	}
	var head struct {
		Rev string `json:"_rev"`
	}
	_ = json.Unmarshal(raw, &head)
	rev := head.Rev
	if rev == "" {
		rev = store.ChunkRev(id, c.Data)
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
