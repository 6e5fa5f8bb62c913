package main

import (
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/livesync-go/livesync-go/adapters/p2p"
)

// p2pStatus is one group of a database in /status. The group's
// passphrase is never shown.
type p2pStatus struct {
	Group  string `json:"group"`
	PeerID string `json:"peer_id"`
	// Addrs are the relay's addresses as the group announces them.
	Addrs []string `json:"addrs"`
	// Joined is false until the group joined, just after the relay
	// starts serving HTTP (a failed join stops the relay).
	Joined  bool            `json:"joined"`
	Peers   []p2pPeerStatus `json:"peers"`
	Pending []p2pPending    `json:"pending"`
}

// p2pPeerStatus is one peer of a group: what it exchanged with the relay.
type p2pPeerStatus struct {
	ID        string `json:"id"`
	Device    string `json:"device"`
	Approved  bool   `json:"approved"`
	Connected bool   `json:"connected"`
	// Present: its announcement is current (it is online).
	Present      bool       `json:"present"`
	LastSeen     *time.Time `json:"last_seen,omitempty"`
	BytesIn      uint64     `json:"bytes_in"`
	BytesOut     uint64     `json:"bytes_out"`
	DocsIn       uint64     `json:"docs_in"`
	DocsOut      uint64     `json:"docs_out"`
	ChunksIn     uint64     `json:"chunks_in"`
	ChunksOut    uint64     `json:"chunks_out"`
	HuntRequests uint64     `json:"hunt_requests"`
	// Hunt is what the relay's own hunt asked this peer for (p2p_hunt.go);
	// absent for a peer that never was one of its sources.
	Hunt *peerHuntStatus `json:"hunt,omitempty"`
}

// p2pPending is a peer that announced itself or knocked without being
// approved: approve it with PUT /_p2p/{db}/{group}/peers/{id}.
type p2pPending struct {
	ID     string    `json:"id"`
	Device string    `json:"device"`
	Since  time.Time `json:"since"`
}

// p2pStatuses are database db's groups for /status.
func (rt *p2pRuntime) statuses(db string) []p2pStatus {
	out := []p2pStatus{}
	if rt == nil {
		return out
	}
	for _, g := range rt.groups {
		if g.db == db {
			out = append(out, rt.status(g))
		}
	}
	return out
}

func (rt *p2pRuntime) status(g *p2pGroup) p2pStatus {
	st := p2pStatus{Group: g.name, PeerID: rt.host.ID().String(), Addrs: p2p.Addrs(rt.host), Peers: []p2pPeerStatus{}, Pending: []p2pPending{}}
	if st.Addrs == nil {
		st.Addrs = []string{}
	}
	if joined := g.group(); joined != nil {
		st.Joined = true
		for _, p := range joined.Peers() {
			ps := p2pPeerStatus{
				ID: p.ID.String(), Device: p.Device, Approved: p.Approved, Connected: p.Connected, Present: p.Present,
				BytesIn: p.Counters.BytesIn, BytesOut: p.Counters.BytesOut, DocsIn: p.Counters.DocsIn, DocsOut: p.Counters.DocsOut,
				ChunksIn: p.Counters.ChunksIn, ChunksOut: p.Counters.ChunksOut, HuntRequests: p.Counters.ChunkRequests,
				Hunt: g.huntOf().status(p.ID),
			}
			if !p.LastSeen.IsZero() {
				t := p.LastSeen.UTC()
				ps.LastSeen = &t
			}
			st.Peers = append(st.Peers, ps)
		}
	} else {
		for _, e := range g.book.Approved() {
			st.Peers = append(st.Peers, p2pPeerStatus{ID: e.ID.String(), Device: e.Device, Approved: true})
		}
	}
	slices.SortFunc(st.Peers, func(a, b p2pPeerStatus) int { return strings.Compare(a.ID, b.ID) })
	for _, e := range g.book.Pending() {
		st.Pending = append(st.Pending, p2pPending{ID: e.ID.String(), Device: e.Device, Since: e.Since.UTC()})
	}
	slices.SortFunc(st.Pending, func(a, b p2pPending) int { return strings.Compare(a.ID, b.ID) })
	return st
}

// p2pCollector reports the groups' peers and each peer's counters (the
// group's meter) and the Nostr relay's counters at scrape time.
type p2pCollector struct{ rt *p2pRuntime }

func p2pDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(metricsNamespace+"_"+name, help, labels, nil)
}

var (
	descP2PConnected = p2pDesc("p2p_peers_connected", "Approved peers of the group connected to the relay now.", "db", "group")
	descP2PApproved  = p2pDesc("p2p_peers_approved", "Peers the group's book approves.", "db", "group")
	descP2PPending   = p2pDesc("p2p_pending_peers", "Peers that announced themselves or knocked without being approved (PUT /_p2p/{db}/{group}/peers/{id} approves one).", "db", "group")
	descP2PBytes     = p2pDesc("p2p_bytes_total", "Frame payload bytes exchanged with a peer (both protocols), by direction: in (from the peer) or out.", "db", "group", "peer", "direction")
	descP2PDocs      = p2pDesc("p2p_documents_total", "Documents a peer pushed to the relay (in) or pulled from it (out).", "db", "group", "peer", "direction")
	descP2PChunks    = p2pDesc("p2p_chunks_total", "Chunks received from a peer (in) or served to it by id (out).", "db", "group", "peer", "direction")
	descP2PHunt      = p2pDesc("p2p_hunt_requests_total", "Chunk requests by id a peer made (its hunt for missing chunks).", "db", "group", "peer")

	descNostrConns  = p2pDesc("nostr_connections", "Open websocket connections to /_nostr.")
	descNostrStored = p2pDesc("nostr_events_stored", "Discovery events /_nostr keeps now.")
	descNostrEvents = p2pDesc("nostr_events_total", "Events sent to /_nostr, by outcome: accepted or rejected (wrong kind, too large, over the rate, invalid).", "outcome")
	descNostrDrops  = p2pDesc("nostr_connections_closed_total",
		"Connections to /_nostr the relay turned away, by reason: refused (max_connections were open) or slow (it did not read its answers).", "reason")
)

// Describe sends the descriptions.
func (c *p2pCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descP2PConnected, descP2PApproved, descP2PPending, descP2PBytes, descP2PDocs, descP2PChunks, descP2PHunt,
		descNostrConns, descNostrStored, descNostrEvents, descNostrDrops} {
		ch <- d
	}
	for _, d := range p2pHuntDescs {
		ch <- d
	}
}

// Collect reads every group and the Nostr relay.
func (c *p2pCollector) Collect(ch chan<- prometheus.Metric) {
	rt := c.rt
	if rt.nostr != nil {
		s := rt.nostr.Stats()
		ch <- prometheus.MustNewConstMetric(descNostrConns, prometheus.GaugeValue, float64(s.Connections))
		ch <- prometheus.MustNewConstMetric(descNostrStored, prometheus.GaugeValue, float64(s.Events))
		ch <- prometheus.MustNewConstMetric(descNostrEvents, prometheus.CounterValue, float64(s.Accepted), "accepted")
		ch <- prometheus.MustNewConstMetric(descNostrEvents, prometheus.CounterValue, float64(s.Rejected), "rejected")
		ch <- prometheus.MustNewConstMetric(descNostrDrops, prometheus.CounterValue, float64(s.Refused), "refused")
		ch <- prometheus.MustNewConstMetric(descNostrDrops, prometheus.CounterValue, float64(s.Dropped), "slow")
	}
	for _, g := range rt.groups {
		gauge := func(d *prometheus.Desc, v int) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), g.db, g.name)
		}
		gauge(descP2PPending, len(g.book.Pending()))
		gauge(descP2PApproved, len(g.book.Approved()))
		joined := g.group()
		if joined == nil {
			gauge(descP2PConnected, 0)
			continue
		}
		connected := 0
		for _, p := range joined.Peers() {
			if p.Approved && p.Connected {
				connected++
			}
		}
		gauge(descP2PConnected, connected)
		for id, pc := range joined.Meter().Snapshot() {
			collectPeer(ch, g, id.String(), pc)
		}
		collectP2PHunt(ch, g)
	}
}

func collectPeer(ch chan<- prometheus.Metric, g *p2pGroup, id string, pc p2p.PeerCounters) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{g.db, g.name, id}, labels...)...)
	}
	counter(descP2PBytes, pc.BytesIn, "in")
	counter(descP2PBytes, pc.BytesOut, "out")
	counter(descP2PDocs, pc.DocsIn, "in")
	counter(descP2PDocs, pc.DocsOut, "out")
	counter(descP2PChunks, pc.ChunksIn, "in")
	counter(descP2PChunks, pc.ChunksOut, "out")
	counter(descP2PHunt, pc.ChunkRequests)
}
