package rpcroom

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"time"
)

// Transport sends one rpc2 wire message (JSON text, as the encoders of
// this package produce it) to one peer. It is the port a Room sends
// through; the caller feeds what arrives on the rpc2 action to
// Room.Receive and peer arrivals and departures to PeerJoined and
// PeerLeft. Send may be called from several goroutines at once; msg is
// the callee's to keep. An error means the message was not sent (the
// peer is gone, ctx ended); the Room never retries a raw message.
type Transport interface {
	Send(ctx context.Context, peer string, msg []byte) error
}

// Sizes and times commonlib uses over Trystero (commonlib
// src/rpc/transports/TrysteroTransport.ts TRYSTERO_RPC_DEFAULTS and
// src/common/models/setting.p2p.ts normaliseP2PMaxWirePayloadBytes).
const (
	// DefaultMaxWirePayloadBytes is the largest envelope sent raw, 15
	// KiB: below Trystero's 16,348-byte frame body.
	DefaultMaxWirePayloadBytes = 15360
	// MinMaxWirePayloadBytes is the smallest accepted setting (the
	// "maximum compatibility" preset).
	MinMaxWirePayloadBytes = 800
	// DefaultChunkMissingRetry is how long a receiver waits after the
	// last part of an incomplete stream before asking for the missing
	// parts.
	DefaultChunkMissingRetry = 150 * time.Millisecond
)

// Bounds on incoming chunked streams, which commonlib leaves unbounded.
const (
	DefaultStreamIdleTimeout = 60 * time.Second
	DefaultMaxMessageBytes   = 64 << 20
	DefaultMaxParts          = 1 << 18
	DefaultMaxStreamsPerPeer = 16
	// DefaultMaxRequestsPerPeer bounds the requests of one peer being
	// served at once (commonlib serves any number).
	DefaultMaxRequestsPerPeer = 64
)

// Config configures a Room. The zero value of every field but Transport
// means its documented default.
type Config struct {
	// Transport is required.
	Transport Transport
	// MaxWirePayloadBytes bounds the UTF-8 size of an envelope sent
	// raw; larger ones are chunked. A value outside [800, 15360] means
	// 15360, as LiveSync normalises P2P_maxWirePayloadBytes. It governs
	// only what this Room sends.
	MaxWirePayloadBytes int
	// ChunkMissingRetry is the quiet time after a part of an incomplete
	// incoming stream after which the missing indices are requested
	// (default 150 ms).
	ChunkMissingRetry time.Duration
	// StreamIdleTimeout drops an incomplete incoming stream, and forgets
	// an unacknowledged outgoing one, after this long without activity
	// (default 60 s).
	StreamIdleTimeout time.Duration
	// MaxMessageBytes bounds the reassembled size of one incoming
	// stream, and of all of one peer's incomplete streams together
	// (default 64 MiB); MaxParts bounds its number of parts
	// (default 262144); MaxStreamsPerPeer bounds the incomplete streams
	// a peer may have open at once (default 16).
	MaxMessageBytes   int
	MaxParts          int
	MaxStreamsPerPeer int
	// MaxRequestsPerPeer bounds the requests of one peer being served at
	// once, from their arrival (CanAccept included) to their answer
	// (default 64); a request beyond it is dropped without an answer and
	// reported as ErrLimit, so a flooding peer costs bounded goroutines.
	MaxRequestsPerPeer int
	// CanAccept, if set, decides whether a peer's request is served; a
	// request it refuses is dropped without an answer, so the caller
	// times out (commonlib's canAcceptRequest; LiveSync lets only
	// "legacy/!reqAuth" through from peers it has not accepted). It may
	// block; ctx ends when the Room closes.
	CanAccept func(ctx context.Context, peer, method string) bool
	// OnWarning, if set, is told about every message dropped as a
	// protocol problem; err wraps ErrMalformed, ErrLimit, ErrStale or
	// ErrVersion. It must not block.
	OnWarning func(peer string, err error)
	// Clock defaults to the system clock; Rand (for request and stream
	// ids) to crypto/rand.
	Clock Clock
	Rand  io.Reader
	// Logger receives debug records of dropped messages; nil discards.
	Logger *slog.Logger
}

// Validate reports a Config that New cannot use.
func (c Config) Validate() error {
	if c.Transport == nil {
		return errors.New("rpcroom: Config.Transport is nil")
	}
	if c.ChunkMissingRetry < 0 || c.StreamIdleTimeout < 0 || c.MaxMessageBytes < 0 ||
		c.MaxParts < 0 || c.MaxStreamsPerPeer < 0 || c.MaxRequestsPerPeer < 0 {
		return errors.New("rpcroom: negative limit in Config")
	}
	return nil
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.MaxWirePayloadBytes < MinMaxWirePayloadBytes || c.MaxWirePayloadBytes > DefaultMaxWirePayloadBytes {
		c.MaxWirePayloadBytes = DefaultMaxWirePayloadBytes
	}
	if c.ChunkMissingRetry == 0 {
		c.ChunkMissingRetry = DefaultChunkMissingRetry
	}
	if c.StreamIdleTimeout == 0 {
		c.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxParts == 0 {
		c.MaxParts = DefaultMaxParts
	}
	if c.MaxStreamsPerPeer == 0 {
		c.MaxStreamsPerPeer = DefaultMaxStreamsPerPeer
	}
	if c.MaxRequestsPerPeer == 0 {
		c.MaxRequestsPerPeer = DefaultMaxRequestsPerPeer
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	if c.Rand == nil {
		c.Rand = rand.Reader
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}
