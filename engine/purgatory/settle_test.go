package purgatory

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

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

type arrivingKey struct{}

// SettleArriving applies the arrival of chunks the caller is about to
// store and releases what they complete at once, with the caller's
// context: a releaser that writes those chunks along with the release
// (found in the context) releases the document; without them, the
// document stays held until the chunks are stored and announced.
func TestSettleArrivingReleasesWithTheCallersContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		local := newFakeLocal()
		rel := &fakeReleaser{start: time.Now(), local: local, revs: map[string][]engine.ChunkID{}, errs: map[string][]error{}}
		carried := 0
		p, err := New(Config{}, Deps{Local: local, Release: func(ctx context.Context, doc, rev string) error {
			if ids, ok := ctx.Value(arrivingKey{}).([]engine.ChunkID); ok {
				carried++
				local.add(ids...) // the caller's write, carried by the release
			}
			return rel.Release(ctx, doc, rev)
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		bg := context.Background()
		for _, rv := range []hold.Revision{{Doc: "n.md", Rev: "1-a", Chunks: []engine.ChunkID{"h:1"}},
			{Doc: "m.md", Rev: "1-b", Chunks: []engine.ChunkID{"h:2"}}} {
			rel.add(rv)
			if out, err := p.Hold(bg, rv, ClientPush); out != hold.Held || err != nil {
				t.Fatalf("Hold(%s) = %v, %v", rv.Doc, out, err)
			}
		}
		waitIdle()
		ctx, cancel := context.WithCancel(context.WithValue(bg, arrivingKey{}, []engine.ChunkID{"h:1"}))
		if err := p.SettleArriving(ctx, []engine.ChunkID{"h:1"}); err != nil {
			t.Fatal(err)
		}
		cancel()
		if got := rel.Released(); len(got) != 1 || got[0].Doc != "n.md" || carried != 1 {
			t.Fatalf("released %v (%d with the caller's context), want n.md with it", got, carried)
		}
		// Announced as arriving, never stored: m.md stays held.
		if err := p.SettleArriving(bg, []engine.ChunkID{"h:2"}); err != nil {
			t.Fatal(err)
		}
		if held := p.Held(); len(held) != 1 || held[0].Doc != "m.md" || held[0].Missing != 1 {
			t.Fatalf("held %+v, want m.md missing one chunk", held)
		}
		local.add("h:2")
		p.ChunksArrived([]engine.ChunkID{"h:2"})
		if err := p.Settle(bg); err != nil {
			t.Fatal(err)
		}
		if got := rel.Released(); len(got) != 2 || got[1].Doc != "m.md" {
			t.Fatalf("released %v, want m.md once its chunk is stored", got)
		}
		p.Close()
		if err := p.SettleArriving(bg, nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("SettleArriving after Close = %v, want ErrClosed", err)
		}
	})
}
