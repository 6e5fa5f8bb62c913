package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
)

// The relay's circuit relay gives a slot only to peers approved in one of
// its groups: its relayed connections are unlimited, so a stranger must
// not park on it and use it as a free proxy.
func TestP2PRelaySlotsForApprovedPeers(t *testing.T) {
	phone, stranger := p2pTestHost(t), p2pTestHost(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "relay.toml")
	text := fmt.Sprintf(`
[[databases]]
name = "notes"
[[databases.p2p]]
group = "family"
passphrase_env = "NOTES_GROUP"
approved = [{peer = %q, device = "phone"}]

[p2p]
listen = ["/ip4/127.0.0.1/tcp/0"]
circuit_relay = true
`, phone.ID())
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{envAdminPassword: "test-admin-password", "NOTES_GROUP": p2pTestNotesPass}
	rn := start(t, []string{"--data-dir", filepath.Join(dir, "data"), "--config", cfg}, env)
	rh := rn.r.p2p.host
	info := peer.AddrInfo{ID: rh.ID(), Addrs: rh.Addrs()}
	waitUntil(t, "a slot for the approved phone", func() bool {
		_, err := client.Reserve(t.Context(), phone, info)
		return err == nil
	})
	_, err := client.Reserve(t.Context(), stranger, info)
	var rerr client.ReservationError
	if !errors.As(err, &rerr) {
		t.Fatalf("a stranger's reservation: %v, want a reservation error", err)
	}
}
