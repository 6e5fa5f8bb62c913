package discovery

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// A hostile relay answers a subscription with a forged event (a valid
// signature over another id), a damaged signature and a foreign
// subscription's event before the genuine one: only the genuine
// announcement is delivered.
func TestHostileRelayEventsDropped(t *testing.T) {
	room, err := NewRoom("group", "passphrase")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	key := NewNostrKey()
	good, err := AnnouncementEvent(room, key, announcement("good-peer", now), now)
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := AnnouncementEvent(room, key, announcement("forged-peer", now), now)
	forged.ID = good.ID // the signature no longer matches the content
	forged.Sig = good.Sig
	damaged, _ := AnnouncementEvent(room, key, announcement("damaged-peer", now), now)
	damaged.Sig = strings.Repeat("0", len(damaged.Sig))
	foreign, _ := AnnouncementEvent(room, key, announcement("foreign-peer", now), now)

	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		var req []json.RawMessage
		if c.ReadJSON(&req) != nil || len(req) < 2 {
			return
		}
		var sub string
		_ = json.Unmarshal(req[1], &sub)
		for _, m := range [][]any{{"EVENT", sub, forged}, {"EVENT", sub, damaged}, {"EVENT", "other", foreign}, {"EVENT", sub, good}, {"EOSE", sub}} {
			if c.WriteJSON(m) != nil {
				return
			}
		}
		_, _, _ = c.ReadMessage() // until the client goes
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch, err := Subscribe(ctx, []string{"ws" + strings.TrimPrefix(srv.URL, "http")}, room, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	d := waitFor(t, ctx, ch, "good-peer")
	if d.PeerID != "good-peer" {
		t.Fatalf("got %q", d.PeerID)
	}
	cancel()
	for d := range ch {
		if d.PeerID != "good-peer" {
			t.Fatalf("a hostile relay's event was delivered: %q", d.PeerID)
		}
	}
}

// A relay that refuses an announcement makes Publish fail with its reason.
func TestPublishRefusedReason(t *testing.T) {
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		var req []json.RawMessage
		if c.ReadJSON(&req) != nil || len(req) < 2 {
			return
		}
		var ev nostr.Event
		_ = json.Unmarshal(req[1], &ev)
		_ = c.WriteJSON([]any{"OK", ev.ID, false, "blocked: not here"})
		_, _, _ = c.ReadMessage()
	}))
	defer srv.Close()
	room, _ := NewRoom("group", "passphrase")
	now := time.Now()
	_, err := Publish(context.Background(), []string{"ws" + strings.TrimPrefix(srv.URL, "http")}, room, NewNostrKey(), announcement("p", now), now)
	if err == nil || !strings.Contains(err.Error(), "blocked: not here") {
		t.Fatalf("err = %v, want the relay's reason", err)
	}
}

// A relay that goes silent (no events, no pongs: a connection cut
// without a word) ends the subscription after a few pings, so that the
// caller subscribes again instead of waiting forever.
func TestSilentRelayEndsSubscription(t *testing.T) {
	defer func(d time.Duration) { subscriptionPing = d }(subscriptionPing)
	subscriptionPing = 100 * time.Millisecond
	up := websocket.Upgrader{}
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		<-release // never reads: no pong
	}))
	defer srv.Close()
	room, _ := NewRoom("group", "passphrase")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch, err := Subscribe(ctx, []string{"ws" + strings.TrimPrefix(srv.URL, "http")}, room, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	for range ch {
	}
	if ctx.Err() != nil {
		t.Fatal("the subscription to a silent relay lasted until the caller gave up")
	}
}
