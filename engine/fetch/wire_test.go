package fetch_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/fetch"
)

// Reserve is one atomic check-and-take: of many racing parties, exactly
// one holds an id; the others learn it is busy and are told once when it
// lands. A stale lander cannot free a later reservation.
func TestWireReserveIsSingleFlight(t *testing.T) {
	co := fetch.NewCoordinator()
	var (
		wg     sync.WaitGroup
		held   atomic.Int32
		landed atomic.Int32
		flight = make(chan *fetch.Flight, 16)
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fl, busy := co.Reserve(ids("h:1", "h:1"), func(id engine.ChunkID) { landed.Add(1) })
			if len(fl.IDs())+len(busy) != 1 {
				t.Errorf("reserved %v busy %v: want exactly one of them", fl.IDs(), busy)
			}
			if len(fl.IDs()) == 1 {
				held.Add(1)
				flight <- fl
			}
		}()
	}
	wg.Wait()
	if held.Load() != 1 || !co.OnWire("h:1") {
		t.Fatalf("%d parties hold h:1 (on wire %v), want 1", held.Load(), co.OnWire("h:1"))
	}
	fl := <-flight
	fl.LandAll()
	if landed.Load() != 15 || co.OnWire("h:1") {
		t.Errorf("landed callbacks %d (want 15), on wire %v", landed.Load(), co.OnWire("h:1"))
	}
	later, busy := co.Reserve(ids("h:1"), nil)
	fl.Land("h:1") // stale: must not free the later flight
	if len(busy) != 0 || !co.OnWire("h:1") || !slices.Equal(later.IDs(), ids("h:1")) {
		t.Errorf("later flight %v busy %v on wire %v", later.IDs(), busy, co.OnWire("h:1"))
	}
	later.LandAll()
}

// A Fetcher never puts an id on the wire while another party's flight
// (the hunt) carries it: the file open waits for that flight, rechecks the
// local store where the flight persisted the chunk, and is served without
// a request of its own.
func TestFetcherWaitsForForeignFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newSource(true)
		src.put("h:1")
		src.put("h:2")
		r := newRig(t, fetch.Config{}, src)
		hunt, busy := r.co.Reserve(ids("h:1"), nil)
		if len(busy) != 0 {
			t.Fatalf("busy %v", busy)
		}
		rd := r.read(ids("h:1", "h:2"), fetch.ReadOptions{})
		r.until(10 * time.Second)
		if c := src.getCalls(); len(c) != 1 || !slices.Equal(c[0].ids, ids("h:2")) {
			t.Fatalf("requests while the hunt holds h:1: %v", c)
		}
		if rd.finished() {
			t.Fatal("read finished while h:1 is still in flight elsewhere")
		}
		r.local.store("h:1") // the hunt persists what it found, then lands
		hunt.LandAll()
		res := rd.wait(t)
		if !res[0].OK || !res[1].OK {
			t.Fatalf("read %+v", res)
		}
		if c := src.getCalls(); len(c) != 1 {
			t.Errorf("requests %v: h:1 went on the wire after the hunt delivered it", c)
		}

		// When the flight lands without the chunk, the fetcher asks itself.
		hunt, _ = r.co.Reserve(ids("h:3"), nil)
		src.put("h:3")
		rd = r.read(ids("h:3"), fetch.ReadOptions{})
		r.until(20 * time.Second)
		if len(src.getCalls()) != 1 {
			t.Fatalf("h:3 requested while reserved: %v", src.getCalls())
		}
		hunt.LandAll()
		if res := rd.wait(t); !res[0].OK {
			t.Fatalf("read %+v", res)
		}
		if c := src.getCalls(); len(c) != 2 || !slices.Equal(c[1].ids, ids("h:3")) {
			t.Errorf("requests %v", c)
		}
		// And the fetcher's own request holds the wire against others.
		src.put("h:4")
		release := src.blockOn("h:4")
		rd = r.read(ids("h:4"), fetch.ReadOptions{})
		r.until(30 * time.Second)
		var landed atomic.Bool
		fl, busy := r.co.Reserve(ids("h:4"), func(engine.ChunkID) { landed.Store(true) })
		if len(fl.IDs()) != 0 || !slices.Equal(busy, ids("h:4")) {
			t.Errorf("reserve during the fetcher's request: held %v busy %v", fl.IDs(), busy)
		}
		release()
		if res := rd.wait(t); !res[0].OK {
			t.Fatalf("read %+v", res)
		}
		synctest.Wait()
		if !landed.Load() || r.co.OnWire("h:4") {
			t.Errorf("landed %v, on wire %v", landed.Load(), r.co.OnWire("h:4"))
		}
	})
}
