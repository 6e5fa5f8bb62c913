//go:build !js

package p2p

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
)

// startHost starts a host from cfg, closed when the test ends.
func startHost(t *testing.T, cfg Config) host.Host {
	t.Helper()
	h, err := NewHost(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		<-tick.C
	}
}

// circuitOnly returns the addresses among addrs that go through a relay.
func circuitOnly(t *testing.T, addrs []string) []ma.Multiaddr {
	t.Helper()
	var out []ma.Multiaddr
	for _, s := range addrs {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			t.Fatal(err)
		}
		if isCircuit(a) {
			out = append(out, a)
		}
	}
	return out
}

// Every address Addrs returns is a full multiaddr ending in the host's
// /p2p/<id>, announced addresses included.
func TestAddrsFull(t *testing.T) {
	h := startHost(t, Config{AnnounceAddrs: []string{"/ip4/203.0.113.7/tcp/4001", "/dns4/sync.example.org/udp/4001/quic-v1"}})
	got := Addrs(h)
	if len(got) < 4 {
		t.Fatalf("Addrs = %q, want the two listen addresses and the two announced", got)
	}
	suffix := "/p2p/" + h.ID().String()
	for _, want := range []string{"/ip4/203.0.113.7/tcp/4001" + suffix, "/dns4/sync.example.org/udp/4001/quic-v1" + suffix} {
		if !contains(got, want) {
			t.Errorf("Addrs = %q, missing the announced %s", got, want)
		}
	}
	for _, s := range got {
		ai, err := peer.AddrInfoFromString(s)
		if err != nil || ai.ID != h.ID() || strings.Count(s, "/p2p/") != 1 {
			t.Errorf("address %q is not a full multiaddr of %s: %v", s, h.ID(), err)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Bad relay and announced addresses are refused at start.
func TestConfigValidate(t *testing.T) {
	const id = "12D3KooWLs1vmVTkDF4q3TN8rfZHvDnGz1SmXfLyHZ2SL4F9qydB"
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"relay without peer id", Config{StaticRelays: []string{"/ip4/127.0.0.1/tcp/4001"}}},
		{"relay not a multiaddr", Config{StaticRelays: []string{"relay.example.org:4001"}}},
		{"relay through a relay", Config{StaticRelays: []string{"/ip4/127.0.0.1/tcp/4001/p2p/" + id + "/p2p-circuit/p2p/" + id}}},
		{"announce not a multiaddr", Config{AnnounceAddrs: []string{"203.0.113.7:4001"}}},
		{"negative limit", Config{RelayService: true, RelayLimits: RelayLimits{MaxCircuits: -1}}},
	} {
		if err := tc.cfg.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", tc.name, tc.cfg)
		}
		if h, err := NewHost(t.Context(), tc.cfg); err == nil {
			h.Close()
			t.Errorf("%s: NewHost accepted %+v", tc.name, tc.cfg)
		}
	}
	ok := Config{StaticRelays: []string{"/ip4/127.0.0.1/tcp/4001/p2p/" + id, "/ip4/127.0.0.1/udp/4001/quic-v1/p2p/" + id}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("two addresses of one relay: %v", err)
	}
}

// relayTrio starts a relay with limits, a server that keeps a slot on it
// and serves chunks to the client, and a client that knows nothing of
// the server but its circuit addresses.
type relayTrio struct {
	relay, server, client host.Host
	circuit               []ma.Multiaddr // the server's circuit addresses
}

func newRelayTrio(t *testing.T, limits RelayLimits, chunks ...engine.Chunk) *relayTrio {
	t.Helper()
	r := &relayTrio{relay: startHost(t, Config{RelayService: true, RelayLimits: limits})}
	r.server = startHost(t, Config{StaticRelays: Addrs(r.relay)})
	r.client = startHost(t, Config{})
	waitFor(t, 20*time.Second, "the server's circuit address never appeared", func() bool {
		r.circuit = circuitOnly(t, Addrs(r.server))
		return len(r.circuit) > 0
	})
	for _, a := range r.circuit {
		if !strings.Contains(a.String(), "/p2p/"+r.relay.ID().String()+"/p2p-circuit/p2p/"+r.server.ID().String()) {
			t.Fatalf("circuit address %s is not through the relay %s", a, r.relay.ID())
		}
	}
	allow := NewAllowList()
	allow.Allow(r.client.ID(), "laptop")
	t.Cleanup(ServeChunks(r.server, ServerConfig{Store: enginetest.NewMemChunks(chunks...), Allow: allow}))
	return r
}

// chunkClient is a chunks client of the server given only its circuit
// addresses.
func (r *relayTrio) chunkClient(t *testing.T) *ChunkClient {
	t.Helper()
	info, err := peer.AddrInfosFromP2pAddrs(r.circuit...)
	if err != nil || len(info) != 1 {
		t.Fatalf("circuit addresses %v: %v", r.circuit, err)
	}
	return NewChunkClient(r.client, info[0], 20*time.Second)
}

// assertRelayed checks that every connection between client and server
// goes through the relay, and whether libp2p marks them limited.
func (r *relayTrio) assertRelayed(t *testing.T, limited bool) {
	t.Helper()
	conns := r.client.Network().ConnsToPeer(r.server.ID())
	if len(conns) == 0 {
		t.Fatal("no connection from client to server")
	}
	for _, c := range conns {
		if !isCircuit(c.RemoteMultiaddr()) {
			t.Errorf("connection to the server over %s, want one through the relay", c.RemoteMultiaddr())
		}
		if c.Stat().Limited != limited {
			t.Errorf("connection limited = %v, want %v", c.Stat().Limited, limited)
		}
	}
}

// bigChunks returns n chunks of size bytes each.
func bigChunks(n, size int) []engine.Chunk {
	out := make([]engine.Chunk, n)
	for i := range out {
		out[i] = engine.Chunk{ID: engine.ChunkID(fmt.Sprintf("h:big%d", i)), Data: strings.Repeat(string(rune('a'+i%26)), size)}
	}
	return out
}

func fetchAll(t *testing.T, src *ChunkClient, want []engine.Chunk) {
	t.Helper()
	ids := make([]engine.ChunkID, len(want))
	for i, c := range want {
		ids[i] = c.ID
	}
	res, err := src.FetchChunks(t.Context(), ids)
	if err != nil {
		t.Fatalf("fetch through the relay: %v", err)
	}
	if len(res.Found) != len(want) || len(res.Missing) != 0 {
		t.Fatalf("fetched %d chunks, %d missing; want %d", len(res.Found), len(res.Missing), len(want))
	}
	for i, c := range res.Found {
		if c != want[i] {
			t.Fatalf("chunk %s came back different", c.ID)
		}
	}
}

// On loopback, a client given only the server's circuit address reaches
// it through the relay and fetches its chunks. The relay's default
// circuits are unlimited: a megabyte passes, eight times libp2p's default
// data limit of a relayed connection.
func TestCircuitLoopback(t *testing.T) {
	chunks := bigChunks(8, 128<<10)
	r := newRelayTrio(t, RelayLimits{}, chunks...)
	fetchAll(t, r.chunkClient(t), chunks)
	r.assertRelayed(t, false)
}

// Through a relay that limits its circuits, libp2p marks the connection
// limited; streams opened by our hosts still use it.
func TestCircuitLimitedConn(t *testing.T) {
	chunks := bigChunks(2, 1<<10)
	r := newRelayTrio(t, RelayLimits{Data: 64 << 20, Duration: time.Hour}, chunks...)
	fetchAll(t, r.chunkClient(t), chunks)
	r.assertRelayed(t, true)

	// A plain libp2p host refuses the limited connection unless the
	// context says it may use it.
	inner := r.client.(*limitedHost).Host
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if s, err := inner.NewStream(ctx, r.server.ID(), ChunksProtocol); err == nil {
		s.Reset()
		t.Fatal("a stream opened over a limited connection without StreamContext")
	}
	s, err := inner.NewStream(StreamContext(t.Context()), r.server.ID(), ChunksProtocol)
	if err != nil {
		t.Fatalf("with StreamContext: %v", err)
	}
	s.Reset()
}

// When the connection to the relay drops, the server reserves a slot
// again at once and stays reachable through it.
func TestCircuitReservationRenewed(t *testing.T) {
	chunks := bigChunks(1, 10)
	r := newRelayTrio(t, RelayLimits{}, chunks...)
	if err := r.relay.Network().ClosePeer(r.server.ID()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the server did not reconnect to the relay", func() bool {
		return r.relay.Network().Connectedness(r.server.ID()) == network.Connected
	})
	var err error
	waitFor(t, 20*time.Second, "no fetch through the relay after the reconnection", func() bool {
		_, err = r.chunkClient(t).FetchChunks(t.Context(), []engine.ChunkID{chunks[0].ID})
		return err == nil
	})
	r.assertRelayed(t, false)
}

// The relay grants at most MaxReservations slots.
func TestRelayMaxReservations(t *testing.T) {
	relay := startHost(t, Config{RelayService: true, RelayLimits: RelayLimits{MaxReservations: 1}})
	info := peer.AddrInfo{ID: relay.ID(), Addrs: relay.Addrs()}
	first, second := startHost(t, Config{}), startHost(t, Config{})
	waitFor(t, 10*time.Second, "the relay service never started", func() bool {
		_, err := client.Reserve(t.Context(), first, info)
		return err == nil
	})
	_, err := client.Reserve(t.Context(), second, info)
	var rerr client.ReservationError
	if !errors.As(err, &rerr) {
		t.Fatalf("a second reservation on a one-slot relay: %v, want a reservation error", err)
	}
}

// With MayReserve, only the peers it approves get a slot on the relay.
func TestRelayMayReserve(t *testing.T) {
	friend := startHost(t, Config{})
	stranger := startHost(t, Config{})
	relay := startHost(t, Config{RelayService: true, RelayLimits: RelayLimits{
		MayReserve: func(id peer.ID) bool { return id == friend.ID() }}})
	info := peer.AddrInfo{ID: relay.ID(), Addrs: relay.Addrs()}
	waitFor(t, 10*time.Second, "the relay service never started", func() bool {
		_, err := client.Reserve(t.Context(), friend, info)
		return err == nil
	})
	_, err := client.Reserve(t.Context(), stranger, info)
	var rerr client.ReservationError
	if !errors.As(err, &rerr) {
		t.Fatalf("a stranger's reservation: %v, want a reservation error", err)
	}
}
