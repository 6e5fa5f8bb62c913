//go:build !js

package nostrrelay

import (
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// trysteroEvent is an event as Trystero's Nostr signalling publishes it:
// an ephemeral kind, an "x" topic tag, no expiration.
func trysteroEvent(t *testing.T, key string, kind int, topic string, created time.Time) nostr.Event {
	t.Helper()
	ev := nostr.Event{CreatedAt: nostr.Timestamp(created.Unix()), Kind: kind, Tags: nostr.Tags{{"x", topic}}, Content: `{"peerId":"p"}`}
	if err := ev.Sign(key); err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestEphemeralRefusedByDefault(t *testing.T) {
	_, url := startRelay(t, Config{})
	c := dial(t, url)
	ok, reason := c.publish(trysteroEvent(t, nostr.GeneratePrivateKey(), 22753, "topic", time.Now()))
	if ok || !strings.HasPrefix(reason, "blocked:") {
		t.Fatalf("default relay answered %v %q to an ephemeral event, want a refusal", ok, reason)
	}
}

func TestEphemeralForwardedNotStored(t *testing.T) {
	r, url := startRelay(t, Config{ForwardEphemeral: true, EventsPerMinute: 3})
	sub := dial(t, url)
	if ids, closed := sub.req("s", map[string]any{"kinds": []int{22753}, "#x": []string{"topic"}}); len(ids) != 0 || closed != "" {
		t.Fatalf("REQ: %v %q", ids, closed)
	}
	pub := dial(t, url)
	key := nostr.GeneratePrivateKey()
	ev := trysteroEvent(t, key, 22753, "topic", time.Now())
	if ok, reason := pub.publish(ev); !ok {
		t.Fatalf("ephemeral event refused: %q", reason)
	}
	m := sub.recv()
	if str(t, m[0]) != "EVENT" || str(t, m[1]) != "s" || !strings.Contains(string(m[2]), ev.ID) {
		t.Fatalf("subscriber got %s, want the event", m)
	}
	if n := r.Stats().Events; n != 0 {
		t.Fatalf("relay stores %d events, want none", n)
	}
	late := dial(t, url)
	if ids, _ := late.req("l", map[string]any{"kinds": []int{22753}}); len(ids) != 0 {
		t.Fatalf("a later subscriber got stored events %v", ids)
	}
	// Other kinds are still governed by Kinds, and the checks still apply.
	if ok, _ := pub.publish(trysteroEvent(t, key, 1, "topic", time.Now())); ok {
		t.Fatal("kind 1 accepted")
	}
	bad := trysteroEvent(t, key, 22753, "topic", time.Now())
	bad.Content = "changed"
	if ok, reason := pub.publish(bad); ok || !strings.HasPrefix(reason, "invalid:") {
		t.Fatalf("forged event answered %v %q", ok, reason)
	}
	// The rate limit counts ephemeral events too (3 a minute here).
	if ok, reason := pub.publish(trysteroEvent(t, key, 22753, "topic", time.Now())); ok || !strings.HasPrefix(reason, "rate-limited:") {
		t.Fatalf("fourth event answered %v %q, want rate-limited", ok, reason)
	}
}
