package tests

import (
	"net/url"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/tests/internal/faultnet"
)

// The helpers of the Toxi tests: a real fault proxy (toxiproxy in-process,
// tests/internal/faultnet) between an adapter and its server.

// toxiProxy starts a toxiproxy proxy in front of hostPort, stopped when
// the test ends.
func toxiProxy(t *testing.T, hostPort string) *faultnet.Proxy {
	t.Helper()
	p, err := faultnet.New(hostPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// toxiHTTP starts the 5xx-burst HTTP proxy in front of target (a base
// URL), stopped when the test ends.
func toxiHTTP(t *testing.T, target string) *faultnet.HTTPProxy {
	t.Helper()
	h, err := faultnet.NewHTTP(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// hostOf is the host:port of a URL.
func hostOf(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		t.Fatalf("%q is not a URL", rawURL)
	}
	return u.Host
}

// toxiMust fails t on a toxic that cannot be added or removed.
func toxiMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// pollFor checks ok every 20 ms until it holds or limit passes.
func pollFor(t *testing.T, what string, limit time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		<-tick.C
	}
}
