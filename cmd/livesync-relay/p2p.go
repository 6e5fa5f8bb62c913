package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/adapters/p2p/discovery"
	"github.com/livesync-go/livesync-go/adapters/p2p/nostrrelay"
	"github.com/livesync-go/livesync-go/engine"
)

// p2pRuntime is the relay's peer-to-peer side: one libp2p host (one peer
// id for the relay) serving every configured group, and the Nostr relay
// at /_nostr. The relay is an always-on peer: it serves its databases
// (the remote, encrypted form, without needing the passphrase) to the
// approved peers of each group, which push to it and pull from it; it
// starts no sync of its own.
type p2pRuntime struct {
	log    *slog.Logger
	nostr  *nostrrelay.Relay // nil when [nostr] is off
	host   host.Host         // nil without groups
	mux    *streamMux
	groups []*p2pGroup
}

// p2pGroup is one [[databases.p2p]] group of the relay.
type p2pGroup struct {
	db, name string
	book     *p2p.PeerBook
	cfg      p2p.GroupConfig // Host, Room, Serve, Book set; NostrRelays resolved at join

	mu   sync.Mutex
	g    *p2p.Group // nil until joined, and after close
	hunt *p2pHunt   // its peers in the database's hunt (p2p_hunt.go); nil until joined
}

func (g *p2pGroup) group() *p2p.Group {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.g
}

// startP2P builds the Nostr relay and, with groups, the host, the peer
// books (the configured approvals merged in) and the groups' rooms. The
// groups join once the HTTP server serves (joinP2P), since they may
// announce on the relay's own /_nostr.
func (r *relay) startP2P(ctx context.Context, cleanup *[]func()) error {
	s := r.s.p2p
	rt := &p2pRuntime{log: r.log.With("component", "p2p")}
	r.p2p = rt
	if s.nostr {
		nc := s.nostrLimits
		nc.Logger = r.log.With("component", "nostr")
		rt.nostr = nostrrelay.New(nc)
		n := rt.nostr
		*cleanup = append(*cleanup, func() { n.Close() })
	}
	if len(s.groups) == 0 {
		return nil
	}
	idPath := s.identityPath
	if idPath == "" {
		idPath = filepath.Join(r.s.dataDir, p2p.IdentityFileName)
	}
	// Only peers approved in one of the groups may hold a slot of the
	// circuit relay (its relayed connections are unlimited); ready
	// says the groups are in place.
	var ready atomic.Bool
	mayReserve := func(id peer.ID) bool { return ready.Load() && rt.approvedElsewhere(nil, id) != "" }
	h, err := p2p.NewHost(ctx, p2p.Config{ListenAddrs: s.listen, IdentityPath: idPath,
		RelayService: s.circuitRelay, RelayLimits: p2p.RelayLimits{MayReserve: mayReserve}, AnnounceAddrs: s.announceAddrs})
	if err != nil {
		return fmt.Errorf("peer-to-peer: %w (another process on the [p2p] listen ports? change listen in [p2p])", err)
	}
	*cleanup = append(*cleanup, func() { h.Close() })
	rt.host = h
	rt.mux = newStreamMux(h, rt.route)
	for i, gs := range s.groups {
		g, err := r.newP2PGroup(ctx, gs, i)
		if err != nil {
			return fmt.Errorf("database %q: p2p group %q: %w", gs.db, gs.group, err)
		}
		rt.groups = append(rt.groups, g)
	}
	ready.Store(true)
	rt.log.Info("peer-to-peer host started", "peer_id", h.ID().String(), "addrs", strings.Join(p2p.Addrs(h), " "), "groups", len(rt.groups))
	return nil
}

// newP2PGroup prepares group gs (index i of the host's stream routing):
// its book, with the configured approvals merged in, and its room.
func (r *relay) newP2PGroup(ctx context.Context, gs p2pGroupSpec, i int) (*p2pGroup, error) {
	held, err := r.dbs.OpenHeld(ctx, gs.db)
	if err != nil {
		return nil, err
	}
	path := bookPath(r.s.dataDir, gs.db, gs.group)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("peer book folder: %w", err)
	}
	book, err := p2p.OpenPeerBook(path)
	if err != nil {
		return nil, err
	}
	for _, a := range gs.approved {
		if err := book.Approve(a.id, a.device); err != nil {
			return nil, fmt.Errorf("approving %s from the configuration: %w", a.id, err)
		}
	}
	room, err := discovery.NewRoom(gs.group, gs.passphrase)
	if err != nil {
		return nil, err
	}
	// Peers' pushes go through the same hold-back as HTTP clients', the
	// group's peers counted as one user of the per-user limits.
	st := held.Served
	log := r.log.With("component", "p2p", "db", gs.db, "group", gs.group)
	ep := ownedEndpoint{Endpoint: st, user: p2pUserPrefix + gs.group}
	return &p2pGroup{db: gs.db, name: gs.group, book: book, cfg: p2p.GroupConfig{
		Name: gs.group, Room: room, Host: r.p2p.mux.forGroup(i), Device: gs.device, Book: book,
		Serve:  &p2p.Served{Endpoint: ep, Chunks: p2p.DocChunks(st), Records: p2p.StoreRecords(st, "")},
		Logger: log,
	}}, nil
}

// p2pUserPrefix names the user a group's pushes are held for
// ("p2p:GROUP" in /status held_by_user): the hold-back's per-user limits
// bound what the group's peers hold together.
const p2pUserPrefix = "p2p:"

// ownedEndpoint writes documents as user.
type ownedEndpoint struct {
	engine.Endpoint
	user string
}

func (e ownedEndpoint) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	return e.Endpoint.BulkDocs(couchapi.WithUser(ctx, e.user), docs)
}

// joinP2P joins every group, announcing on its Nostr relays ("self"
// being this relay's /_nostr).
func (r *relay) joinP2P(ctx context.Context) error {
	self := selfNostrURL(r.ln.Addr(), r.s.tlsOn())
	for i, gs := range r.s.p2p.groups {
		g := r.p2p.groups[i]
		cfg := g.cfg
		cfg.NostrRelays = nil
		for _, u := range gs.relays {
			if u == selfNostr {
				u = self
			}
			cfg.NostrRelays = append(cfg.NostrRelays, u)
		}
		joined, err := p2p.JoinGroup(ctx, cfg)
		if err != nil {
			return fmt.Errorf("database %q: joining p2p group %q: %w", g.db, g.name, err)
		}
		ph := r.startP2PHunt(ctx, g, joined)
		g.mu.Lock()
		g.g, g.hunt = joined, ph
		g.mu.Unlock()
		r.log.Info("joined p2p group", "db", g.db, "group", g.name, "nostr_relays", strings.Join(cfg.NostrRelays, " "),
			"approved", len(g.book.Approved()))
	}
	return nil
}

// selfNostrURL is the URL of the relay's own /_nostr for its groups: the
// listener's address, a loopback one when it listens on every interface.
func selfNostrURL(a net.Addr, tls bool) string {
	host, port := "127.0.0.1", ""
	if ta, ok := a.(*net.TCPAddr); ok {
		port = fmt.Sprint(ta.Port)
		if !ta.IP.IsUnspecified() {
			host = ta.IP.String()
		} else if ta.IP.To4() == nil {
			host = "::1"
		}
	}
	scheme := "ws"
	if tls {
		scheme = "wss"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + nostrPath
}

// close leaves every group (no peer is served afterwards), then closes
// the host and the Nostr relay.
func (rt *p2pRuntime) close() error {
	if rt == nil {
		return nil
	}
	var errs []error
	for _, g := range rt.groups {
		g.mu.Lock()
		joined, ph := g.g, g.hunt
		g.g, g.hunt = nil, nil
		g.mu.Unlock()
		ph.stop()
		if joined != nil {
			if err := joined.Close(); err != nil {
				errs = append(errs, fmt.Errorf("leaving p2p group %q of %q: %w", g.name, g.db, err))
			}
		}
	}
	if rt.host != nil {
		if err := rt.host.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the p2p host: %w", err))
		}
	}
	if rt.nostr != nil {
		rt.nostr.Close()
	}
	return errors.Join(errs...)
}

// find returns the group of database db named name.
func (rt *p2pRuntime) find(db, name string) *p2pGroup {
	if rt == nil {
		return nil
	}
	for _, g := range rt.groups {
		if g.db == db && g.name == name {
			return g
		}
	}
	return nil
}

// route picks the group whose handlers serve a stream from id: the
// group that approved it (a peer is approved in one group), else the
// one that noted it pending (its handlers refuse it and note it again),
// else the first.
func (rt *p2pRuntime) route(id peer.ID) int {
	for i, g := range rt.groups {
		if _, ok := g.book.Allow().Device(id); ok {
			return i
		}
	}
	for i, g := range rt.groups {
		for _, e := range g.book.Pending() {
			if e.ID == id {
				return i
			}
		}
	}
	return 0
}

// approvedElsewhere names the group other than g (nil: any group) that
// approved id.
func (rt *p2pRuntime) approvedElsewhere(g *p2pGroup, id peer.ID) string {
	for _, o := range rt.groups {
		if o == g {
			continue
		}
		if _, ok := o.book.Allow().Device(id); ok {
			return o.db + "/" + o.name
		}
	}
	return ""
}

// streamMux shares one host between groups: each group registers its
// protocol handlers on its own view of the host (forGroup), and the
// host's handler hands each stream to the group route picks.
type streamMux struct {
	host.Host
	route func(peer.ID) int

	mu       sync.Mutex
	handlers map[protocol.ID]map[int]network.StreamHandler
}

func newStreamMux(h host.Host, route func(peer.ID) int) *streamMux {
	return &streamMux{Host: h, route: route, handlers: map[protocol.ID]map[int]network.StreamHandler{}}
}

// forGroup is the host as group i sees it.
func (m *streamMux) forGroup(i int) host.Host { return &groupHost{Host: m.Host, mux: m, idx: i} }

func (m *streamMux) set(pid protocol.ID, idx int, h network.StreamHandler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	hs, ok := m.handlers[pid]
	if !ok {
		hs = map[int]network.StreamHandler{}
		m.handlers[pid] = hs
		m.Host.SetStreamHandler(pid, func(s network.Stream) { m.dispatch(pid, s) })
	}
	hs[idx] = h
}

func (m *streamMux) remove(pid protocol.ID, idx int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	hs := m.handlers[pid]
	delete(hs, idx)
	if len(hs) == 0 && hs != nil {
		delete(m.handlers, pid)
		m.Host.RemoveStreamHandler(pid)
	}
}

// dispatch serves s with the handler of the group route picks, or of the
// first group with one (which refuses a peer it has not approved).
func (m *streamMux) dispatch(pid protocol.ID, s network.Stream) {
	idx := m.route(s.Conn().RemotePeer())
	m.mu.Lock()
	hs := m.handlers[pid]
	h := hs[idx]
	if h == nil {
		first := -1
		for i, fh := range hs {
			if first < 0 || i < first {
				first, h = i, fh
			}
		}
	}
	m.mu.Unlock()
	if h == nil {
		s.Reset()
		return
	}
	h(s)
}

// groupHost is one group's view of the shared host: its protocol
// handlers go to the mux.
type groupHost struct {
	host.Host
	mux *streamMux
	idx int
}

func (g *groupHost) SetStreamHandler(pid protocol.ID, h network.StreamHandler) {
	g.mux.set(pid, g.idx, h)
}

func (g *groupHost) SetStreamHandlerMatch(pid protocol.ID, _ func(protocol.ID) bool, h network.StreamHandler) {
	g.mux.set(pid, g.idx, h)
}

func (g *groupHost) RemoveStreamHandler(pid protocol.ID) { g.mux.remove(pid, g.idx) }

// p2pBanner adds the peer-to-peer lines to the start banner: the Nostr
// endpoint, the relay's peer id (what devices approve) and its groups.
func (r *relay) p2pBanner(p func(string, ...any)) {
	rt := r.p2p
	if rt == nil {
		return
	}
	if rt.nostr != nil {
		p("Nostr:    %s%s%s (peer discovery)", "ws", strings.TrimPrefix(r.url, "http"), nostrPath)
	}
	if rt.host == nil {
		return
	}
	p("Peer to peer: peer id %s (devices approve it: livesync p2p approve <id>)", rt.host.ID())
	for _, g := range rt.groups {
		p("    database %s, group %s: %d approved peer(s); approve more: PUT %s/_p2p/%s/%s/peers/<peer id>",
			g.db, g.name, len(g.book.Approved()), r.url, g.db, g.name)
	}
}
