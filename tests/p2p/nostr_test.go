//go:build !js

package p2ptest

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/p2p/nostrrelay"
)

// startNostrRelay starts the relay binary's Nostr relay (discovery kinds
// only) on loopback for the test and returns its ws:// URL.
func startNostrRelay(t *testing.T) string {
	t.Helper()
	r := nostrrelay.New(nostrrelay.Config{})
	srv := httptest.NewServer(r)
	t.Cleanup(func() {
		r.Close()
		srv.Close()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}
