//go:build !js

package p2p

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/decorate"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
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

// Serve registers ReplicateProtocol and ChunksProtocol on h for cfg.DB:
// approved peers' requests are answered, each on its own stream within
// cfg.Timeout; an unapproved peer gets a refusal frame at once (and is
// reported to cfg.OnRefused), a peer over its stream cap a "busy" frame.
// stop unregisters both protocols and resets the streams still open.
func Serve(h host.Host, cfg ServeConfig) (stop func()) {
	sv := newServer(h, cfg)
	sv.register(ReplicateProtocol, sv.serveReplicate)
	sv.register(ChunksProtocol, sv.serveChunks)
	return sv.stop
}

// RemoteOptions configure NewRemote.
type RemoteOptions struct {
	Group   string        // the group's name, part of the remote's ID
	Timeout time.Duration // one request's deadline; zero: DefaultStreamTimeout
	Meter   *Meter        // nil: not counted
}

// Remote is one approved peer as a vault.Remote: replication over
// ReplicateProtocol, chunks by id over ChunksProtocol, the handshake's
// records over ReplicateProtocol. ID is "p2p://GROUP/PEERID".
type Remote struct {
	host  host.Host
	peer  peer.ID
	id    string
	c     *peerClient
	meter *Meter
}

var _ vault.Remote = (*Remote)(nil)

// ErrNoReset: a peer's database cannot be reset from another peer.
var ErrNoReset = errors.New("p2p: a peer's database cannot be reset remotely; reset it on that device")

// NewRemote returns the peer info.ID reached through h (info's addresses
// go to h's peerstore). Closing it does not close h.
func NewRemote(h host.Host, info peer.AddrInfo, o RemoteOptions) *Remote {
	if o.Timeout <= 0 {
		o.Timeout = DefaultStreamTimeout
	}
	if len(info.Addrs) > 0 {
		h.Peerstore().AddAddrs(info.ID, info.Addrs, peerstore.PermanentAddrTTL)
	}
	return &Remote{host: h, peer: info.ID, id: "p2p://" + o.Group + "/" + info.ID.String(), meter: o.Meter,
		c: newPeerClient(h, info.ID, o.Timeout, o.Meter)}
}

// Peer is the peer's id.
func (r *Remote) Peer() peer.ID { return r.peer }

// ID is "p2p://GROUP/PEERID".
func (r *Remote) ID() string { return r.id }

// Negotiate is the peer's Records, over the replicate protocol.
func (r *Remote) Negotiate() negotiate.Port { return remotePort{r.c} }

// ChunkRange is negotiate.CouchDBChunkRange: a peer replicates as a
// CouchDB database does.
func (r *Remote) ChunkRange() negotiate.ChunkRange { return negotiate.CouchDBChunkRange }

// Endpoint is the peer's database over the replicate protocol; a push
// sends a batch's chunks before its other documents.
func (r *Remote) Endpoint() engine.Endpoint { return decorate.ChunksFirst(streamEndpoint{r.c}) }

// Objects is nil: a peer is not a journal.
func (r *Remote) Objects() journalsync.Objects { return nil }

// Chunks is the peer's chunks by id, decoded from the remote form with
// codec (nil: returned as the peer serves them). Its throttle key is the
// peer id.
func (r *Remote) Chunks(codec *livesync.Codec) engine.ChunkSource {
	return &ChunkClient{host: r.host, peer: r.peer, timeout: r.c.timeout, codec: codec, meter: r.meter}
}

// Reset is ErrNoReset.
func (r *Remote) Reset(ctx context.Context) error { return ErrNoReset }

// Close does nothing: the host is the caller's.
func (r *Remote) Close() error { return nil }
