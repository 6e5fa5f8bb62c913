package purgatory

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/hold"
)

// TestSettleReleasesBeforeReturning: the release an arrival causes is
// written when Settle returns, with no virtual time passing and without
// waiting for the driver.
func TestSettleReleasesBeforeReturning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		rv := r.rev("n.md", "1-a", "h:1", "h:2")
		if out := r.hold(rv, ClientPush); out != hold.Held {
			t.Fatalf("Hold = %v, want Held", out)
		}
		waitIdle()
		r.local.add("h:1", "h:2")
		r.p.ChunksArrived([]engine.ChunkID{"h:1", "h:2"})
		if err := r.p.Settle(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.wantReleased(release{At: 0, Doc: "n.md", Rev: "1-a"})
		if _, ok := r.held("n.md"); ok {
			t.Fatal("n.md still held after Settle")
		}
		// Nothing pending: Settle is a no-op.
		if err := r.p.Settle(context.Background()); err != nil {
			t.Fatal(err)
		}
		r.wantReleased(release{At: 0, Doc: "n.md", Rev: "1-a"})
	})
}

func TestSettleAfterClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{})
		r.p.Close()
		if err := r.p.Settle(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("Settle after Close = %v, want ErrClosed", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := r.p.Settle(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Settle with a cancelled context = %v", err)
		}
	})
}
