//go:build linux

package main

import (
	"bufio"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The relays' own answer times, to set against the clients' latencies:
// each relay's /metrics histogram livesync_relay_http_request_duration_seconds
// (by route, the time from the request's arrival to the end of its
// answer) is read when the clients start and after they finish, and the
// difference is summarised per route: requests, mean, and the bucket
// that holds the 50th and 99th percentiles (the histogram's buckets are
// coarse: 1, 5, 25, 100, 500 ms, 2.5 s...). A _changes route counts
// longpolls until they end, which the clients' figures leave out. The
// Go runtime's scheduling latency (go_sched_latencies_seconds: how long
// a runnable goroutine waited for a CPU) is summarised the same way.

const durationMetric = "livesync_relay_http_request_duration_seconds"

// schedMetric is the Go runtime's histogram of how long runnable
// goroutines waited for a CPU; its summary is under the route schedRoute.
const (
	schedMetric = "go_sched_latencies_seconds"
	schedRoute  = "(goroutines waiting for a CPU)"
)

// histogram is one route's cumulative buckets (upper bound in seconds ->
// count), sum (seconds) and count.
type histogram struct {
	buckets map[float64]float64
	sum     float64
	count   float64
}

// routeTime is one route's relay-side time over the window.
type routeTime struct {
	N      int     `json:"n"`
	MeanMs float64 `json:"meanMs"`
	// P50Ms and P99Ms are the upper bounds of the buckets that hold the
	// percentile (-1: past the last bound).
	P50Ms float64 `json:"p50LeMs"`
	P99Ms float64 `json:"p99LeMs"`
	// Over100 is the share above the first bound of at least 100 ms.
	Over100 float64 `json:"over100Ms"`
}

// scrapeDurations reads the request-duration histograms of the relay at
// url, by route.
func scrapeDurations(url, admin string) (map[string]*histogram, error) {
	req, err := http.NewRequest("GET", url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth("admin", admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	out := map[string]*histogram{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		metric := durationMetric
		if strings.HasPrefix(line, schedMetric) {
			metric = schedMetric
		} else if !strings.HasPrefix(line, durationMetric) {
			continue
		}
		name, labels, value, ok := parseSample(line)
		if !ok {
			continue
		}
		route := labels["route"]
		if metric == schedMetric {
			route = schedRoute
		}
		h := out[route]
		if h == nil {
			h = &histogram{buckets: map[float64]float64{}}
			out[route] = h
		}
		switch strings.TrimPrefix(name, metric) {
		case "_bucket":
			le := labels["le"]
			b, err := strconv.ParseFloat(le, 64)
			if le == "+Inf" {
				b, err = -1, nil
			}
			if err == nil {
				h.buckets[b] = value
			}
		case "_sum":
			h.sum = value
		case "_count":
			h.count = value
		}
	}
	return out, sc.Err()
}

// parseSample splits a Prometheus text sample `name{k="v",...} value`.
func parseSample(line string) (name string, labels map[string]string, value float64, ok bool) {
	sp := strings.LastIndexByte(line, ' ')
	if sp < 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(line[sp+1:], 64)
	if err != nil {
		return "", nil, 0, false
	}
	head := line[:sp]
	labels = map[string]string{}
	if i := strings.IndexByte(head, '{'); i >= 0 && strings.HasSuffix(head, "}") {
		name = head[:i]
		for _, kv := range strings.Split(head[i+1:len(head)-1], ",") {
			k, v, found := strings.Cut(kv, "=")
			if found {
				labels[k] = strings.Trim(v, `"`)
			}
		}
	} else {
		name = head
	}
	return name, labels, v, true
}

// routeTimes summarises, per route, the requests answered between the
// samples before and after (summed over the relays).
func routeTimes(before, after []map[string]*histogram) map[string]routeTime {
	diff := map[string]*histogram{}
	for i, a := range after {
		for route, h := range a {
			d := diff[route]
			if d == nil {
				d = &histogram{buckets: map[float64]float64{}}
				diff[route] = d
			}
			var b *histogram
			if i < len(before) {
				b = before[i][route]
			}
			d.sum += h.sum
			d.count += h.count
			for le, n := range h.buckets {
				d.buckets[le] += n
			}
			if b != nil {
				d.sum -= b.sum
				d.count -= b.count
				for le, n := range b.buckets {
					d.buckets[le] -= n
				}
			}
		}
	}
	out := map[string]routeTime{}
	for route, d := range diff {
		if d.count < 1 {
			continue
		}
		out[route] = routeTime{N: int(d.count), MeanMs: d.sum / d.count * 1000,
			P50Ms: d.quantileBound(0.50), P99Ms: d.quantileBound(0.99), Over100: d.over(0.1)}
	}
	return out
}

// quantileBound returns the upper bound (ms) of the bucket that holds
// quantile q, -1 past the last finite bound.
func (h *histogram) quantileBound(q float64) float64 {
	bounds := slices.Sorted(maps.Keys(h.buckets))
	want := q * h.count
	for _, le := range bounds {
		if le < 0 {
			continue
		}
		if h.buckets[le] >= want {
			return le * 1000
		}
	}
	return -1
}

// over returns the share of the observations above the first bound of
// at least t seconds.
func (h *histogram) over(t float64) float64 {
	for _, le := range slices.Sorted(maps.Keys(h.buckets)) {
		if le >= t {
			return 1 - h.buckets[le]/h.count
		}
	}
	return 0
}

// formatRouteTimes is the report's line of relay-side times.
func formatRouteTimes(rt map[string]routeTime) string {
	var parts []string
	for _, route := range slices.Sorted(maps.Keys(rt)) {
		t := rt[route]
		if t.N < 20 {
			continue
		}
		bound := func(ms float64) string {
			if ms < 0 {
				return "> last bucket"
			}
			return fmt.Sprintf("≤ %.3g", ms)
		}
		parts = append(parts, fmt.Sprintf("%s %d: mean %.2f, p50 %s, p99 %s, %.1f%% over 100", route, t.N, t.MeanMs, bound(t.P50Ms), bound(t.P99Ms), 100*t.Over100))
	}
	return strings.Join(parts, "; ")
}
