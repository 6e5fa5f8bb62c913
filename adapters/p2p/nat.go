//go:build !js

package p2p

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	ma "github.com/multiformats/go-multiaddr"
)

// Defaults of the circuit relay service (Config.RelayService).
const (
	// DefaultRelayMaxReservations is how many peers may hold a slot on
	// the relay at once.
	DefaultRelayMaxReservations = 128
	// DefaultRelayMaxCircuits is how many relayed connections one peer
	// may have open through the relay at once.
	DefaultRelayMaxCircuits = 16
	// relayBufferSize is the copy buffer of each direction of a circuit:
	// larger than libp2p's 2 KiB so a vault's chunks move at a useful
	// rate, small enough that every circuit the limits allow fits in
	// memory (about 64 MiB at the defaults).
	relayBufferSize = 16 << 10
	// relayReservationTTL is how long a slot lasts unless refreshed.
	relayReservationTTL = time.Hour
	// maxRelayLimitDuration stands in for "no time limit" when only a
	// data limit is configured (libp2p applies both or neither).
	maxRelayLimitDuration = 30 * 24 * time.Hour
	// maxRelayLimitData stands in for "no data limit" when only a time
	// limit is configured.
	maxRelayLimitData = 1 << 50
)

// Timings of the reservation a host keeps on each static relay.
const (
	// reserveRetryMin and reserveRetryMax bound the wait after a failed
	// reservation; it doubles from the first to the second.
	reserveRetryMin = time.Second
	reserveRetryMax = time.Minute
	// reserveRefreshMax caps the wait before a reservation is renewed
	// (half its remaining life otherwise).
	reserveRefreshMax = 15 * time.Minute
	reserveRefreshMin = 5 * time.Second
	// reserveTimeout bounds one connect-and-reserve attempt.
	reserveTimeout = 30 * time.Second
)

// limitedConnReason is the reason given to libp2p for opening a stream
// over a limited (relayed) connection.
const limitedConnReason = "livesync: sync over a relayed connection"

// RelayLimits bound the circuit relay service of a host with
// Config.RelayService. The zero value means the defaults: at most
// DefaultRelayMaxReservations slots, DefaultRelayMaxCircuits circuits per
// peer, and relayed connections without a time or data limit, because a
// relayed connection must carry a whole vault's sync and stay open for a
// live session.
type RelayLimits struct {
	// MaxReservations is how many peers may hold a slot at once.
	MaxReservations int
	// MaxCircuits is how many relayed connections one peer may have
	// open through this relay at once.
	MaxCircuits int
	// Duration, when positive, resets each relayed connection after
	// this long.
	Duration time.Duration
	// Data, when positive, resets each relayed connection after this
	// many bytes in either direction.
	Data int64
	// MayReserve, when set, says which peers may hold a slot (the relay
	// binary: the peers approved in one of its groups); nil lets any
	// peer reserve. Relayed connections are unlimited by default, so
	// without it any stranger could park on the relay and use it as a
	// free proxy. Anyone may still connect through a slot to the peer
	// holding it, which refuses peers it has not approved.
	MayReserve func(peer.ID) bool
}

// reserveACL lets only the peers MayReserve approves hold a slot.
type reserveACL struct{ may func(peer.ID) bool }

// AllowReserve asks MayReserve.
func (a reserveACL) AllowReserve(p peer.ID, _ ma.Multiaddr) bool { return a.may(p) }

// AllowConnect lets anyone connect to a peer holding a slot.
func (a reserveACL) AllowConnect(peer.ID, ma.Multiaddr, peer.ID) bool { return true }

// Validate reports negative limits.
func (l RelayLimits) Validate() error {
	if l.MaxReservations < 0 || l.MaxCircuits < 0 || l.Duration < 0 || l.Data < 0 {
		return errors.New("p2p: relay limits must not be negative")
	}
	return nil
}

// relayOptions turns l into the relay service's options. Circuits are
// unlimited unless l sets a duration or a data limit; a relayed
// connection with a limit is marked "limited" by libp2p on both ends.
func (l RelayLimits) relayOptions() []relayv2.Option {
	rc := relayv2.DefaultResources()
	rc.ReservationTTL = relayReservationTTL
	rc.MaxReservations = orDefault(l.MaxReservations, DefaultRelayMaxReservations)
	rc.MaxCircuits = orDefault(l.MaxCircuits, DefaultRelayMaxCircuits)
	rc.BufferSize = relayBufferSize
	rc.Limit = nil
	if l.Duration > 0 || l.Data > 0 {
		rc.Limit = &relayv2.RelayLimit{Duration: maxRelayLimitDuration, Data: maxRelayLimitData}
		if l.Duration > 0 {
			rc.Limit.Duration = l.Duration
		}
		if l.Data > 0 {
			rc.Limit.Data = l.Data
		}
	}
	opts := []relayv2.Option{relayv2.WithResources(rc)}
	if l.MayReserve != nil {
		opts = append(opts, relayv2.WithACL(reserveACL{l.MayReserve}))
	}
	return opts
}

// orDefault returns v, or def when v is zero.
func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// StreamContext returns ctx marked so that a stream opened with it may use
// a limited connection, such as a circuit through a relay that limits
// time or data. Hosts from NewHost mark every NewStream and Connect
// themselves; code that opens streams on another host.Host uses this.
func StreamContext(ctx context.Context) context.Context {
	return network.WithAllowLimitedConn(ctx, limitedConnReason)
}

// parseRelays reads static relay multiaddrs, each ending in /p2p/<id>;
// several addresses of one relay are merged.
func parseRelays(addrs []string) ([]peer.AddrInfo, error) {
	mas := make([]ma.Multiaddr, 0, len(addrs))
	for _, s := range addrs {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("p2p: static relay %q: %w", s, err)
		}
		if _, id := peer.SplitAddr(a); id == "" {
			return nil, fmt.Errorf("p2p: static relay %q: the address must end in /p2p/<peer id>", s)
		}
		if isCircuit(a) {
			return nil, fmt.Errorf("p2p: static relay %q: a relay is reached directly, not through another relay", s)
		}
		mas = append(mas, a)
	}
	infos, err := peer.AddrInfosFromP2pAddrs(mas...)
	if err != nil {
		return nil, fmt.Errorf("p2p: static relays: %w", err)
	}
	return infos, nil
}

// isCircuit reports whether a goes through a relay.
func isCircuit(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

// relayKeeper keeps a reservation on each static relay and knows the
// circuit addresses they give this host. It reserves with its own loop
// rather than libp2p's autorelay, which only reserves once AutoNAT has
// judged the host unreachable, drops relays whose addresses are not public
// (a relay on a LAN or a test's loopback) and waits an hour after a failed
// attempt.
type relayKeeper struct {
	relays []peer.AddrInfo

	mu      sync.Mutex
	circuit map[peer.ID][]ma.Multiaddr // relays with a live reservation

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newRelayKeeper(relays []peer.AddrInfo) *relayKeeper {
	return &relayKeeper{relays: relays, circuit: make(map[peer.ID][]ma.Multiaddr)}
}

// addrs returns the circuit addresses of the relays holding a slot for
// this host, sorted.
func (k *relayKeeper) addrs() []ma.Multiaddr {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []ma.Multiaddr
	for _, as := range k.circuit {
		out = append(out, as...)
	}
	slices.SortFunc(out, ma.Multiaddr.Compare)
	return out
}

func (k *relayKeeper) set(id peer.ID, addrs []ma.Multiaddr) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(addrs) == 0 {
		delete(k.circuit, id)
		return
	}
	k.circuit[id] = addrs
}

// start runs one reservation loop per relay until stop.
func (k *relayKeeper) start(h host.Host) {
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	for _, ai := range k.relays {
		h.ConnManager().Protect(ai.ID, "livesync-relay")
		k.wg.Go(func() { k.keep(ctx, h, ai) })
	}
}

// stop ends the loops and waits for them.
func (k *relayKeeper) stop() {
	if k.cancel != nil {
		k.cancel()
	}
	k.wg.Wait()
}

// keep holds a reservation on one relay: it reserves, renews before the
// slot expires, and reserves again at once when the connection to the
// relay drops; failures are retried with a doubling wait.
func (k *relayKeeper) keep(ctx context.Context, h host.Host, ai peer.AddrInfo) {
	sub, err := h.EventBus().Subscribe(new(event.EvtPeerConnectednessChanged), eventbus.Name("livesync relay keeper"))
	if err != nil {
		return
	}
	defer sub.Close()
	defer k.set(ai.ID, nil)
	retry := reserveRetryMin
	for ctx.Err() == nil {
		rsvp, err := reserve(ctx, h, ai)
		if err != nil {
			k.set(ai.ID, nil)
			if !wait(ctx, sub, ai.ID, retry) {
				return
			}
			retry = min(2*retry, reserveRetryMax)
			continue
		}
		retry = reserveRetryMin
		k.set(ai.ID, circuitAddrs(ai, rsvp.Addrs))
		refresh := min(max(time.Until(rsvp.Expiration)/2, reserveRefreshMin), reserveRefreshMax)
		if !wait(ctx, sub, ai.ID, refresh) {
			return
		}
	}
}

// reserve connects to the relay and asks it for a slot.
func reserve(ctx context.Context, h host.Host, ai peer.AddrInfo) (*client.Reservation, error) {
	ctx, cancel := context.WithTimeout(ctx, reserveTimeout)
	defer cancel()
	if err := h.Connect(ctx, ai); err != nil {
		return nil, err
	}
	return client.Reserve(ctx, h, ai)
}

// wait returns after d, or early (true) when the host loses its last
// connection to relay, or false when ctx ends.
func wait(ctx context.Context, sub event.Subscription, relay peer.ID, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case e, ok := <-sub.Out():
			if !ok {
				return false
			}
			if ev := e.(event.EvtPeerConnectednessChanged); ev.Peer == relay && ev.Connectedness == network.NotConnected {
				return true
			}
		}
	}
}

// circuitAddrs are this host's addresses through the relay ai: each of
// the relay's addresses (those configured and those its reservation
// vouches for) followed by /p2p/<relay>/p2p-circuit.
func circuitAddrs(ai peer.AddrInfo, vouched []ma.Multiaddr) []ma.Multiaddr {
	suffix, err := ma.NewMultiaddr("/p2p/" + ai.ID.String() + "/p2p-circuit")
	if err != nil {
		return nil
	}
	var out []ma.Multiaddr
	for _, a := range append(slices.Clone(ai.Addrs), vouched...) {
		transport, _ := peer.SplitAddr(a)
		if transport == nil || isCircuit(transport) {
			continue
		}
		out = append(out, transport.Encapsulate(suffix))
	}
	return ma.Unique(out)
}

// limitedHost is the host NewHost returns: every stream and connection it
// opens may use a limited (relayed) connection, so the sync protocols work
// through a circuit relay without each caller opting in, and closing it
// stops the reservations on static relays first.
type limitedHost struct {
	host.Host
	keeper *relayKeeper
}

// NewStream opens a stream, over a limited connection if that is the
// only one to p.
func (h *limitedHost) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	return h.Host.NewStream(StreamContext(ctx), p, pids...)
}

// Connect connects to pi; an existing limited connection counts.
func (h *limitedHost) Connect(ctx context.Context, pi peer.AddrInfo) error {
	return h.Host.Connect(StreamContext(ctx), pi)
}

// Close stops the relay reservations, then the host.
func (h *limitedHost) Close() error {
	if h.keeper != nil {
		h.keeper.stop()
	}
	return h.Host.Close()
}
