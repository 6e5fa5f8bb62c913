package lease_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine/lease"
	"github.com/livesync-go/livesync-go/engine/store"
)

func memStore(t *testing.T) store.LocalUpdater {
	t.Helper()
	st, err := store.NewMemory(store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	u, ok := st.(store.LocalUpdater)
	if !ok {
		t.Fatal("the memory store is not a store.LocalUpdater")
	}
	return u
}

func acquire(t *testing.T, l *lease.Lease) (bool, string) {
	t.Helper()
	held, state, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return held, string(state)
}

func info(t *testing.T, l *lease.Lease) (string, time.Time) {
	t.Helper()
	h, until, err := l.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h, until
}

// The life of a lease between two holders, with exact times: taken when
// free, refused while held, renewed, taken by the other after expiry,
// lost for the first, released with its state kept.
func TestLeaseLife(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memStore(t)
		ctx := context.Background()
		a := lease.New(st, lease.Config{Holder: "a", TTL: 10 * time.Second})
		b := lease.New(st, lease.Config{Holder: "b", TTL: 10 * time.Second})
		t0 := time.Now()

		if h, until := info(t, a); h != "" || !until.IsZero() {
			t.Fatalf("a fresh lease: holder %q until %v, want free", h, until)
		}
		if held, state := acquire(t, a); !held || state != "" {
			t.Fatalf("acquire free: held %v state %q", held, state)
		}
		if h, until := info(t, b); h != "a" || !until.Equal(t0.Add(10*time.Second)) {
			t.Fatalf("after a's acquire: holder %q until %v, want a until t0+10s", h, until)
		}
		if err := a.Renew(ctx, json.RawMessage(`{"n":1}`)); err != nil {
			t.Fatal(err)
		}

		time.Sleep(9 * time.Second) // t0+9s: still a's
		if held, state := acquire(t, b); held || state != `{"n":1}` {
			t.Fatalf("acquire while held: held %v state %q, want refused with a's state", held, state)
		}
		if err := a.Renew(ctx, nil); err != nil { // until t0+19s, state kept
			t.Fatal(err)
		}
		if _, until := info(t, b); !until.Equal(t0.Add(19 * time.Second)) {
			t.Fatalf("renewed until %v, want t0+19s", until)
		}

		time.Sleep(10*time.Second - time.Millisecond) // t0+19s-1ms: still a's
		if held, _ := acquire(t, b); held {
			t.Fatal("taken 1 ms before expiry")
		}
		time.Sleep(time.Millisecond) // t0+19s: expired
		if held, state := acquire(t, b); !held || state != `{"n":1}` {
			t.Fatalf("acquire after expiry: held %v state %q", held, state)
		}
		if h, until := info(t, a); h != "b" || !until.Equal(t0.Add(29*time.Second)) {
			t.Fatalf("after b took it: holder %q until %v", h, until)
		}

		if err := a.Renew(ctx, json.RawMessage(`{"n":99}`)); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("renew after being taken: %v, want ErrLost", err)
		}
		if err := a.Release(ctx, json.RawMessage(`{"n":99}`)); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("release by a non-holder: %v, want ErrLost", err)
		}
		if err := b.Release(ctx, json.RawMessage(`{"n":2}`)); err != nil {
			t.Fatal(err)
		}
		if h, until := info(t, a); h != "" || !until.IsZero() {
			t.Fatalf("after release: holder %q until %v, want free", h, until)
		}
		if err := b.Renew(ctx, nil); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("renew after release: %v, want ErrLost", err)
		}
		if held, state := acquire(t, a); !held || state != `{"n":2}` {
			t.Fatalf("acquire after release: held %v state %q, want the released state", held, state)
		}
	})
}

// A holder renews its lease past its until as long as nobody took it;
// acquiring its own lease extends it.
func TestLeaseRenewLateAndReacquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memStore(t)
		a := lease.New(st, lease.Config{Holder: "a", TTL: 5 * time.Second})
		t0 := time.Now()
		acquire(t, a)
		time.Sleep(7 * time.Second)
		if err := a.Renew(context.Background(), nil); err != nil {
			t.Fatalf("late renew, not taken: %v", err)
		}
		if _, until := info(t, a); !until.Equal(t0.Add(12 * time.Second)) {
			t.Fatalf("until %v, want t0+12s", until)
		}
		time.Sleep(time.Second)
		if held, _ := acquire(t, a); !held {
			t.Fatal("a holder could not acquire its own lease")
		}
		if _, until := info(t, a); !until.Equal(t0.Add(13 * time.Second)) {
			t.Fatalf("until %v, want t0+13s", until)
		}
	})
}

// Handles racing for a free lease: exactly one gets it.
func TestLeaseRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memStore(t)
		const n = 16
		var wg sync.WaitGroup
		won := make([]bool, n)
		names := make([]string, n)
		for i := range n {
			l := lease.New(st, lease.Config{})
			names[i] = l.Holder()
			wg.Go(func() {
				held, _, err := l.Acquire(context.Background())
				if err != nil {
					t.Error(err)
				}
				won[i] = held
			})
		}
		wg.Wait()
		winners := 0
		winner := ""
		for i, w := range won {
			if w {
				winners++
				winner = names[i]
			}
		}
		if winners != 1 {
			t.Fatalf("%d holders, want exactly one", winners)
		}
		if h, _ := info(t, lease.New(st, lease.Config{})); h != winner {
			t.Fatalf("stored holder %q, want the winner %q", h, winner)
		}
	})
}

// The defaults: a random holder, DefaultID, DefaultTTL.
func TestLeaseDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memStore(t)
		a, b := lease.New(st, lease.Config{}), lease.New(st, lease.Config{})
		if a.Holder() == "" || a.Holder() == b.Holder() || a.TTL() != lease.DefaultTTL {
			t.Fatalf("holders %q %q, ttl %v", a.Holder(), b.Holder(), a.TTL())
		}
		acquire(t, a)
		raw, err := st.(store.Store).GetLocal(context.Background(), lease.DefaultID)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Holder string `json:"holder"`
			Until  int64  `json:"until"`
		}
		if err := json.Unmarshal(raw, &d); err != nil || d.Holder != a.Holder() ||
			d.Until != time.Now().Add(lease.DefaultTTL).UnixMilli() {
			t.Fatalf("stored %s (%v)", raw, err)
		}
	})
}

// A stored lease document that cannot be read is free: the next Acquire
// replaces it, and Renew by a would-be holder is ErrLost.
func TestLeaseUnreadableIsFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memStore(t)
		ctx := context.Background()
		for _, bad := range []string{`[1,2]`, `"x"`, `{"holder":7}`, `{"holder":"z","until":"soon"}`, `{"holder":"z","until":1e300}`} {
			if err := st.(store.Store).PutLocal(ctx, "l", json.RawMessage(bad)); err != nil {
				t.Fatal(err)
			}
			a := lease.New(st, lease.Config{ID: "l", Holder: "a"})
			if err := a.Renew(ctx, nil); !errors.Is(err, lease.ErrLost) {
				t.Fatalf("%s: renew: %v, want ErrLost", bad, err)
			}
			if h, _ := info(t, a); h != "" {
				t.Fatalf("%s: info holder %q, want free", bad, h)
			}
			if held, state := acquire(t, a); !held || state != "" {
				t.Fatalf("%s: acquire: held %v state %q", bad, held, state)
			}
		}
	})
}

func take(t *testing.T, l *lease.Lease) lease.Grant {
	t.Helper()
	g, err := l.Take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Take tells a handover the last holder made (a release, or a lease
// never held) from one it did not: an expired lease, this holder's own
// lease left by a run that never released it, an unreadable document.
func TestLeaseTakeTellsUncleanHandovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memStore(t)
		ctx := context.Background()
		a := lease.New(st, lease.Config{Holder: "a", TTL: 10 * time.Second})
		b := lease.New(st, lease.Config{Holder: "b", TTL: 10 * time.Second})
		if g := take(t, a); !g.Held || g.Unclean {
			t.Fatalf("a never-held lease: %+v, want held, clean", g)
		}
		if err := a.Release(ctx, json.RawMessage(`{"n":1}`)); err != nil {
			t.Fatal(err)
		}
		if g := take(t, b); !g.Held || g.Unclean || string(g.State) != `{"n":1}` {
			t.Fatalf("a released lease: %+v, want held, clean, a's state", g)
		}
		if g := take(t, a); g.Held || g.Unclean {
			t.Fatalf("b's live lease: %+v, want refused", g)
		}
		time.Sleep(10 * time.Second)
		if g := take(t, a); !g.Held || !g.Unclean {
			t.Fatalf("b's expired lease: %+v, want held, unclean", g)
		}
		restarted := lease.New(st, lease.Config{Holder: "a", TTL: 10 * time.Second})
		if g := take(t, restarted); !g.Held || !g.Unclean {
			t.Fatalf("a's own live lease, left by an earlier run: %+v, want held, unclean", g)
		}
		if err := st.(store.Store).PutLocal(ctx, lease.Prefix+"x", json.RawMessage(`[1]`)); err != nil {
			t.Fatal(err)
		}
		c := lease.New(st, lease.Config{ID: lease.Prefix + "x", Holder: "c"})
		if g := take(t, c); !g.Held || !g.Unclean {
			t.Fatalf("an unreadable lease: %+v, want held, unclean", g)
		}
	})
}
