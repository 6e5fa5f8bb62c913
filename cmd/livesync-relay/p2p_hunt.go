package main

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/engine"
	ebridge "github.com/livesync-go/livesync-go/engine/bridge"
	"github.com/livesync-go/livesync-go/engine/decorate"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// The relay's purgatory hunt asks the groups' peers too: every approved
// peer of a joined group that is present (its announcement is current)
// or connected is a chunk source of its database's hunt, under its peer
// id as throttle key and so within the hunt's per-source limits; it stops
// being one when it is lost or revoked. A peer serves chunks in the
// remote form with their revisions (the chunks protocol), which the hunt
// stores as the relay's upstreams' chunks are stored: the whole chunk
// document, same revision, with new_edits=false through the hold-back,
// which releases the held notes they complete.

// withP2PHunts returns the upstreams by database with an entry, maybe
// empty, for every database that joins a group: such a database gets a
// bridge, and so a hunt, even without upstreams.
func withP2PHunts(ups map[string][]upstreamSpec, groups []p2pGroupSpec) map[string][]upstreamSpec {
	out := maps.Clone(ups)
	if out == nil {
		out = map[string][]upstreamSpec{}
	}
	for _, g := range groups {
		if _, ok := out[g.db]; !ok {
			out[g.db] = nil
		}
	}
	return out
}

// p2pHunt keeps one joined group's peers registered in its database's
// hunt.
type p2pHunt struct {
	joined *p2p.Group
	hunt   *hunt.Hunt
	db     store.LocalReader // the database: its sync parameters
	codec  func() (*livesync.Codec, []byte)
	window time.Duration
	log    *slog.Logger

	wake      chan struct{}
	cancel    context.CancelFunc
	done      chan struct{}
	stopWatch func()

	mu      sync.Mutex
	sources map[peer.ID]*peerSource
	meters  map[peer.ID]*peerMeter // kept when a peer leaves: its counters are since start
}

// peerMeter counts one peer's part in the hunt.
type peerMeter struct {
	meter    decorate.Meter
	unusable uint64 // chunks served that could not be stored (no revision, and none computable)
	mu       sync.Mutex
}

// startP2PHunt registers the group's peers in the hunt of its database
// (the bridge's, which every database with groups has) and follows
// their comings and goings until stop.
func (r *relay) startP2PHunt(ctx context.Context, g *p2pGroup, joined *p2p.Group) *p2pHunt {
	held, err := r.dbs.OpenHeld(ctx, g.db)
	var br *ebridge.Bridge
	if err == nil {
		br = held.Bridge()
	}
	if br == nil {
		r.log.Warn("the database's hunt does not ask the group's peers: it has no hunt", "db", g.db, "group", g.name, "err", err)
		return nil
	}
	window := r.s.huntConfig.Window
	if window == 0 {
		window = hunt.DefaultWindow
	}
	hctx, cancel := context.WithCancel(context.Background())
	ph := &p2pHunt{joined: joined, hunt: br.Hunt(), db: held.Served, codec: held.Codec, window: window,
		log: r.log.With("component", "p2p", "db", g.db, "group", g.name), wake: make(chan struct{}, 1),
		cancel: cancel, done: make(chan struct{}), sources: map[peer.ID]*peerSource{}, meters: map[peer.ID]*peerMeter{}}
	ph.stopWatch = joined.Watch(func(p2p.PeerEvent) { ph.poke() })
	go ph.run(hctx)
	return ph
}

func (ph *p2pHunt) poke() {
	select {
	case ph.wake <- struct{}{}:
	default:
	}
}

// run brings the sources in line with the group's peers at every event
// of the group, and every BookPollInterval (a connection that opens or
// closes is no event).
func (ph *p2pHunt) run(ctx context.Context) {
	defer close(ph.done)
	t := time.NewTicker(p2p.BookPollInterval)
	defer t.Stop()
	for {
		ph.sync()
		select {
		case <-ctx.Done():
			return
		case <-ph.wake:
		case <-t.C:
		}
	}
}

// stop ends the following and removes every peer from the hunt.
func (ph *p2pHunt) stop() {
	if ph == nil {
		return
	}
	ph.stopWatch()
	ph.cancel()
	<-ph.done
	ph.mu.Lock()
	defer ph.mu.Unlock()
	for id := range ph.sources {
		ph.hunt.RemoveSource(id.String())
	}
	clear(ph.sources)
}

// sync adds the approved peers that are present or connected and
// removes the others.
func (ph *p2pHunt) sync() {
	want := map[peer.ID]bool{}
	for _, p := range ph.joined.Peers() {
		if p.Approved && (p.Present || p.Connected) {
			want[p.ID] = true
		}
	}
	ph.mu.Lock()
	defer ph.mu.Unlock()
	for id := range want {
		if ph.sources[id] != nil {
			continue
		}
		rem := ph.joined.Remote(id)
		if rem == nil {
			continue // revoked meanwhile
		}
		m := ph.meters[id]
		if m == nil {
			m = &peerMeter{meter: decorate.Meter{Window: ph.window}}
			ph.meters[id] = m
		}
		s := &peerSource{id: id, client: rem.ChunkClient(), rem: rem, db: ph.db, codec: ph.codec, m: m, log: ph.log.With("peer", id.String())}
		ph.sources[id] = s
		ph.hunt.AddSource(decorate.Metered(s, &m.meter), nil)
		ph.log.Info("a peer of the group is a source of the hunt for held notes' chunks", "peer", id.String())
	}
	for id := range ph.sources {
		if !want[id] {
			delete(ph.sources, id)
			ph.hunt.RemoveSource(id.String())
			ph.log.Info("a peer of the group left the hunt (lost or revoked)", "peer", id.String())
		}
	}
}

// peerHuntStatus is the hunt's view of one peer in /status: what the
// relay asked it for, and the most requests it had on the wire at once
// and starting within one window (never above the hunt's limits).
type peerHuntStatus struct {
	Source      bool   `json:"source"` // a source of the hunt now
	Requests    uint64 `json:"requests"`
	Found       uint64 `json:"found"`
	Missing     uint64 `json:"missing"`
	Failed      uint64 `json:"failed"`
	Chunks      uint64 `json:"chunks"`
	Unusable    uint64 `json:"unusable"`
	InFlight    int    `json:"in_flight"`
	MaxInFlight int    `json:"max_in_flight"`
	MaxInWindow int    `json:"max_in_window"`
}

// status returns id's part in the hunt; nil when it never was a source.
func (ph *p2pHunt) status(id peer.ID) *peerHuntStatus {
	if ph == nil {
		return nil
	}
	ph.mu.Lock()
	m, active := ph.meters[id], ph.sources[id] != nil
	ph.mu.Unlock()
	if m == nil {
		return nil
	}
	st := ph.hunt.Stats().Sources[id.String()]
	ms := m.meter.Stats()
	m.mu.Lock()
	unusable := m.unusable
	m.mu.Unlock()
	return &peerHuntStatus{Source: active, Requests: st.Requests, Found: st.Found, Missing: st.Missing, Failed: st.Failed,
		Chunks: st.Chunks, Unusable: unusable, InFlight: st.InFlight, MaxInFlight: ms.MaxInFlight, MaxInWindow: ms.MaxInWindow}
}

// peerSource is one peer as a chunk source of the hunt: it returns the
// peer's chunks as the bridge's envelopes of whole chunk documents.
type peerSource struct {
	id     peer.ID
	client *p2p.ChunkClient
	rem    *p2p.Remote // the peer's records: its group salt
	db     store.LocalReader
	codec  func() (*livesync.Codec, []byte)
	m      *peerMeter
	log    *slog.Logger

	saltMu   sync.Mutex
	salt     []byte
	saltRead time.Time
}

var _ engine.ChunkSource = (*peerSource)(nil)

// CanFetchDirect reports true: a peer serves chunks by id.
func (s *peerSource) CanFetchDirect() bool { return true }

// ThrottleKey is the peer id.
func (s *peerSource) ThrottleKey() string { return s.id.String() }

// FetchChunks asks the peer for ids. A chunk that cannot be stored as a
// document (see chunkDoc) counts as missing from this peer.
func (s *peerSource) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	found, missing, err := s.client.FetchRaw(ctx, ids)
	if err != nil {
		return engine.FetchResult{}, err
	}
	res := engine.FetchResult{Missing: missing, Found: make([]engine.Chunk, 0, len(found))}
	var form *chunkForm
	for _, c := range found {
		if form == nil && decorate.IsE2EEChunkID(c.ID) {
			form = s.form(ctx)
		}
		doc, err := chunkDoc(c, form)
		if err != nil {
			s.m.mu.Lock()
			s.m.unusable++
			s.m.mu.Unlock()
			s.log.Warn("a chunk the peer served cannot be stored", "chunk", c.ID, "err", err)
			res.Missing = append(res.Missing, c.ID)
			continue
		}
		res.Found = append(res.Found, ebridge.RawChunk{ID: c.ID, Doc: doc}.Envelope())
	}
	return res, nil
}

// huntOf is the group's hunt of peers (nil before the join).
func (g *p2pGroup) huntOf() *p2pHunt {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.hunt
}

var (
	descP2PHuntFetches = p2pDesc("p2p_hunt_fetches_total",
		"Requests of the relay's hunt for held notes' chunks to a peer, by outcome: found (at least one chunk), missing (none), failed.",
		"db", "group", "peer", "outcome")
	descP2PHuntMaxInFlight = p2pDesc("p2p_hunt_max_in_flight",
		"The most hunt requests on the wire to a peer at once since start (never above hunt_limit{limit=\"max_in_flight\"}).", "db", "group", "peer")
	descP2PHuntMaxInWindow = p2pDesc("p2p_hunt_max_in_window",
		"The most hunt requests to a peer starting within one rate window since start (never above hunt_limit{limit=\"max_per_window\"}).", "db", "group", "peer")
)

// p2pHuntDescs are the descriptions of collectP2PHunt's metrics.
var p2pHuntDescs = []*prometheus.Desc{descP2PHuntFetches, descP2PHuntMaxInFlight, descP2PHuntMaxInWindow}

// collectP2PHunt reports the hunt's requests to each peer of g that was
// one of its sources.
func collectP2PHunt(ch chan<- prometheus.Metric, g *p2pGroup) {
	ph := g.huntOf()
	if ph == nil {
		return
	}
	ph.mu.Lock()
	ids := slices.Collect(maps.Keys(ph.meters))
	ph.mu.Unlock()
	for _, id := range ids {
		st := ph.status(id)
		if st == nil {
			continue
		}
		labels := []string{g.db, g.name, id.String()}
		for _, o := range []struct {
			outcome string
			n       uint64
		}{{"found", st.Found}, {"missing", st.Missing}, {"failed", st.Failed}} {
			ch <- prometheus.MustNewConstMetric(descP2PHuntFetches, prometheus.CounterValue, float64(o.n), append(labels, o.outcome)...)
		}
		ch <- prometheus.MustNewConstMetric(descP2PHuntMaxInFlight, prometheus.GaugeValue, float64(st.MaxInFlight), labels...)
		ch <- prometheus.MustNewConstMetric(descP2PHuntMaxInWindow, prometheus.GaugeValue, float64(st.MaxInWindow), labels...)
	}
}

// validRev reports a revision "N-hash": a positive generation and a
// hash of hex digits, no longer than a store takes.
func validRev(rev string) bool {
	gen, hash, ok := strings.Cut(rev, "-")
	n, err := strconv.Atoi(gen)
	if !ok || err != nil || n < 1 || hash == "" || len(rev) > store.MaxRevLength {
		return false
	}
	for _, c := range hash {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}
