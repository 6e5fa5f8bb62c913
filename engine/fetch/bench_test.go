package fetch_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/activity"
	"github.com/livesync-go/livesync-go/engine/fetch"
)

// zipfFigures are the results of one run of the scale scenario.
type zipfFigures struct {
	unique    int           // distinct ids delivered by the source
	requests  int           // requests on the wire
	elapsed   time.Duration // first open to last completion
	p50, p99  time.Duration // open-to-complete
	maxActive int
	minGap    time.Duration
}

// runZipfOpens opens `opens` files at once, each naming 100 distinct ids
// drawn from Zipf(s=1.1) over 50,000 ids, through the wait layer with
// direct fetch (CouchDB, waitForReady=false). The fake source fails the
// run on any id put on the wire twice and records the concurrency and
// interval it saw.
func runZipfOpens(tb testing.TB, cfg fetch.Config, latency time.Duration, opens int) zipfFigures {
	const universe, perOpen = 50_000, 100
	rng := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(rng, 1.1, 1, universe-1)
	files := make([][]engine.ChunkID, opens)
	for i := range files {
		seen := map[uint64]bool{}
		for len(files[i]) < perOpen {
			n := z.Uint64()
			if !seen[n] {
				seen[n] = true
				files[i] = append(files[i], fmt.Sprintf("h:%05d", n))
			}
		}
	}

	src := newSource(true)
	src.latency = latency
	for n := range universe {
		src.remote[fmt.Sprintf("h:%05d", n)] = "d"
	}
	act := activity.New(nil)
	co := fetch.NewCoordinator()
	local := newLocal()
	f, err := fetch.New(cfg, fetch.Deps{Source: src, Local: local, Activity: act, Claims: co})
	if err != nil {
		tb.Fatal(err)
	}
	l, err := fetch.NewLayer(fetch.LayerConfig{}, fetch.LayerDeps{Local: local, Activity: act, Claims: co, Fetcher: f})
	if err != nil {
		tb.Fatal(err)
	}
	start := time.Now()
	lat := make([]time.Duration, opens)
	var wg sync.WaitGroup
	for i, ids := range files {
		wg.Go(func() {
			t0 := time.Now()
			res, err := l.Get(context.Background(), ids, fetch.ReadOptions{})
			lat[i] = time.Since(t0)
			if err != nil {
				tb.Errorf("open %d: %v", i, err)
				return
			}
			for _, r := range res {
				if !r.OK {
					tb.Errorf("open %d: %v", i, r.Err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	l.Close()
	f.Close()
	src.checkNoDuplicates(tb)
	slices.Sort(lat)
	src.mu.Lock()
	defer src.mu.Unlock()
	fig := zipfFigures{unique: src.deliveredN, requests: len(src.calls), elapsed: elapsed,
		p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], maxActive: src.maxActive, minGap: src.minGap}
	if src.deliveredN != len(src.delivered) {
		tb.Errorf("%d deliveries for %d ids", src.deliveredN, len(src.delivered))
	}
	return fig
}

// TestZipfOpensZeroDuplicates is the scale scenario (many readers opening
// notes with Zipf-distributed popularity never fetch a chunk twice) in
// virtual time with the default configuration (40 concurrent, 50 ms, 100
// per batch) and a 100 ms remote.
func TestZipfOpensZeroDuplicates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fig := runZipfOpens(t, fetch.Config{}, 100*time.Millisecond, 500)
		if fig.maxActive > fetch.DefaultConcurrency {
			t.Errorf("%d requests in flight, bound %d", fig.maxActive, fetch.DefaultConcurrency)
		}
		if fig.minGap < fetch.DefaultMinInterval {
			t.Errorf("two starts %v apart, bound %v", fig.minGap, fetch.DefaultMinInterval)
		}
		t.Logf("500 opens × 100 ids, Zipf s=1.1 over 50,000: %d unique chunks, %d wire requests, %.0f unique chunks/s (virtual), "+
			"elapsed %v, open-to-complete p50 %v p99 %v, max in flight %d, min start gap %v",
			fig.unique, fig.requests, float64(fig.unique)/fig.elapsed.Seconds(), fig.elapsed, fig.p50, fig.p99, fig.maxActive, fig.minGap)
	})
}

// BenchmarkZipfOpens measures the machinery's own cost in real time: the
// same scenario with a 1 ns interval and an instant remote.
func BenchmarkZipfOpens(b *testing.B) {
	var fig zipfFigures
	for b.Loop() {
		fig = runZipfOpens(b, fetch.Config{MinInterval: time.Nanosecond}, 0, 500)
	}
	b.ReportMetric(float64(fig.unique)/fig.elapsed.Seconds(), "unique-chunks/s")
	b.ReportMetric(float64(fig.requests), "wire-requests")
	b.ReportMetric(float64(fig.p99.Microseconds()), "p99-µs")
}
