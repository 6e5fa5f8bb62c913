//go:build !js

package p2p

// SKELETON (owner: helper A). Signatures are the contract; bodies are
// filled in by the owner before anything calls them.

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// Served is what a peer serves to approved peers: its vault's database in
// the remote (encrypted) form, its chunks, and the handshake's records.
type Served struct {
	Endpoint engine.Endpoint // documents in the remote form
	Chunks   ChunkReader     // chunks in the remote form
	Records  negotiate.Port  // sync parameters, milestone, version
}

// ServeConfig configures Serve.
type ServeConfig struct {
	DB    Served
	Allow *AllowList // nil refuses everyone
	// Timeout is the deadline of one request's stream (a longpoll
	// Changes included); zero means DefaultStreamTimeout.
	Timeout time.Duration
	// MaxStreamsPerPeer bounds the streams one peer may have open at once
	// (both protocols); more are refused with "busy". Zero means 16.
	MaxStreamsPerPeer int
	// OnRefused is called (not under a lock) with each unapproved peer
	// that opened a stream.
	OnRefused func(id peer.ID)
	Meter     *Meter       // nil: not counted
	Logger    *slog.Logger // nil discards
}

// Serve registers ReplicateProtocol and ChunksProtocol on h for cfg.DB.
func Serve(h host.Host, cfg ServeConfig) (stop func()) { panic("p2p.Serve: skeleton") }

// PeerCounters are what one peer exchanged with this host.
type PeerCounters struct {
	BytesIn, BytesOut   uint64 // frame payload bytes, both protocols
	DocsIn, DocsOut     uint64 // documents received (BulkDocs) and sent (BulkGet)
	ChunkRequests       uint64 // chunks-protocol requests it made (the hunt)
	ChunksIn, ChunksOut uint64 // chunks received / served by id
}

// Meter counts per peer; safe for concurrent use.
type Meter struct{}

// NewMeter returns an empty meter.
func NewMeter() *Meter { return &Meter{} }

// Snapshot returns the counters of every peer seen.
func (m *Meter) Snapshot() map[peer.ID]PeerCounters { panic("p2p.Meter.Snapshot: skeleton") }

// RemoteOptions configure NewRemote.
type RemoteOptions struct {
	Group   string        // the group's name, part of the remote's ID
	Timeout time.Duration // one request's deadline; zero: DefaultStreamTimeout
	Meter   *Meter        // nil: not counted
}

// Remote is one approved peer as a vault.Remote: replication over
// ReplicateProtocol, chunks by id over ChunksProtocol, the handshake's
// records over ReplicateProtocol. ID is "p2p://GROUP/PEERID".
type Remote struct{}

var _ vault.Remote = (*Remote)(nil)

// ErrNoReset: a peer's database cannot be reset from another peer.
var ErrNoReset = errors.New("p2p: a peer's database cannot be reset remotely; reset it on that device")

// NewRemote returns the peer info.ID reached through h (info's addresses
// go to h's peerstore). Closing it does not close h.
func NewRemote(h host.Host, info peer.AddrInfo, o RemoteOptions) *Remote {
	panic("p2p.NewRemote: skeleton")
}

func (r *Remote) Peer() peer.ID                                   { panic("skeleton") }
func (r *Remote) ID() string                                      { panic("skeleton") }
func (r *Remote) Negotiate() negotiate.Port                       { panic("skeleton") }
func (r *Remote) ChunkRange() negotiate.ChunkRange                { return negotiate.CouchDBChunkRange }
func (r *Remote) Endpoint() engine.Endpoint                       { panic("skeleton") }
func (r *Remote) Objects() journalsync.Objects                    { return nil }
func (r *Remote) Chunks(codec *livesync.Codec) engine.ChunkSource { panic("skeleton") }
func (r *Remote) Reset(ctx context.Context) error                 { return ErrNoReset }
func (r *Remote) Close() error                                    { return nil }

// StoreRecords is a negotiate.Port over st's documents: the sync
// parameters and the milestone as _local documents with CouchDB's "0-N"
// revisions, the version document as a document. prefix "" keeps them at
// the ids a CouchDB-protocol server keeps them (the relay's database);
// another prefix keeps all three as _local documents under
// prefix+id (a replica that serves a group).
func StoreRecords(st store.Store, prefix string) negotiate.Port { panic("p2p.StoreRecords: skeleton") }
