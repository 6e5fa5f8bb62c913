//go:build !js

package p2p

import (
	"context"
	"fmt"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
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
}

// NewHost starts a libp2p host with the TCP and QUIC transports, Noise
// security and yamux multiplexing; relays and metrics are off. The caller
// closes it. ctx bounds only the start-up.
func NewHost(ctx context.Context, cfg Config) (host.Host, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key := cfg.Identity
	if key == nil && cfg.IdentityPath != "" {
		var err error
		if key, err = LoadOrCreateIdentity(cfg.IdentityPath); err != nil {
			return nil, err
		}
	}
	addrs := cfg.ListenAddrs
	if len(addrs) == 0 {
		addrs = DefaultListenAddrs
	}
	opts := []libp2p.Option{
		libp2p.ListenAddrStrings(addrs...),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(quic.NewTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.DisableRelay(),
		libp2p.DisableMetrics(),
	}
	if key != nil {
		opts = append(opts, libp2p.Identity(key))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("p2p: start host: %w", err)
	}
	return h, nil
}
