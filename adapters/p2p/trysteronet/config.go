package trysteronet

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/engine/trystero"
)

// DefaultSTUN is trystero's default ICE server list (peer.mjs
// defaultIceServers), which LiveSync keeps.
var DefaultSTUN = []string{
	"stun:stun.l.google.com:19302",
	"stun:stun1.l.google.com:19302",
	"stun:stun2.l.google.com:19302",
	"stun:stun.cloudflare.com:3478",
}

// ICEServer is one STUN or TURN server.
type ICEServer struct {
	URLs       []string
	Username   string
	Credential string
}

// Config configures a Room.
type Config struct {
	// AppID is trystero's appId; "" means trystero.DefaultAppID.
	AppID string
	// RoomID is the room (LiveSync's group id), verbatim. Required.
	RoomID string
	// Password is the room password as trystero receives it; LiveSync
	// passes trystero.RoomPassword(passphrase). "" means no handshake.
	Password string
	// Relays are the Nostr relay URLs (ws:// or wss://). Required.
	Relays []string

	// STUN lists the STUN server URLs; nil means DefaultSTUN, an empty
	// non-nil list none (host candidates only, as on loopback).
	STUN []string
	// TURN servers are appended to the ICE servers.
	TURN []ICEServer
	// RelayOnly sets the ICE transport policy "relay" (LiveSync's
	// connection path "relay"); it needs a TURN server.
	RelayOnly bool
	// LoopbackOnly gathers host candidates on the loopback interface
	// only, without mDNS: two peers on one machine, as in tests. The js
	// build cannot choose (the browser gathers), and ignores it.
	LoopbackOnly bool

	// HandshakeTimeout bounds a peer's password handshake; 0 means
	// trystero.LiveSyncHandshakeTimeout (30 s).
	HandshakeTimeout time.Duration
	// MaxMessageBytes bounds one incoming action message; 0 means
	// trystero.DefaultMaxMessageBytes.
	MaxMessageBytes int

	// Rand supplies ids, handshake challenges and the IVs that seal
	// signalling; nil means crypto/rand. Outside tests it must be a
	// cryptographic source: a repeated IV breaks AES-GCM.
	Rand io.Reader
	// Logger receives debug records; nil discards.
	Logger *slog.Logger

	// Host is what the js build takes from its host: the
	// RTCPeerConnection and WebSocket constructors (the global ones
	// when unset). Natively it is empty.
	Host Host
}

// Validate reports a missing or malformed field.
func (c Config) Validate() error {
	if c.RoomID == "" {
		return errors.New("trysteronet: RoomID is required")
	}
	if len(c.Relays) == 0 {
		return errors.New("trysteronet: at least one relay URL is required")
	}
	for _, u := range c.Relays {
		if !strings.HasPrefix(u, "ws://") && !strings.HasPrefix(u, "wss://") {
			return errors.New("trysteronet: relay URLs must start with ws:// or wss://")
		}
	}
	if c.RelayOnly && !hasTURN(c.TURN) {
		return errors.New("trysteronet: RelayOnly needs a turn: or turns: server")
	}
	if c.HandshakeTimeout < 0 || c.MaxMessageBytes < 0 {
		return errors.New("trysteronet: negative limit")
	}
	return nil
}

func hasTURN(servers []ICEServer) bool {
	for _, s := range servers {
		for _, u := range s.URLs {
			l := strings.ToLower(u)
			if strings.HasPrefix(l, "turn:") || strings.HasPrefix(l, "turns:") {
				return true
			}
		}
	}
	return false
}

func (c Config) withDefaults() Config {
	if c.AppID == "" {
		c.AppID = trystero.DefaultAppID
	}
	if c.STUN == nil {
		c.STUN = DefaultSTUN
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = trystero.LiveSyncHandshakeTimeout
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = trystero.DefaultMaxMessageBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}
