package main

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	ebridge "github.com/livesync-go/livesync-go/engine/bridge"
)

// metricsNamespace prefixes every metric of the relay.
const metricsNamespace = "livesync_relay"

// metrics are the relay's Prometheus metrics on their own registry (with
// the Go runtime and process collectors).
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec   // route, code
	duration *prometheus.HistogramVec // route
	feeds    *prometheus.GaugeVec     // feed
	open     atomic.Int64             // live feeds, all kinds
}

func newMetrics(dbs *heldDatabases) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "http_requests_total",
			Help: "HTTP requests answered, by route pattern (e.g. /{db}/_changes) and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern; a changes feed counts until it ends.",
			Buckets: []float64{.001, .005, .025, .1, .5, 2.5, 10, 60, 300},
		}, []string{"route"}),
		feeds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "replication_clients",
			Help: "Open longpoll, continuous and eventsource _changes feeds: clients replicating live.",
		}, []string{"feed"}),
	}
	for _, f := range []string{"longpoll", "continuous", "eventsource"} {
		m.feeds.WithLabelValues(f) // present at 0 before the first client
	}
	m.reg.MustRegister(m.requests, m.duration, m.feeds, &dbCollector{dbs: dbs},
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{
			// How long runnable goroutines waited for a CPU
			// (go_sched_latencies_seconds): a relay slow to answer while
			// using little CPU is waiting for a machine that has none.
			Matcher: regexp.MustCompile(`^/sched/latencies:seconds$`),
		})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// onRequest is couchapi's Hooks.OnRequest, and is called for the relay's
// own routes too.
func (m *metrics) onRequest(route string, status int, dur time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route).Observe(dur.Seconds())
}

// countFeeds counts live _changes feeds while they are open.
func (m *metrics) countFeeds(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/_changes") {
			switch feed := r.URL.Query().Get("feed"); feed {
			case "longpoll", "continuous", "eventsource":
				g := m.feeds.WithLabelValues(feed)
				g.Inc()
				m.open.Add(1)
				defer func() { g.Dec(); m.open.Add(-1) }()
			}
		}
		next.ServeHTTP(w, r)
	})
}

// openFeeds is the number of live feeds open now.
func (m *metrics) openFeeds() int { return int(m.open.Load()) }

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// dbCollector reports each open database's hold-back and store size at
// scrape time.
type dbCollector struct{ dbs *heldDatabases }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(metricsNamespace+"_"+name, help, append([]string{"db"}, labels...), nil)
}

var (
	descHeldDocs = desc("held_documents",
		"Documents held back until their chunks arrive, by purgatory state (active: hunted; soft_expired: waiting without hunting).", "state")
	descHeldRevs = desc("held_revisions", "Metadata revisions in the holding area.")
	descHoldback = desc("holdback_revisions_total",
		"Pushed metadata revisions by what the hold-back did: written_through (chunks present), held, released (after waiting), dropped (superseded or expired, unserved), unreadable (obfuscated, no passphrase), undecodable (codec failed), refused (too many held documents: [holdback] limits).", "outcome")
	descSaveErrors = desc("holdback_save_errors_total", "Failed saves of the purgatory state (retried at the next save).")
	descPurgatory  = desc("purgatory_events_total",
		"Purgatory (hunt) lifecycle events: release, soft_expiry, expiry, revival, verify_failure, release_error, superseded.", "event")
	descRemembered = desc("purgatory_remembered_revisions", "Expired or rejected revisions remembered so that replication does not restart their hunt.")
	descMode       = desc("holdback_mode", "1 for the database's hold-back mode: holdback, holdback-decrypt or passthrough-obfuscated.", "mode")
	descStoreSize  = desc("store_size_bytes", "Size of the database's bbolt file.")

	descUpstreamUp = desc("upstream_up",
		"1 while the upstream replicates (or, for a source-only upstream, answers), 0 while it connects, backs off or has failed.", "upstream")
	descUpstreamState = desc("upstream_state", "1 for the upstream's state: connecting, catching-up, live, backoff, error, stopped.", "upstream", "state")
	descUpstreamLag   = desc("upstream_lag",
		"Documents either side does not have yet: upstream_lag_documents of both directions added (as lag in /status); -1 while unknown.", "upstream")
	descUpstreamLagDir = desc("upstream_lag_documents",
		"Documents the other side does not have yet, by direction: push (the relay's changes after the push position), pull (the upstream's changes after the pull position; a bucket: packs); as lag_push and lag_pull in /status; -1 while unknown.", "upstream", "direction")
	descUpstreamResets = desc("upstream_resets_total",
		"Resets of the upstream the relay noticed (database recreated, restored or wiped); each restarts replication from zero in both directions.", "upstream")
	descUpstreamErrors = desc("upstream_errors_total", "Failures of the upstream's replication, handshake or chunk requests.", "upstream")
	descUpstreamDocs   = desc("upstream_documents_total",
		"Documents (a bucket: records) written to the relay (pull) or to the upstream (push).", "upstream", "direction")
	descHuntRequests = desc("hunt_requests_total",
		"Hunt requests by source (the upstream names of a throttle key) and outcome: found (some chunks), missing (none), failed, canceled.", "source", "outcome")
	descHuntChunks      = desc("hunt_chunks_total", "Chunks the hunt found, by source.", "source")
	descHuntInFlight    = desc("hunt_in_flight", "Hunt requests on the wire now, by source.", "source")
	descHuntInWindow    = desc("hunt_in_window", "Hunt request starts inside the sliding rate window now, by source.", "source")
	descHuntQueued      = desc("hunt_queued_documents", "Documents waiting for a source's capacity, by source.", "source")
	descHuntMaxInFlight = desc("hunt_max_in_flight", "The most hunt requests seen on the wire at once since start, by source (never above hunt_limit{limit=\"max_in_flight\"}).", "source")
	descHuntMaxInWindow = desc("hunt_max_in_window", "The most hunt requests seen starting within one rate window since start, by source (never above hunt_limit{limit=\"max_per_window\"}).", "source")
	descHuntLimit       = desc("hunt_limit", "The per-source limits of the hunt: max_in_flight, max_per_window, window_seconds.", "limit")
	descHuntDocs        = desc("hunt_documents", "Documents the hunt looks for chunks of: hunting (in a pass) or waiting (first pass or backoff).", "state")
	descHuntDone        = desc("hunt_documents_total", "Documents that left the hunt: completed (all chunks local) or removed (released, expired or deleted otherwise).", "outcome")
	descHuntHedges      = desc("hunt_hedges_total", "Hedge requests started (a second source asked after a slow first one).")

	descLeaseLeader = desc("lease_leader",
		"1 while this relay holds the hunt's lease of a database kept on CouchDB (it runs the upstreams and the hunt), 0 while another relay does; absent for a bbolt database.")
	descLeaseTakeovers  = desc("lease_takeovers_total", "Times this relay became the leader of a database kept on CouchDB (took the hunt's lease).")
	descSharedRefreshes = desc("shared_refreshes_total", "Reads of the holds other relays made in a database kept on CouchDB.")
	descSharedArrivals  = desc("shared_arrivals_total", "Chunk ids seen arriving in the changes feed of a database kept on CouchDB (through any relay or an upstream).")
)

// Describe sends the descriptions of the per-database metrics.
func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHeldDocs, descHeldRevs, descHoldback, descSaveErrors, descPurgatory, descRemembered, descMode, descStoreSize,
		descUpstreamUp, descUpstreamState, descUpstreamLag, descUpstreamLagDir, descUpstreamResets, descUpstreamErrors, descUpstreamDocs,
		descHuntRequests, descHuntChunks, descHuntInFlight, descHuntInWindow, descHuntQueued, descHuntMaxInFlight, descHuntMaxInWindow,
		descHuntLimit, descHuntDocs, descHuntDone, descHuntHedges, descLeaseLeader, descLeaseTakeovers, descSharedRefreshes, descSharedArrivals,
		descDataDirAvail, descDataDirSize} {
		ch <- d
	}
}

// Collect reads every open database's statistics.
func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	c.collectDisk(ch)
	for _, v := range c.dbs.Opened() {
		s, db := v.Stats(), v.Name
		gauge(descHeldDocs, float64(s.Purgatory.Active), db, "active")
		gauge(descHeldDocs, float64(s.Purgatory.SoftExpired), db, "soft_expired")
		gauge(descHeldRevs, float64(s.Held), db)
		counter(descHoldback, s.WrittenThrough, db, "written_through")
		counter(descHoldback, s.Holds, db, "held")
		counter(descHoldback, s.Released, db, "released")
		counter(descHoldback, s.Dropped, db, "dropped")
		counter(descHoldback, s.Unreadable, db, "unreadable")
		counter(descHoldback, s.Undecodable, db, "undecodable")
		counter(descHoldback, s.Refused, db, "refused")
		counter(descSaveErrors, s.SaveErrors, db)
		p := s.Purgatory
		counter(descPurgatory, p.Releases, db, "release")
		counter(descPurgatory, p.SoftExpiries, db, "soft_expiry")
		counter(descPurgatory, p.Expiries, db, "expiry")
		counter(descPurgatory, p.Revivals, db, "revival")
		counter(descPurgatory, p.VerifyFailures, db, "verify_failure")
		counter(descPurgatory, p.ReleaseErrors, db, "release_error")
		counter(descPurgatory, p.Superseded, db, "superseded")
		gauge(descRemembered, float64(p.Remembered), db)
		gauge(descMode, 1, db, string(s.Mode))
		if size, ok := c.dbs.fileSize(db); ok {
			gauge(descStoreSize, float64(size), db)
		}
		if sh := v.SharedStatus(); sh != nil {
			leader := 0.0
			if sh.Leader {
				leader = 1
			}
			gauge(descLeaseLeader, leader, db)
			counter(descLeaseTakeovers, sh.Takeovers, db)
			counter(descSharedRefreshes, sh.Refreshes, db)
			counter(descSharedArrivals, sh.Arrivals, db)
		}
		if bv, ok := c.dbs.tally.view(db, v.Bridge()); ok {
			collectBridge(&bv, db, gauge, counter)
		}
	}
}

// collectBridge reports a database's upstreams and hunt, counted since
// the relay started (over every bridge the database had here).
func collectBridge(bv *bridgeView, db string, gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, uint64, ...string)) {
	ups, hs, b := bv.ups, bv.hunt, bv.b
	for i, u := range ups {
		up := 0.0
		if bv.up(i) {
			up = 1
		}
		gauge(descUpstreamUp, up, db, u.Name)
		for _, st := range []string{ebridge.StateConnecting, ebridge.StateCatchingUp, ebridge.StateLive, ebridge.StateBackoff, ebridge.StateError, ebridge.StateStopped} {
			v := 0.0
			if u.State == st {
				v = 1
			}
			gauge(descUpstreamState, v, db, u.Name, st)
		}
		gauge(descUpstreamLag, float64(u.Lag), db, u.Name)
		gauge(descUpstreamLagDir, float64(u.LagPush), db, u.Name, "push")
		gauge(descUpstreamLagDir, float64(u.LagPull), db, u.Name, "pull")
		counter(descUpstreamResets, u.Resets, db, u.Name)
		counter(descUpstreamErrors, u.Errors, db, u.Name)
		counter(descUpstreamDocs, u.DocsPulled, db, u.Name, "pull")
		counter(descUpstreamDocs, u.DocsPushed, db, u.Name, "push")
	}
	seen := map[string]bool{}
	for _, u := range ups {
		s := u.Hunt
		if seen[s.ThrottleKey] {
			continue
		}
		seen[s.ThrottleKey] = true
		src := b.SourceName(s.ThrottleKey)
		counter(descHuntRequests, s.Found, db, src, "found")
		counter(descHuntRequests, s.Missing, db, src, "missing")
		counter(descHuntRequests, s.Failed, db, src, "failed")
		counter(descHuntRequests, s.Canceled, db, src, "canceled")
		counter(descHuntChunks, s.Chunks, db, src)
		gauge(descHuntInFlight, float64(s.InFlight), db, src)
		gauge(descHuntInWindow, float64(s.InWindow), db, src)
		gauge(descHuntQueued, float64(s.Queued), db, src)
		gauge(descHuntMaxInFlight, float64(s.MaxInFlight), db, src)
		gauge(descHuntMaxInWindow, float64(s.MaxInWindow), db, src)
	}
	gauge(descHuntLimit, float64(hs.Limits.MaxInFlight), db, "max_in_flight")
	gauge(descHuntLimit, float64(hs.Limits.MaxPerWindow), db, "max_per_window")
	gauge(descHuntLimit, hs.Limits.WindowSeconds, db, "window_seconds")
	gauge(descHuntDocs, float64(hs.Hunting), db, "hunting")
	gauge(descHuntDocs, float64(hs.Waiting), db, "waiting")
	counter(descHuntDone, hs.Completed, db, "completed")
	counter(descHuntDone, hs.Removed, db, "removed")
	counter(descHuntHedges, hs.Hedges, db)
}
