package main

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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
		"Pushed metadata revisions by what the hold-back did: written_through (chunks present), held, released (after waiting), dropped (superseded or expired, unserved), unreadable (obfuscated, no passphrase), undecodable (codec failed).", "outcome")
	descSaveErrors = desc("holdback_save_errors_total", "Failed saves of the purgatory state (retried at the next save).")
	descPurgatory  = desc("purgatory_events_total",
		"Purgatory (hunt) lifecycle events: release, soft_expiry, expiry, revival, verify_failure, release_error, superseded.", "event")
	descRemembered = desc("purgatory_remembered_revisions", "Expired or rejected revisions remembered so that replication does not restart their hunt.")
	descMode       = desc("holdback_mode", "1 for the database's hold-back mode: holdback, holdback-decrypt or passthrough-obfuscated.", "mode")
	descStoreSize  = desc("store_size_bytes", "Size of the database's bbolt file.")
)

// Describe sends the descriptions of the per-database metrics.
func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHeldDocs, descHeldRevs, descHoldback, descSaveErrors, descPurgatory, descRemembered, descMode, descStoreSize} {
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
	for _, v := range c.dbs.vaults() {
		s, db := v.Stats(), v.name
		gauge(descHeldDocs, float64(s.Purgatory.Active), db, "active")
		gauge(descHeldDocs, float64(s.Purgatory.SoftExpired), db, "soft_expired")
		gauge(descHeldRevs, float64(s.Held), db)
		counter(descHoldback, s.WrittenThrough, db, "written_through")
		counter(descHoldback, s.Holds, db, "held")
		counter(descHoldback, s.Released, db, "released")
		counter(descHoldback, s.Dropped, db, "dropped")
		counter(descHoldback, s.Unreadable, db, "unreadable")
		counter(descHoldback, s.Undecodable, db, "undecodable")
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
	}
}
