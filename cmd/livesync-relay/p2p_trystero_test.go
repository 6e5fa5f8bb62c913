package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/p2p/trysteronet"
	"github.com/livesync-go/livesync-go/engine/trystero"
)

// joinTrystero joins room "test-group" through the Nostr relay at url as
// LiveSync's P2P mode does (Trystero signalling), with loopback
// candidates only.
func joinTrystero(t *testing.T, url string) *trysteronet.Room {
	t.Helper()
	r, err := trysteronet.New(trysteronet.Config{RoomID: "test-group", Password: trystero.RoomPassword("group secret"),
		Relays: []string{url}, STUN: []string{}, LoopbackOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// With [nostr] forward_ephemeral = true, the relay's /_nostr carries the
// plugin's own P2P signalling: two Trystero peers that know only its URL
// find each other and connect. Without it they never meet (the relay
// refuses the ephemeral kinds).
func TestNostrForwardsTrysteroSignalling(t *testing.T) {
	for _, forward := range []bool{true, false} {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "relay.toml")
		text := "[nostr]\nenabled = true\n"
		if forward {
			text += "forward_ephemeral = true\n"
		}
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		rn := startAdmin(t, filepath.Join(dir, "data"), "--config", cfg)
		url := "ws" + strings.TrimPrefix(rn.url, "http") + nostrPath
		a, b := joinTrystero(t, url), joinTrystero(t, url)
		met := func() bool {
			return slices.Contains(a.Peers(), b.SelfID()) && slices.Contains(b.Peers(), a.SelfID())
		}
		deadline := time.Now().Add(15 * time.Second)
		if !forward {
			deadline = time.Now().Add(3 * time.Second) // several announce rounds
		}
		for !met() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // polling a real network, bounded above
		}
		if met() != forward {
			t.Fatalf("forward_ephemeral = %v: the peers met: %v", forward, met())
		}
	}
}
