package rpcroom

import (
	"context"
	"encoding/json"
	"errors"
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
