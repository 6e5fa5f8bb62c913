package fetch_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/fetch"
)

// Mirrors commonlib ChunkDeliveryCoordinator.unit.spec.ts.

func TestCoordinatorTracksAndSettlesEachIdentifierOwnedByAClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		co := fetch.NewCoordinator()
		cl := co.Claim(ids("h:a", "h:b", "h:a"), fetch.ClaimOptions{})
		if !co.Claimed("h:a") || !co.Claimed("h:b") || len(cl.Pending()) != 2 {
			t.Fatalf("pending %v", cl.Pending())
		}
		if !cl.Settle(fetch.Event{ID: "h:a", Kind: fetch.EventDelivered}) || cl.Settle(fetch.Event{ID: "h:a", Kind: fetch.EventDelivered}) {
			t.Error("Settle must report true once, then false")
		}
		if co.Claimed("h:a") || !co.Claimed("h:b") {
			t.Error("settled id still claimed")
		}
		cl.Settle(fetch.Event{ID: "h:b", Kind: fetch.EventRemoteMissing})
		select {
		case <-cl.Done():
		default:
			t.Error("claim not done after its last id settled")
		}
	})
}

// A terminal outcome is published while its id still counts as claimed,
// and a release after the id stopped counting: a wait layer that looks at
// Claimed in the gap between the two must never conclude "no producer"
// while the answer is on its way (a CI run met exactly that gap).
func TestCoordinatorPublishesTerminalOutcomesBeforeUnclaiming(t *testing.T) {
	co := fetch.NewCoordinator()
	seen := map[fetch.EventKind]bool{}
	co.Subscribe(func(evs []fetch.Event) {
		for _, ev := range evs {
			if ev.Kind != fetch.EventClaimed {
				seen[ev.Kind] = co.Claimed(ev.ID)
			}
		}
	})
	for _, k := range []fetch.EventKind{fetch.EventDelivered, fetch.EventRemoteMissing, fetch.EventFailed, fetch.EventReleased} {
		cl := co.Claim(ids("h:a"), fetch.ClaimOptions{})
		cl.Settle(fetch.Event{ID: "h:a", Kind: k})
		if co.Claimed("h:a") {
			t.Errorf("%v: still claimed after Settle returned", k)
		}
		<-cl.Done()
	}
	want := map[fetch.EventKind]bool{fetch.EventDelivered: true, fetch.EventRemoteMissing: true, fetch.EventFailed: true, fetch.EventReleased: false}
	for k, w := range want {
		if seen[k] != w {
			t.Errorf("%v published with Claimed=%v, want %v", k, seen[k], w)
		}
	}
}

func TestCoordinatorSettlesAnEmptyClaimImmediately(t *testing.T) {
	cl := fetch.NewCoordinator().Claim(nil, fetch.ClaimOptions{})
	select {
	case <-cl.Done():
	default:
		t.Error("empty claim not done")
	}
}

// Obligation (claim half): "overlapping finite operations and overlapping
// per-identifier claims".
func TestCoordinatorKeepsAnIdentifierActiveUntilEveryOverlappingClaimSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		co := fetch.NewCoordinator()
		c1 := co.Claim(ids("h:a"), fetch.ClaimOptions{})
		c2 := co.Claim(ids("h:a"), fetch.ClaimOptions{})
		c1.Settle(fetch.Event{ID: "h:a", Kind: fetch.EventDelivered})
		if !co.Claimed("h:a") {
			t.Error("released while the second claim owns it")
		}
		c2.Release(errors.New("done"))
		if co.Claimed("h:a") || co.Stats().Claims != 0 {
			t.Errorf("still claimed: %+v", co.Stats())
		}
	})
}

func TestCoordinatorReleasesAStalledClaimAndResetsItsWatchdogOnProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		co := fetch.NewCoordinator()
		var stalled []engine.ChunkID
		cl := co.Claim(ids("h:a", "h:b"), fetch.ClaimOptions{OnStalled: func(_ *fetch.Claim, rem []engine.ChunkID) { stalled = rem }})
		time.Sleep(4 * time.Minute)
		cl.Touch()
		time.Sleep(4 * time.Minute)
		cl.Settle(fetch.Event{ID: "h:a", Kind: fetch.EventDelivered}) // progress at 8m
		time.Sleep(5*time.Minute - 1)
		synctest.Wait()
		if stalled != nil || !co.Claimed("h:b") {
			t.Fatal("fired before five minutes without progress")
		}
		time.Sleep(1)
		synctest.Wait()
		if len(stalled) != 1 || stalled[0] != "h:b" || co.Claimed("h:b") || co.Stats().Stalls != 1 {
			t.Errorf("at 13m: stalled %v, %+v", stalled, co.Stats())
		}
		cl.Touch() // no effect on a released claim
	})
}

func TestCoordinatorUsesFiveMinutesOnlyAsTheDefaultLeakFuse(t *testing.T) {
	if fetch.DefaultStallTimeout != 5*time.Minute {
		t.Errorf("DefaultStallTimeout = %v", fetch.DefaultStallTimeout)
	}
}

func TestCoordinatorReleasesEveryClaimWhenDisposed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		co := fetch.NewCoordinator()
		var log eventLog
		defer co.Subscribe(func(evs []fetch.Event) {
			for _, ev := range evs {
				log.add(ev.ID + " " + ev.Kind.String())
			}
		})()
		co.Claim(ids("h:a"), fetch.ClaimOptions{})
		co.Claim(ids("h:b"), fetch.ClaimOptions{})
		co.Close()
		if co.Stats().Claims != 0 || co.Claimed("h:a") || co.Claimed("h:b") || len(log.list()) != 4 {
			t.Errorf("%+v %v", co.Stats(), log.list())
		}
		if cl := co.Claim(ids("h:c"), fetch.ClaimOptions{}); co.Claimed("h:c") || cl.Owns("h:c") {
			t.Error("claim after Close")
		}
	})
}

// Mirrors ArrivalWaitLayer.unit.spec.ts: "shares one waiter for concurrent
// reads of the same identifier", "treats a deleted chunk arrival as
// unavailable", "handles terminal events for identifiers without waiters".
func TestLayerSharesOneWaiterAndHandlesArrivals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, fetch.Config{}, newSource(false))
		defer r.finite()()
		r.l.Arrived([]engine.Chunk{{ID: "h:nobody"}}) // no waiter: ignored
		r1 := r.read(ids("h:a", "h:d"), fetch.ReadOptions{WaitForReady: true})
		r2 := r.read(ids("h:a"), fetch.ReadOptions{WaitForReady: true})
		synctest.Wait()
		if n := r.l.Waiting(); n != 2 {
			t.Errorf("%d waiters, want one per id", n)
		}
		r.l.Arrived([]engine.Chunk{{ID: "h:a", Data: "x"}})
		r.l.Deleted(ids("h:d"))
		a, b := r1.wait(t), r2.wait(t)
		if !a[0].OK || !b[0].OK || !errors.Is(a[1].Err, fetch.ErrDeleted) {
			t.Errorf("%+v %+v", a, b)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	if err := (fetch.Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	for _, c := range []fetch.Config{{Concurrency: -1}, {MinInterval: -1}, {BatchSize: 101}, {StallTimeout: -1},
		{RetryStep: 20 * time.Second}, {RetryCap: time.Second}} {
		if c.Validate() == nil {
			t.Errorf("%+v: want an error", c)
		}
		if _, err := fetch.New(c, fetch.Deps{}); err == nil {
			t.Errorf("New(%+v) accepted it", c)
		}
	}
}
