package soak

import (
	"testing"

	"github.com/livesync-go/livesync-go/tests/internal/faultnet"
)

// The network between the pieces: a faultnet (in-process toxiproxy)
// proxy per link for TCP faults (latency with jitter, resets, a black
// hole) and, in front of each upstream server, faultnet's HTTP proxy for
// bursts of 503s, which toxiproxy cannot make since it works on bytes.

func newTCPProxy(t *testing.T, upstream string) *faultnet.Proxy {
	t.Helper()
	p, err := faultnet.New(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func newHTTPFaults(t *testing.T, target string) *faultnet.HTTPProxy {
	t.Helper()
	h, err := faultnet.NewHTTP("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// failedOr0 is how many requests h answered with a burst's 503, or 0
// without a proxy (a bucket on HTTPS).
func failedOr0(h *faultnet.HTTPProxy) int {
	if h == nil {
		return 0
	}
	return h.Failed()
}
