package rpcroom

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A peer flooding requests gets MaxRequestsPerPeer served at once; the
// rest are dropped unanswered and reported, and other peers are served
// meanwhile.
func TestRequestFloodBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, n, wb := pair(t, nil)
		c, err := New(Config{Transport: endpoint{n, "C"}})
		if err != nil {
			t.Fatal(err)
		}
		n.rooms["C"] = c
		defer c.Close()
		release := make(chan struct{})
		var started atomic.Int32
		b.Handle("test.block", func(ctx context.Context, _ string, _ []json.RawMessage) (any, error) {
			started.Add(1)
			<-release
			return true, nil
		})
		b.Handle("test.echo", echo)
		const flood = 3 * DefaultMaxRequestsPerPeer
		var wg sync.WaitGroup
		var answered, timedOut atomic.Int32
		for range flood {
			wg.Go(func() {
				_, err := a.CallTimeout(t.Context(), "B", "test.block", time.Minute)
				switch {
				case err == nil:
					answered.Add(1)
				case isTimeout(err):
					timedOut.Add(1)
				}
			})
		}
		synctest.Wait()
		if got := started.Load(); got != DefaultMaxRequestsPerPeer {
			t.Fatalf("%d handlers running for one peer, want %d", got, DefaultMaxRequestsPerPeer)
		}
		if got := wb.count(ErrLimit); got != flood-DefaultMaxRequestsPerPeer {
			t.Fatalf("%d requests reported dropped, want %d", got, flood-DefaultMaxRequestsPerPeer)
		}
		if _, err := c.Call(t.Context(), "B", "test.echo", 1); err != nil {
			t.Fatalf("another peer is not served during the flood: %v", err)
		}
		close(release)
		wg.Wait()
		if answered.Load() != DefaultMaxRequestsPerPeer || timedOut.Load() != flood-DefaultMaxRequestsPerPeer {
			t.Fatalf("%d answered, %d timed out", answered.Load(), timedOut.Load())
		}
		// Once answered, the peer is served again.
		if _, err := a.Call(t.Context(), "B", "test.echo", 1); err != nil {
			t.Fatal(err)
		}
	})
}

func isTimeout(err error) bool { return errors.Is(err, ErrTimeout) }

// A peer's incomplete streams together hold at most MaxMessageBytes:
// a peer cannot pile MaxStreamsPerPeer streams of MaxMessageBytes each.
func TestPeerStreamBytesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, n, wb := pair(t, func(c *Config) { c.MaxStreamsPerPeer, c.MaxMessageBytes = 4, 1000 })
		c, _ := New(Config{Transport: endpoint{n, "C"}})
		n.rooms["C"] = c
		defer c.Close()
		_ = a
		b.Receive("A", chunkMsg("s1", 0, 2, strings.Repeat("x", 600)))
		b.Receive("A", chunkMsg("s2", 0, 2, strings.Repeat("x", 600)))
		if got := wb.count(ErrLimit); got != 1 {
			t.Fatalf("%d limit warnings for 1,200 bytes held, want 1", got)
		}
		// Another peer has its own allowance.
		b.Receive("C", chunkMsg("s3", 0, 2, strings.Repeat("x", 600)))
		if got := wb.count(ErrLimit); got != 1 {
			t.Fatalf("another peer's stream was refused")
		}
		b.PeerLeft("A")
		b.PeerLeft("C")
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.inBytes) != 0 {
			t.Fatalf("bytes still counted after the peers left: %v", b.inBytes)
		}
	})
}
