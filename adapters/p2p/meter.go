//go:build !js

package p2p

import (
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"
)

// PeerCounters are what one peer exchanged with this host: on a serving
// host, what the peer sent (In) and was answered (Out); on a client's
// Remote, what came from the peer (In) and went to it (Out).
type PeerCounters struct {
	BytesIn, BytesOut   uint64 // frame payload bytes, both protocols
	DocsIn, DocsOut     uint64 // documents received (BulkDocs) and sent (BulkGet)
	ChunkRequests       uint64 // chunks-protocol requests it made (the hunt)
	ChunksIn, ChunksOut uint64 // chunks received / served by id
}

// Meter counts per peer; safe for concurrent use. A nil *Meter counts
// nothing.
type Meter struct {
	mu    sync.Mutex
	peers map[peer.ID]*PeerCounters
}

// NewMeter returns an empty meter.
func NewMeter() *Meter { return &Meter{peers: map[peer.ID]*PeerCounters{}} }

// Snapshot returns the counters of every peer seen.
func (m *Meter) Snapshot() map[peer.ID]PeerCounters {
	out := map[peer.ID]PeerCounters{}
	if m == nil {
		return out
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, c := range m.peers {
		out[id] = *c
	}
	return out
}

// Peer returns the counters of one peer (zero if never seen).
func (m *Meter) Peer(id peer.ID) PeerCounters {
	if m == nil {
		return PeerCounters{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.peers[id]; ok {
		return *c
	}
	return PeerCounters{}
}

// add applies fn to id's counters.
func (m *Meter) add(id peer.ID, fn func(c *PeerCounters)) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.peers == nil {
		m.peers = map[peer.ID]*PeerCounters{}
	}
	c, ok := m.peers[id]
	if !ok {
		c = &PeerCounters{}
		m.peers[id] = c
	}
	fn(c)
}

// bytes counts frame payloads exchanged with id.
func (m *Meter) bytes(id peer.ID, in, out int) {
	if in == 0 && out == 0 {
		return
	}
	m.add(id, func(c *PeerCounters) {
		c.BytesIn += uint64(max(in, 0))
		c.BytesOut += uint64(max(out, 0))
	})
}
