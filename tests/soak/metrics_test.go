package soak

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sample is one reading of the relay's /metrics.
type sample struct {
	at                    time.Time
	heap, rss, goroutines float64 // bytes, bytes, count
	fds                   float64
	nextGC                float64 // the GC's target: twice the heap live after the last GC (GOGC=100)
}

// metricNames are the series a sample reads.
var metricNames = map[string]func(*sample) *float64{
	"go_memstats_heap_inuse_bytes":  func(s *sample) *float64 { return &s.heap },
	"process_resident_memory_bytes": func(s *sample) *float64 { return &s.rss },
	"go_goroutines":                 func(s *sample) *float64 { return &s.goroutines },
	"process_open_fds":              func(s *sample) *float64 { return &s.fds },
	"go_memstats_next_gc_bytes":     func(s *sample) *float64 { return &s.nextGC },
}

func (r *relay) sample(ctx context.Context) (sample, error) {
	s := sample{at: time.Now()}
	b, err := r.get(ctx, "/metrics")
	if err != nil {
		return s, err
	}
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if f := metricNames[name]; ok && f != nil {
			v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err != nil {
				return s, fmt.Errorf("/metrics %s: %v", name, err)
			}
			*f(&s) = v
			found++
		}
	}
	if found != len(metricNames) {
		return s, fmt.Errorf("/metrics: %d of the %d series", found, len(metricNames))
	}
	return s, nil
}

// sampler reads /metrics every interval until stopped.
type sampler struct {
	mu      sync.Mutex
	samples []sample
	errs    int
	stop    context.CancelFunc
	done    chan struct{}
}

func startSampler(r *relay, every time.Duration) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			rctx, c := context.WithTimeout(ctx, 10*time.Second)
			sm, err := r.sample(rctx)
			c()
			s.mu.Lock()
			if err != nil {
				s.errs++
			} else {
				s.samples = append(s.samples, sm)
			}
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) close() []sample {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sample(nil), s.samples...)
}

// between returns the samples taken in [from, to].
func between(all []sample, from, to time.Time) []sample {
	var out []sample
	for _, s := range all {
		if !s.at.Before(from) && !s.at.After(to) {
			out = append(out, s)
		}
	}
	return out
}

// series is one quantity over a run of samples.
type series struct {
	name        string
	first, last float64
	min, max    float64
	perMinute   float64 // least-squares slope
	unit        float64 // divisor for printing (1 or 1<<20)
	unitName    string
}

func fit(name string, ss []sample, get func(sample) float64, unit float64, unitName string) series {
	out := series{name: name, unit: unit, unitName: unitName}
	if len(ss) == 0 {
		return out
	}
	out.first, out.last = get(ss[0]), get(ss[len(ss)-1])
	out.min, out.max = out.first, out.first
	var sx, sy, sxx, sxy float64
	t0 := ss[0].at
	for _, s := range ss {
		x, y := s.at.Sub(t0).Minutes(), get(s)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
		out.min, out.max = min(out.min, y), max(out.max, y)
	}
	n := float64(len(ss))
	if d := n*sxx - sx*sx; d > 0 {
		out.perMinute = (n*sxy - sx*sy) / d
	}
	return out
}

func (s series) String() string {
	u := s.unit
	return fmt.Sprintf("%-11s start %8.1f  end %8.1f  min %8.1f  max %8.1f  slope %+8.2f %s/min",
		s.name, s.first/u, s.last/u, s.min/u, s.max/u, s.perMinute/u, s.unitName)
}

// Bounds on the run's slopes (least squares over whole fault cycles
// after the warm-up), and on what is left once the clients are gone.
const (
	heapSlopeMax      = 4 << 20 // bytes a minute
	goroutineSlopeMax = 12      // a minute: within a cycle they range over ~60
	fdSlopeMax        = 8       // a minute
	goroutinesLeftMax = 15      // above the baseline, clients gone
	fdsLeftMax        = 10      // above the baseline, clients gone
)

// flatness fits the samples taken while the clients ran (after a
// warm-up of one fault cycle, over whole cycles) and checks the slopes.
func (s *soak) flatness(all []sample, base sample, runStart, runEnd time.Time) {
	t := s.t
	from := runStart.Add(faultCycle)
	cycles := runEnd.Sub(from) / faultCycle
	if cycles < 1 {
		// Shorter than two cycles: the slope would mostly show where in
		// the cycle the run ended, so it is printed, not judged.
		from, cycles = runStart.Add(runEnd.Sub(runStart)/3), 0
	}
	to := runEnd
	if cycles >= 1 {
		to = from.Add(cycles * faultCycle)
	}
	win := between(all, from, to)
	if len(win) < 8 {
		t.Fatalf("%d samples in the window (of %d): too few to fit", len(win), len(all))
	}
	heap := fit("heap inuse", win, func(s sample) float64 { return s.heap }, 1<<20, "MiB")
	rss := fit("rss", win, func(s sample) float64 { return s.rss }, 1<<20, "MiB")
	// The heap live after the last collection, without the garbage
	// heap inuse also counts: half the GC's next target.
	live := fit("heap live", win, func(s sample) float64 { return s.nextGC / 2 }, 1<<20, "MiB")
	gor := fit("goroutines", win, func(s sample) float64 { return s.goroutines }, 1, "")
	fds := fit("open fds", win, func(s sample) float64 { return s.fds }, 1, "")
	peak := fit("whole run", between(all, runStart, runEnd), func(s sample) float64 { return s.heap }, 1<<20, "MiB")
	var pg, pf, pr float64
	for _, sm := range between(all, runStart, runEnd) {
		pg, pf, pr = max(pg, sm.goroutines), max(pf, sm.fds), max(pr, sm.rss)
	}
	t.Logf("relay before the clients: heap %.1f MiB, rss %.1f MiB, %v goroutines, %v fds", base.heap/(1<<20), base.rss/(1<<20), base.goroutines, base.fds)
	t.Logf("fit over %d samples from +%v to +%v of the run (%d whole fault cycles after a %v warm-up):",
		len(win), from.Sub(runStart).Round(time.Second), to.Sub(runStart).Round(time.Second), cycles, faultCycle)
	for _, x := range []series{heap, live, rss, gor, fds} {
		t.Logf("  %s", x)
	}
	t.Logf("peaks over the run: heap %.1f MiB, rss %.1f MiB, %v goroutines, %v fds", peak.max/(1<<20), pr/(1<<20), pg, pf)
	if cycles < 1 {
		return
	}
	if heap.perMinute > heapSlopeMax {
		t.Errorf("heap grows %.2f MiB/min (bound %d MiB/min)", heap.perMinute/(1<<20), heapSlopeMax>>20)
	}
	if gor.perMinute > goroutineSlopeMax {
		t.Errorf("goroutines grow %.2f/min (bound %d/min)", gor.perMinute, goroutineSlopeMax)
	}
	if fds.perMinute > fdSlopeMax {
		t.Errorf("open files grow %.2f/min (bound %d/min)", fds.perMinute, fdSlopeMax)
	}
}

// checkHeld wants the relay to hold nothing once everything converged.
func (s *soak) checkHeld() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := s.r.status(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	db := st.Databases[0]
	if db.HeldDocuments != 0 {
		s.t.Errorf("%d notes still held at the end: %+v", db.HeldDocuments, db.Held)
	}
	if m, err := s.r.get(ctx, "/metrics"); err == nil {
		for _, line := range strings.Split(string(m), "\n") {
			if strings.HasPrefix(line, "livesync_relay_holdback_revisions_total{") || strings.HasPrefix(line, "livesync_relay_purgatory_events_total{") {
				s.t.Logf("  %s", line)
			}
		}
	}
	for _, u := range db.Upstreams {
		s.t.Logf("upstream %s: %s, lag %d, %d pulled, %d pushed, %d errors, %d resets, last error %q",
			u.Name, u.State, u.Lag, u.Pulled, u.Pushed, u.Errors, u.Resets, u.LastError)
	}
}

// finishClients ends the node process and waits until the relay's
// goroutines and open files are back near their baseline.
func (s *soak) finishClients(base sample) {
	t := s.t
	if err := s.pouch.exit(); err != nil {
		t.Errorf("soak-client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var last sample
	if !poll(ctx, time.Second, func() bool {
		sm, err := s.r.sample(ctx)
		last = sm
		return err == nil && sm.goroutines <= base.goroutines+goroutinesLeftMax && sm.fds <= base.fds+fdsLeftMax
	}) {
		t.Errorf("after the clients left: %v goroutines (baseline %v), %v open files (baseline %v)",
			last.goroutines, base.goroutines, last.fds, base.fds)
	}
	t.Logf("after the clients left: %v goroutines (baseline %v), %v open files (baseline %v), heap %.1f MiB",
		last.goroutines, base.goroutines, last.fds, base.fds, last.heap/(1<<20))
}
