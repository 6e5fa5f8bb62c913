//go:build !js

package trysteronet

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/p2p/nostrrelay"
	"github.com/livesync-go/livesync-go/engine/rpcroom"
	"github.com/livesync-go/livesync-go/engine/trystero"
)

// startRelay serves an in-process Nostr relay that forwards trystero's
// ephemeral kinds, on loopback, and returns its ws:// URL.
func startRelay(t *testing.T) string {
	url, stop := startStoppableRelay(t)
	t.Cleanup(stop)
	return url
}

func startStoppableRelay(t *testing.T) (string, func()) {
	t.Helper()
	r := nostrrelay.New(nostrrelay.Config{ForwardEphemeral: true, EventsPerMinute: 1000})
	srv := httptest.NewServer(r)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = r.Close()
			srv.Close()
		})
	}
	return "ws" + strings.TrimPrefix(srv.URL, "http"), stop
}

// waitFor polls cond until it holds or the deadline passes (real
// network: no fake clock can drive pion and the relay).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// holds polls cond for d and fails as soon as it does not hold.
func holds(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !cond() {
			t.Fatalf("%s no longer holds", what)
		}
	}
}

// events records a room's peer events and join errors.
type events struct {
	mu     sync.Mutex
	joined []string
	left   []string
	errs   []error
}

func (e *events) attach(r *Room) {
	r.OnPeerJoin(func(p string) { e.mu.Lock(); e.joined = append(e.joined, p); e.mu.Unlock() })
	r.OnPeerLeave(func(p string) { e.mu.Lock(); e.left = append(e.left, p); e.mu.Unlock() })
	r.OnJoinError(func(_ string, err error) { e.mu.Lock(); e.errs = append(e.errs, err); e.mu.Unlock() })
}

func (e *events) has(list func(*events) []string, p string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(list(e), p)
}

func (e *events) errors() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.errs)
}

type peer struct {
	room *Room
	rpc  *rpcroom.Room
	ev   *events
}

// newPeer joins the room as a loopback-only peer with an rpcroom on top.
func newPeer(t *testing.T, relay, passphrase string) *peer {
	t.Helper()
	return newPeerOn(t, []string{relay}, passphrase)
}

func newPeerOn(t *testing.T, relays []string, passphrase string) *peer {
	t.Helper()
	r, err := New(Config{
		RoomID: "test-group", Password: trystero.RoomPassword(passphrase), Relays: relays,
		STUN: []string{}, LoopbackOnly: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	rpc, err := rpcroom.New(rpcroom.Config{Transport: r.RPCTransport()})
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{room: r, rpc: rpc, ev: &events{}}
	r.AttachRPC(rpc)
	p.ev.attach(r)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.Close()
		rpc.Close()
	})
	return p
}

func joined(e *events) []string { return e.joined }
func left(e *events) []string   { return e.left }

func TestTwoPeersRPC(t *testing.T) {
	before := runtime.NumGoroutine()
	relay, stopRelay := startStoppableRelay(t)
	t.Cleanup(stopRelay)
	a, b := newPeer(t, relay, "test"), newPeer(t, relay, "test")
	waitFor(t, 15*time.Second, "the peers to pass the handshake", func() bool {
		return slices.Contains(a.room.Peers(), b.room.SelfID()) && slices.Contains(b.room.Peers(), a.room.SelfID())
	})
	echo := func(ctx context.Context, peer string, args []json.RawMessage) (any, error) {
		return map[string]any{"from": peer, "args": args}, nil
	}
	for _, p := range []*peer{a, b} {
		if err := p.rpc.Handle("test.echo", echo); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A call each way.
	for _, pair := range [][2]*peer{{a, b}, {b, a}} {
		caller, callee := pair[0], pair[1]
		res, err := caller.rpc.Call(ctx, callee.room.SelfID(), "test.echo", "hello")
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		var got struct {
			From string
			Args []string
		}
		if err := json.Unmarshal(res, &got); err != nil || got.From != caller.room.SelfID() || !slices.Equal(got.Args, []string{"hello"}) {
			t.Fatalf("call returned %s (%v)", res, err)
		}
	}
	// An envelope far over 15360 bytes crosses chunked, both ways, with
	// multi-byte characters (surrogate pairs among them).
	big := strings.Repeat("a€😀", 6000) // 48000 bytes of UTF-8
	res, err := a.rpc.Call(ctx, b.room.SelfID(), "test.echo", big)
	if err != nil {
		t.Fatalf("big call: %v", err)
	}
	var got struct{ Args []string }
	if err := json.Unmarshal(res, &got); err != nil || len(got.Args) != 1 || got.Args[0] != big {
		t.Fatalf("big call came back altered (%d bytes, %v)", len(res), err)
	}
	// Leaving is noticed by the other side.
	if err := b.room.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a to notice b leaving", func() bool {
		return a.ev.has(left, b.room.SelfID()) && len(a.room.Peers()) == 0
	})
	if !a.ev.has(joined, b.room.SelfID()) || !b.ev.has(joined, a.room.SelfID()) {
		t.Fatal("OnPeerJoin was not told")
	}
	if _, err := a.rpc.Call(ctx, b.room.SelfID(), "test.echo"); err == nil {
		t.Fatal("a call to a peer that left succeeded")
	}
	_ = a.room.Close()
	a.rpc.Close()
	b.rpc.Close()
	stopRelay()
	waitFor(t, 5*time.Second, "every goroutine of the rooms to end", func() bool {
		return runtime.NumGoroutine() <= before
	})
}

func TestWrongPassword(t *testing.T) {
	relay := startRelay(t)
	a, b := newPeer(t, relay, "test"), newPeer(t, relay, "not the same")
	waitFor(t, 15*time.Second, "a join error", func() bool {
		return len(a.ev.errors())+len(b.ev.errors()) > 0
	})
	for _, err := range append(a.ev.errors(), b.ev.errors()...) {
		if !errors.Is(err, trystero.ErrIncorrectPassword) || !strings.Contains(err.Error(), "incorrect room password") {
			t.Errorf("join error %q, want incorrect room password", err)
		}
	}
	if len(a.room.Peers())+len(b.room.Peers()) != 0 {
		t.Fatal("peers with different passwords became active")
	}
}

// TestPeerVanishes: a connection that ends without @_leave (a crashed or
// cut-off peer) is noticed as a departure too.
func TestPeerVanishes(t *testing.T) {
	relay := startRelay(t)
	a, b := newPeer(t, relay, "test"), newPeer(t, relay, "test")
	waitFor(t, 15*time.Second, "the peers to pass the handshake", func() bool {
		return len(a.room.Peers()) == 1 && len(b.room.Peers()) == 1
	})
	b.room.mu.Lock()
	var pcs []*conn
	for c := range b.room.conns {
		pcs = append(pcs, c)
	}
	b.room.mu.Unlock()
	for _, c := range pcs {
		_ = c.pc.Close() // no @_leave
	}
	waitFor(t, 10*time.Second, "a to notice b vanishing", func() bool {
		return a.ev.has(left, b.room.SelfID()) && len(a.room.Peers()) == 0
	})
}

// TestTwoRelays: peers that share two relays hear each other twice but
// keep one connection, and it works.
func TestTwoRelays(t *testing.T) {
	relays := []string{startRelay(t), startRelay(t)}
	a, b := newPeerOn(t, relays, "test"), newPeerOn(t, relays, "test")
	waitFor(t, 15*time.Second, "the peers to pass the handshake", func() bool {
		return len(a.room.Peers()) == 1 && len(b.room.Peers()) == 1
	})
	if err := b.rpc.Handle("test.ping", func(context.Context, string, []json.RawMessage) (any, error) { return "pong", nil }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := a.rpc.Call(ctx, b.room.SelfID(), "test.ping"); err != nil || string(res) != `"pong"` {
		t.Fatalf("call: %s %v", res, err)
	}
	// Later announcements (the warm-up ends after about 2 s) make no
	// second connection.
	holds(t, 2500*time.Millisecond, "one connection per peer", func() bool {
		for _, p := range []*peer{a, b} {
			p.room.mu.Lock()
			n := len(p.room.conns)
			p.room.mu.Unlock()
			if n != 1 {
				return false
			}
		}
		return true
	})
}

// TestBackpressure: a sender waits for the channel to drain before each
// frame, as trystero does, so a burst never queues more than the
// threshold and one frame; every message still arrives.
func TestBackpressure(t *testing.T) {
	relay := startRelay(t)
	a, b := newPeer(t, relay, "test"), newPeer(t, relay, "test")
	waitFor(t, 15*time.Second, "the peers to pass the handshake", func() bool {
		return len(a.room.Peers()) == 1 && len(b.room.Peers()) == 1
	})
	const n, size = 60, 64 << 10
	var mu sync.Mutex
	got := 0
	b.room.OnAction("bulk", func(_ string, body []byte) {
		if len(body) == size+2 {
			mu.Lock()
			got++
			mu.Unlock()
		}
	})
	a.room.mu.Lock()
	c := a.room.active[b.room.SelfID()]
	a.room.mu.Unlock()
	c.mu.Lock()
	dc := c.dc
	c.mu.Unlock()
	body := []byte(`"` + strings.Repeat("x", size) + `"`)
	var peak uint64
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			peak = max(peak, dc.BufferedAmount())
			select {
			case <-stop:
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	ctx := context.Background()
	for range n {
		if err := a.room.Send(ctx, b.room.SelfID(), "bulk", body); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-watched
	if limit := uint64(bufferedLow + trystero.MaxFrameBytes); peak > limit {
		t.Errorf("%d bytes queued on the channel at once, want at most %d", peak, limit)
	}
	waitFor(t, 15*time.Second, "every message to arrive", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got == n
	})
}
