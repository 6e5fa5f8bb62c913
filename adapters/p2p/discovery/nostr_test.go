package discovery

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"golang.org/x/net/websocket"
)

// miniRelay is a minimal in-process Nostr relay for tests: it speaks the
// NIP-01 EVENT/OK, REQ/EVENT/EOSE and CLOSE messages over websocket, keeps
// the newest addressable event per (pubkey, kind, "d" tag) and pushes new
// events to matching open subscriptions. No relay library is available from
// the module proxy, so the tests carry their own.
type miniRelay struct {
	mu     sync.Mutex
	events []*nostr.Event
	subs   map[*relayConn]map[string]nostr.Filters
}

type relayConn struct {
	mu sync.Mutex
	ws *websocket.Conn
}

func (c *relayConn) send(env interface{ MarshalJSON() ([]byte, error) }) {
	b, _ := env.MarshalJSON()
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = websocket.Message.Send(c.ws, string(b))
}

func startMiniRelay(t *testing.T) (*miniRelay, string) {
	r := &miniRelay{subs: map[*relayConn]map[string]nostr.Filters{}}
	srv := httptest.NewServer(websocket.Server{Handler: r.serve})
	t.Cleanup(srv.Close)
	return r, "ws" + strings.TrimPrefix(srv.URL, "http")
}

func (r *miniRelay) serve(ws *websocket.Conn) {
	c := &relayConn{ws: ws}
	defer func() {
		r.mu.Lock()
		delete(r.subs, c)
		r.mu.Unlock()
	}()
	for {
		var msg string
		if err := websocket.Message.Receive(ws, &msg); err != nil {
			return
		}
		switch env := nostr.ParseMessage([]byte(msg)).(type) {
		case *nostr.EventEnvelope:
			r.publish(c, &env.Event)
		case *nostr.ReqEnvelope:
			r.subscribe(c, env.SubscriptionID, env.Filters)
		case *nostr.CloseEnvelope:
			r.mu.Lock()
			delete(r.subs[c], string(*env))
			r.mu.Unlock()
		}
	}
}

func (r *miniRelay) publish(c *relayConn, ev *nostr.Event) {
	if ok, _ := ev.CheckSignature(); !ok {
		c.send(nostr.OKEnvelope{EventID: ev.ID, OK: false, Reason: "invalid: bad signature"})
		return
	}
	r.mu.Lock()
	kept := r.events[:0]
	for _, old := range r.events {
		if !(old.PubKey == ev.PubKey && old.Kind == ev.Kind && old.Tags.GetD() == ev.Tags.GetD()) {
			kept = append(kept, old)
		}
	}
	r.events = append(kept, ev)
	type delivery struct {
		c  *relayConn
		id string
	}
	var to []delivery
	for sc, subs := range r.subs {
		for id, filters := range subs {
			if filters.Match(ev) {
				to = append(to, delivery{sc, id})
			}
		}
	}
	r.mu.Unlock()
	c.send(nostr.OKEnvelope{EventID: ev.ID, OK: true})
	for _, d := range to {
		d.c.send(nostr.EventEnvelope{SubscriptionID: &d.id, Event: *ev})
	}
}

func (r *miniRelay) subscribe(c *relayConn, id string, filters nostr.Filters) {
	r.mu.Lock()
	if r.subs[c] == nil {
		r.subs[c] = map[string]nostr.Filters{}
	}
	r.subs[c][id] = filters
	var stored []*nostr.Event
	for _, ev := range r.events {
		if filters.Match(ev) {
			stored = append(stored, ev)
		}
	}
	r.mu.Unlock()
	for _, ev := range stored {
		c.send(nostr.EventEnvelope{SubscriptionID: &id, Event: *ev})
	}
	c.send(nostr.EOSEEnvelope(id))
}

func (r *miniRelay) stored() []*nostr.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*nostr.Event(nil), r.events...)
}

// waitFor reads from ch until it sees peer, failing on timeout.
func waitFor(t *testing.T, ctx context.Context, ch <-chan Discovered, peer string) Discovered {
	t.Helper()
	for {
		select {
		case d, ok := <-ch:
			if !ok {
				t.Fatalf("subscription closed before %s was discovered", peer)
			}
			if d.PeerID == peer {
				return d
			}
		case <-ctx.Done():
			t.Fatalf("%s not discovered: %v", peer, ctx.Err())
		}
	}
}

func announcement(peer string, now time.Time) Announcement {
	return Announcement{PeerID: peer, Addrs: []string{"/ip4/127.0.0.1/tcp/4001"}, DeviceName: peer + "-device", Expires: now.Add(5 * time.Minute)}
}

// TestLoopbackDiscovery: two peers of one group announce through the relay
// and each discovers the other, both from stored events (a peer joining
// late) and live; a peer of another group and a stale announcement are not
// delivered.
func TestLoopbackDiscovery(t *testing.T) {
	rooms(t)
	relay, url := startMiniRelay(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	now := time.Now()
	clock := func() time.Time { return now }

	// An outsider (other group) and a stale announcement of this group.
	if _, err := Publish(ctx, []string{url}, roomB, NewNostrKey(), announcement("outsider", now), now); err != nil {
		t.Fatal(err)
	}
	if _, err := Publish(ctx, []string{url}, roomA, NewNostrKey(), announcement("stale", now.Add(-10*time.Minute)), now.Add(-10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Peer A announces first; peer B joins later and finds A's stored event.
	if n, err := Publish(ctx, []string{url}, roomA, NewNostrKey(), announcement("peer-a", now), now); err != nil || n != 1 {
		t.Fatalf("publish peer-a: accepted %d, %v", n, err)
	}
	subB, err := Subscribe(ctx, []string{url}, roomA2, clock)
	if err != nil {
		t.Fatal(err)
	}
	got := waitFor(t, ctx, subB, "peer-a")
	if got.DeviceName != "peer-a-device" || got.Relay != url || len(got.Addrs) != 1 {
		t.Fatalf("peer B discovered %+v", got)
	}
	// Peer A subscribes; B's announcement reaches both subscribers live.
	subA, err := Subscribe(ctx, []string{url}, roomA, clock)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, subA, "peer-a") // A sees its own stored announcement first
	if _, err := Publish(ctx, []string{url}, roomA2, NewNostrKey(), announcement("peer-b", now), now); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, subA, "peer-b")
	waitFor(t, ctx, subB, "peer-b")

	if n := len(relay.stored()); n != 4 {
		t.Fatalf("relay holds %d events, want 4", n)
	}
	for _, ev := range relay.stored() {
		if ev.Kind != KindAnnouncement || ev.Tags.GetD() == "" || ev.Tags.GetFirst([]string{"expiration"}) == nil {
			t.Fatalf("event lacks kind, room tag or expiration: %v", ev)
		}
		if strings.Contains(ev.String(), "group-1") || strings.Contains(ev.String(), "peer-") {
			t.Fatal("event reveals the group or a peer id")
		}
	}
	cancel()
	for d := range subA { // drains, then closes: no outsider or stale peer
		if d.PeerID == "outsider" || d.PeerID == "stale" {
			t.Fatalf("delivered %s", d.PeerID)
		}
	}
}

// TestStaleAndForeignDropped checks directly that the subscriber drops what
// it must not deliver: only the valid announcement comes through.
func TestStaleAndForeignDropped(t *testing.T) {
	rooms(t)
	_, url := startMiniRelay(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	now := time.Now()
	sub, err := Subscribe(ctx, []string{url}, roomA, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	// Wrong passphrase, but forged into this room's tag.
	ev, err := AnnouncementEvent(roomWrongPass, NewNostrKey(), announcement("forger", now), now)
	if err != nil {
		t.Fatal(err)
	}
	ev.Tags = nostr.Tags{{"d", roomA.Tag()}}
	ev.Sign(NewNostrKey())
	if err := publishOne(ctx, url, ev); err != nil {
		t.Fatal(err)
	}
	// Expired by the subscriber's clock (sealed 10 minutes earlier).
	past := now.Add(-10 * time.Minute)
	if _, err := Publish(ctx, []string{url}, roomA, NewNostrKey(), announcement("stale", past), past); err != nil {
		t.Fatal(err)
	}
	if _, err := Publish(ctx, []string{url}, roomA, NewNostrKey(), announcement("good", now), now); err != nil {
		t.Fatal(err)
	}
	if d := <-sub; d.PeerID != "good" {
		t.Fatalf("first delivery is %q, want good", d.PeerID)
	}
}

func TestPublishSubscribeNoRelay(t *testing.T) {
	rooms(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	now := time.Now()
	dead := []string{"ws://127.0.0.1:1"}
	if n, err := Publish(ctx, dead, roomA, NewNostrKey(), announcement("p", now), now); err == nil || n != 0 {
		t.Fatalf("publish to a dead relay: %d, %v", n, err)
	}
	if _, err := Subscribe(ctx, dead, roomA, time.Now); err == nil {
		t.Fatal("subscribe to a dead relay succeeded")
	}
}

// TestSeveralRelays: a dead relay does not stop publishing or subscribing,
// and an announcement stored on two relays is delivered once.
func TestSeveralRelays(t *testing.T) {
	rooms(t)
	_, url1 := startMiniRelay(t)
	_, url2 := startMiniRelay(t)
	dead := "ws://127.0.0.1:1"
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	now := time.Now()
	n, err := Publish(ctx, []string{dead, url1, url2}, roomA, NewNostrKey(), announcement("peer-a", now), now)
	if err != nil || n != 2 {
		t.Fatalf("publish: accepted %d, %v; want 2, nil", n, err)
	}
	sub, err := Subscribe(ctx, []string{url1, dead, url2}, roomA, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, sub, "peer-a")
	if _, err := Publish(ctx, []string{url1}, roomA, NewNostrKey(), announcement("peer-b", now), now); err != nil {
		t.Fatal(err)
	}
	// peer-b comes next: the second copy of peer-a was dropped as a duplicate.
	select {
	case d := <-sub:
		if d.PeerID != "peer-b" || d.Relay != url1 {
			t.Fatalf("next delivery is %s via %s, want peer-b via %s", d.PeerID, d.Relay, url1)
		}
	case <-ctx.Done():
		t.Fatal("peer-b not discovered")
	}
}
