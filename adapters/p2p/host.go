//go:build !js

package p2p

import (
	"context"
	"fmt"
	"slices"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
)

// DefaultListenAddrs are the addresses a host listens on when
// Config.ListenAddrs is empty: loopback only, TCP and QUIC, ports chosen
// by the system. Listening on other interfaces is an explicit choice.
var DefaultListenAddrs = []string{
	"/ip4/127.0.0.1/tcp/0",
	"/ip4/127.0.0.1/udp/0/quic-v1",
}

// Config configures NewHost. The zero value is a usable host with a fresh,
// throw-away identity listening on DefaultListenAddrs.
type Config struct {
	// ListenAddrs are multiaddrs to listen on, such as
	// "/ip4/0.0.0.0/tcp/4001" or "/ip4/0.0.0.0/udp/4001/quic-v1".
	// Empty means DefaultListenAddrs.
	ListenAddrs []string
	// Identity is the host's private key. When nil, IdentityPath is used.
	Identity crypto.PrivKey
	// IdentityPath is the key file LoadOrCreateIdentity reads or creates
	// (conventionally IdentityFileName beside the replica). When both
	// Identity and IdentityPath are empty the host gets a fresh key and a
	// new peer id every time.
	IdentityPath string

	// RelayService makes the host a circuit relay (v2) for other peers:
	// a peer behind NAT reserves a slot on it and is reached through it.
	// The host then counts itself publicly reachable, so it should listen
	// on an address the peers can reach. RelayLimits bound the service.
	RelayService bool
	RelayLimits  RelayLimits
	// StaticRelays are circuit relays (multiaddrs ending in /p2p/<id>)
	// on which the host keeps a reservation, so that peers that cannot
	// dial it directly reach it through them; its circuit addresses
	// (RELAY/p2p/<relay>/p2p-circuit) join h.Addrs() while the
	// reservation holds. Every host can dial other peers' circuit
	// addresses, with or without static relays of its own.
	StaticRelays []string
	// HolePunching turns on DCUtR: after a relayed connection, both
	// peers try to open a direct one through their NATs and move to it.
	HolePunching bool
	// AnnounceAddrs are extra addresses the host announces, such as the
	// public address of a router that forwards a port to it. A trailing
	// /p2p/<id> is dropped; Addrs appends the host's own.
	AnnounceAddrs []string
}

// Validate checks the addresses and limits in c.
func (c Config) Validate() error {
	_, _, err := c.parse()
	return err
}

// parse reads the static relays and announced addresses.
func (c Config) parse() (relays []peer.AddrInfo, announce []ma.Multiaddr, err error) {
	if err := c.RelayLimits.Validate(); err != nil {
		return nil, nil, err
	}
	if relays, err = parseRelays(c.StaticRelays); err != nil {
		return nil, nil, err
	}
	for _, s := range c.AnnounceAddrs {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, nil, fmt.Errorf("p2p: announced address %q: %w", s, err)
		}
		if transport, _ := peer.SplitAddr(a); transport != nil {
			a = transport
		}
		announce = append(announce, a)
	}
	return relays, announce, nil
}

// NewHost starts a libp2p host with the TCP and QUIC transports, Noise
// security and yamux multiplexing, the circuit relay transport (so it can
// dial a peer's circuit address) and metrics off; cfg adds the relay
// service, static relays, hole punching and announced addresses. Streams
// and connections it opens may use limited (relayed) connections. The
// caller closes it. ctx bounds only the start-up.
func NewHost(ctx context.Context, cfg Config) (host.Host, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	relays, announce, err := cfg.parse()
	if err != nil {
		return nil, err
	}
	key := cfg.Identity
	if key == nil && cfg.IdentityPath != "" {
		if key, err = LoadOrCreateIdentity(cfg.IdentityPath); err != nil {
			return nil, err
		}
	}
	addrs := cfg.ListenAddrs
	if len(addrs) == 0 {
		addrs = DefaultListenAddrs
	}
	keeper := newRelayKeeper(relays)
	opts := []libp2p.Option{
		libp2p.ListenAddrStrings(addrs...),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(quic.NewTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.EnableRelay(),
		libp2p.DisableMetrics(),
		libp2p.AddrsFactory(func(own []ma.Multiaddr) []ma.Multiaddr {
			return slices.Concat(own, announce, keeper.addrs())
		}),
	}
	if cfg.RelayService {
		// libp2p runs the relay service only while the host believes it
		// is publicly reachable; a relay is configured to be.
		opts = append(opts, libp2p.EnableRelayService(cfg.RelayLimits.relayOptions()...),
			libp2p.ForceReachabilityPublic())
	}
	if cfg.HolePunching {
		opts = append(opts, libp2p.EnableHolePunching())
	}
	if key != nil {
		opts = append(opts, libp2p.Identity(key))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("p2p: start host: %w", err)
	}
	if len(relays) > 0 {
		keeper.start(h)
	}
	return &limitedHost{Host: h, keeper: keeper}, nil
}

// Addrs returns every address of h as a full multiaddr ending in
// /p2p/<h's id>, circuit addresses through its relays included, sorted:
// what a peer needs to dial h, and what a group announces.
func Addrs(h host.Host) []string {
	self, err := ma.NewMultiaddr("/p2p/" + h.ID().String())
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range h.Addrs() {
		if transport, id := peer.SplitAddr(a); id == h.ID() && transport != nil {
			a = transport
		}
		out = append(out, a.Encapsulate(self).String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}
