package discovery

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/p2p/nostrrelay"
	"github.com/nbd-wtf/go-nostr"
)

// startRelay serves the project's own Nostr relay (package nostrrelay) on
// loopback, with the relay's clock at now (nil: the real clock), and
// returns its ws:// URL.
func startRelay(t *testing.T, now func() time.Time) string {
	r := nostrrelay.New(nostrrelay.Config{Now: now})
	srv := httptest.NewServer(r)
	t.Cleanup(func() {
		r.Close()
		srv.Close()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// stored returns every event the relay at url serves.
func stored(t *testing.T, ctx context.Context, url string) []*nostr.Event {
	t.Helper()
	c, err := dial(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if err := c.send("REQ", "all", nostr.Filter{}); err != nil {
		t.Fatal(err)
	}
	var evs []*nostr.Event
	for {
		env, err := c.read()
		if err != nil {
			t.Fatal(err)
		}
		switch e := env.(type) {
		case *nostr.EventEnvelope:
			evs = append(evs, &e.Event)
			continue
		case *nostr.EOSEEnvelope:
		default:
			continue
		}
		break
	}
	return evs
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
// late) and live; a peer of another group is not delivered, and the relay
// refuses an expired announcement.
func TestLoopbackDiscovery(t *testing.T) {
	rooms(t)
	url := startRelay(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	now := time.Now()
	clock := func() time.Time { return now }

	// An outsider (other group) and a stale announcement of this group.
	if _, err := Publish(ctx, []string{url}, roomB, NewNostrKey(), announcement("outsider", now), now); err != nil {
		t.Fatal(err)
	}
	if n, err := Publish(ctx, []string{url}, roomA, NewNostrKey(), announcement("stale", now.Add(-10*time.Minute)), now.Add(-10*time.Minute)); err == nil || n != 0 {
		t.Fatalf("an expired announcement was accepted: %d, %v", n, err)
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

	evs := stored(t, ctx, url)
	if len(evs) != 3 {
		t.Fatalf("relay holds %d events, want 3", len(evs))
	}
	for _, ev := range evs {
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
// it must not deliver: only the valid announcement comes through. The
// relay's clock runs 45 s behind the subscriber's, so the relay still
// serves an announcement that expired 30 s ago by the subscriber's clock.
func TestStaleAndForeignDropped(t *testing.T) {
	rooms(t)
	now := time.Now()
	url := startRelay(t, func() time.Time { return now.Add(-45 * time.Second) })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	sub, err := Subscribe(ctx, []string{url}, roomA, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	// Wrong passphrase, but forged into this room's tag.
	ev, err := AnnouncementEvent(roomWrongPass, NewNostrKey(), announcement("forger", now), now)
	if err != nil {
		t.Fatal(err)
	}
	ev.Tags = nostr.Tags{{"d", roomA.Tag()}, *ev.Tags.GetFirst([]string{"expiration"})}
	ev.Sign(NewNostrKey())
	if err := publishOne(ctx, url, ev); err != nil {
		t.Fatal(err)
	}
	// Expired by the subscriber's clock (sealed 5.5 minutes earlier, for 5).
	past := now.Add(-5*time.Minute - 30*time.Second)
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
	url1 := startRelay(t, nil)
	url2 := startRelay(t, nil)
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
