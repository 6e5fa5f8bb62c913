package main

import (
	"context"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
)

// lsp2pStatus is one LiveSync P2P room of a database in /status. The
// room passphrase, the vault passphrase and the TURN credential are
// never shown.
type lsp2pStatus struct {
	Group      string `json:"group"`
	AppID      string `json:"app_id"`
	DeviceName string `json:"device_name"`
	// SelfID is the relay's Trystero peer id in the room (new at every
	// join); absent while not joined.
	SelfID string   `json:"self_id,omitempty"`
	Relays []string `json:"relays"`
	// State is starting, joined, error (Error says why; the relay tries
	// again) or stopped.
	State     string `json:"state"`
	Error     string `json:"error,omitempty"`
	Broadcast bool   `json:"broadcast"`
	// Peers are the devices present that advertised themselves.
	Peers []lsp2pPeerStatus `json:"peers"`
	// PullsServed counts the devices' pulls from the relay that ended,
	// PullsMade the relay's pulls from devices (asked by reqSync or
	// onProgress); DocumentsIn the documents the devices' pulls wrote to
	// the relay's database, DocumentsOut those it served them.
	PullsServed  uint64 `json:"pulls_served"`
	PullsMade    uint64 `json:"pulls_made"`
	DocumentsIn  uint64 `json:"documents_in"`
	DocumentsOut uint64 `json:"documents_out"`
	// JoinErrors counts the join errors the relay's side saw (a device
	// with another room passphrase, when the relay is the side that
	// opens its sealed offer; a connection that failed); Rejoins the joins after the vault's codec or settings
	// changed; UnusableChunks chunks a device served the hunt that the
	// relay could not encode.
	JoinErrors     uint64 `json:"join_errors"`
	Rejoins        uint64 `json:"rejoins"`
	UnusableChunks uint64 `json:"unusable_chunks"`
}

// lsp2pPeerStatus is one device of a room.
type lsp2pPeerStatus struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Platform string `json:"platform"`
	// Accepted: auto_accept matches its name and auto_deny does not.
	Accepted bool `json:"accepted"`
	// HuntSource: a chunk source of the database's hunt now.
	HuntSource bool `json:"hunt_source"`
}

// statuses are database db's rooms for /status.
func (rt *lsp2pRuntime) statuses(db string) []lsp2pStatus {
	out := []lsp2pStatus{}
	if rt == nil {
		return out
	}
	for _, rm := range rt.rooms {
		if rm.spec.db == db {
			out = append(out, rm.status())
		}
	}
	return out
}

func (rm *lsp2pRoom) status() lsp2pStatus {
	sp := rm.spec
	rm.mu.Lock()
	st := lsp2pStatus{Group: sp.group, AppID: sp.appID, DeviceName: sp.device, Relays: slices.Clone(rm.relays), State: rm.state,
		Error: rm.lastErr, Broadcast: sp.broadcast, Peers: []lsp2pPeerStatus{}}
	node := rm.node
	rm.mu.Unlock()
	if st.Relays == nil {
		st.Relays = slices.Clone(sp.relays)
	}
	st.PullsServed, st.PullsMade = rm.pullsServed.Load(), rm.pullsMade.Load()
	st.DocumentsIn, st.DocumentsOut = rm.docsIn.Load(), rm.docsOut.Load()
	st.JoinErrors, st.Rejoins, st.UnusableChunks = rm.joinErrors.Load(), rm.rejoins.Load(), rm.unusable.Load()
	if node == nil {
		return st
	}
	st.SelfID = node.SelfID()
	sources := rm.huntSources()
	for _, ad := range node.Known() {
		st.Peers = append(st.Peers, lsp2pPeerStatus{ID: ad.PeerID, Name: ad.Name, Platform: ad.Platform,
			Accepted: node.Hosted().CanAccept(context.Background(), ad.PeerID, livesyncrpc.MethodBulkGet), HuntSource: sources[ad.PeerID]})
	}
	slices.SortFunc(st.Peers, func(a, b lsp2pPeerStatus) int { return strings.Compare(a.ID, b.ID) })
	return st
}

// lsp2pCollector reports every room at scrape time. Peer ids are no
// label: a device has a new one at every join.
type lsp2pCollector struct{ rt *lsp2pRuntime }

var (
	descLSP2PUp    = p2pDesc("livesync_p2p_joined", "1 while the relay is in the LiveSync P2P room, 0 while it joins or retries after an error.", "db", "group")
	descLSP2PPeers = p2pDesc("livesync_p2p_peers", "Devices present in the LiveSync P2P room, by whether the relay accepts them (auto_accept).", "db", "group", "accepted")
	descLSP2PPulls = p2pDesc("livesync_p2p_pulls_total",
		"Pulls that ended: served (a device pulled from the relay) or made (the relay pulled from a device, asked by its sync or change notice).", "db", "group", "kind")
	descLSP2PDocs = p2pDesc("livesync_p2p_documents_total",
		"Documents written to the relay by its pulls from devices (in) and served to devices' pulls (out).", "db", "group", "direction")
	descLSP2PJoinErrors = p2pDesc("livesync_p2p_join_errors_total", "Join errors the relay's side of the room saw: a device's sealed signalling it could not open (another room passphrase) or a connection that failed.", "db", "group")
	descLSP2PHunt       = p2pDesc("livesync_p2p_hunt_sources", "Devices of the room that are chunk sources of the database's hunt now.", "db", "group")
)

// Describe sends the descriptions.
func (c *lsp2pCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLSP2PUp, descLSP2PPeers, descLSP2PPulls, descLSP2PDocs, descLSP2PJoinErrors, descLSP2PHunt} {
		ch <- d
	}
}

// Collect reads every room.
func (c *lsp2pCollector) Collect(ch chan<- prometheus.Metric) {
	if c.rt == nil {
		return
	}
	for _, rm := range c.rt.rooms {
		labels := []string{rm.spec.db, rm.spec.group}
		gauge := func(d *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append(slices.Clone(labels), extra...)...)
		}
		counter := func(d *prometheus.Desc, v uint64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append(slices.Clone(labels), extra...)...)
		}
		st := rm.status()
		up, accepted := 0.0, 0
		if st.State == lsp2pJoined {
			up = 1
		}
		for _, p := range st.Peers {
			if p.Accepted {
				accepted++
			}
		}
		gauge(descLSP2PUp, up)
		gauge(descLSP2PPeers, float64(accepted), "true")
		gauge(descLSP2PPeers, float64(len(st.Peers)-accepted), "false")
		counter(descLSP2PPulls, st.PullsServed, "served")
		counter(descLSP2PPulls, st.PullsMade, "made")
		counter(descLSP2PDocs, st.DocumentsIn, "in")
		counter(descLSP2PDocs, st.DocumentsOut, "out")
		counter(descLSP2PJoinErrors, st.JoinErrors)
		gauge(descLSP2PHunt, float64(len(rm.huntSources())))
	}
}
