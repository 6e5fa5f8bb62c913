//go:build !js

package nostrrelay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/p2p/discovery"
	"github.com/nbd-wtf/go-nostr"
)

// The defaults follow the discovery client's constants.
func TestDefaultsFollowDiscovery(t *testing.T) {
	if KindAnnouncement != discovery.KindAnnouncement {
		t.Fatalf("KindAnnouncement %d, discovery uses %d", KindAnnouncement, discovery.KindAnnouncement)
	}
	if DefaultMaxExpiry != discovery.MaxTTL {
		t.Fatalf("DefaultMaxExpiry %v, discovery.MaxTTL %v", DefaultMaxExpiry, discovery.MaxTTL)
	}
}

// closeRelay survives the go-nostr v0.38.2 Close race (see discovery's
// closeRelay).
func closeRelay(r *nostr.Relay) {
	defer func() { _ = recover() }()
	_ = r.Close()
}

// TestGoNostrClient: go-nostr's client publishes, gets stored events, the
// end of stored events and live events, and sees refusals as errors.
func TestGoNostrClient(t *testing.T) {
	_, url := startRelay(t, Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	pubRelay, err := nostr.RelayConnect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer closeRelay(pubRelay)
	key := nostr.GeneratePrivateKey()
	first := announcement(t, key, "room", time.Now())
	if err := pubRelay.Publish(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := pubRelay.Publish(ctx, event(t, key, 1, "", time.Now(), time.Now().Add(time.Minute), "note")); err == nil || !strings.Contains(err.Error(), "blocked:") {
		t.Fatalf("publishing kind 1: %v", err)
	}

	subRelay, err := nostr.RelayConnect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer closeRelay(subRelay)
	sub, err := subRelay.Subscribe(ctx, nostr.Filters{{Kinds: []int{KindAnnouncement}, Tags: nostr.TagMap{"d": {"room"}}}})
	if err != nil {
		t.Fatal(err)
	}
	next := func() *nostr.Event {
		select {
		case ev := <-sub.Events:
			return ev
		case <-ctx.Done():
			t.Fatal("no event")
		}
		return nil
	}
	if ev := next(); ev.ID != first.ID {
		t.Fatalf("stored event %s, want %s", ev.ID, first.ID)
	}
	select {
	case <-sub.EndOfStoredEvents:
	case <-ctx.Done():
		t.Fatal("no EOSE")
	}
	second := announcement(t, nostr.GeneratePrivateKey(), "room", time.Now())
	if err := pubRelay.Publish(ctx, second); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev.ID != second.ID {
		t.Fatalf("live event %s, want %s", ev.ID, second.ID)
	}
}

// TestDiscoveryEndToEnd: discovery.Publish and discovery.Subscribe through
// the relay, stored and live, across two rooms.
func TestDiscoveryEndToEnd(t *testing.T) {
	r, url := startRelay(t, Config{})
	room, err := discovery.NewRoom("group-1", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	other, err := discovery.NewRoom("group-2", "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	now := time.Now()
	ann := func(peer string) discovery.Announcement {
		return discovery.Announcement{PeerID: peer, Addrs: []string{"/ip4/127.0.0.1/tcp/4001"}, Expires: now.Add(90 * time.Second)}
	}
	for _, p := range []struct {
		room *discovery.Room
		peer string
	}{{other, "outsider"}, {room, "peer-a"}} {
		if n, err := discovery.Publish(ctx, []string{url}, p.room, discovery.NewNostrKey(), ann(p.peer), now); err != nil || n != 1 {
			t.Fatalf("publish %s: %d %v", p.peer, n, err)
		}
	}
	found, err := discovery.Subscribe(ctx, []string{url}, room, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	want := func(peer string) {
		t.Helper()
		select {
		case d := <-found:
			if d.PeerID != peer || d.Relay != url {
				t.Fatalf("discovered %s via %s, want %s", d.PeerID, d.Relay, peer)
			}
		case <-ctx.Done():
			t.Fatalf("%s not discovered", peer)
		}
	}
	want("peer-a") // stored
	if _, err := discovery.Publish(ctx, []string{url}, room, discovery.NewNostrKey(), ann("peer-b"), now); err != nil {
		t.Fatal(err)
	}
	want("peer-b") // live
	if st := r.Stats(); st.Events != 3 || st.Accepted != 3 {
		t.Fatalf("stats %+v", st)
	}
	// An announcement that outlives discovery.MaxTTL is refused by the
	// relay too (discovery seals nothing beyond MaxTTL; a raw event).
	key := discovery.NewNostrKey()
	long := event(t, key, discovery.KindAnnouncement, room.Tag(), now, now.Add(discovery.MaxTTL+time.Hour), "x")
	c, err := nostr.RelayConnect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer closeRelay(c)
	if err := c.Publish(ctx, long); err == nil || !strings.Contains(err.Error(), "invalid: expiration") {
		t.Fatalf("an expiration beyond MaxTTL: %v", err)
	}
}
