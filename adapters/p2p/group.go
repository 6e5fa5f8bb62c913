//go:build !js

package p2p

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p/discovery"
)

// Timing of a group.
const (
	// DefaultAnnounceInterval is how often a peer re-announces itself
	// when GroupConfig.AnnounceInterval is zero.
	DefaultAnnounceInterval = 30 * time.Second
	// AnnounceExpiry is how many announce intervals an announcement
	// stays valid: a peer is lost after missing about three.
	AnnounceExpiry = 3
	// BookPollInterval is how often a group looks for changes another
	// process made to the peer book (and for expired announcements).
	BookPollInterval = 2 * time.Second
	// maxResubscribe bounds the pause before subscribing to a relay again
	// after it dropped the subscription or could not be reached.
	maxResubscribe = time.Minute
	// maxPeerTable bounds the peers a group tracks from announcements.
	maxPeerTable = 1024
)

// GroupConfig configures JoinGroup.
type GroupConfig struct {
	Name        string          // the group id (never sent in clear)
	Room        *discovery.Room // discovery.NewRoom(Name, group passphrase)
	Host        host.Host
	NostrRelays []string // ws:// or wss:// URLs
	Device      string   // this device's name in announcements
	Book        *PeerBook
	Serve       *Served // nil: serve nothing
	// AnnounceInterval is how often this peer re-announces; zero: 30 s.
	// Announcements expire after three intervals.
	AnnounceInterval time.Duration
	Logger           *slog.Logger // nil discards
	Now              func() time.Time

	transport roomTransport // nil: Nostr (tests carry announcements in memory)
}

// roomTransport carries the room's announcements.
type roomTransport interface {
	publish(ctx context.Context, relays []string, room *discovery.Room, key string, a discovery.Announcement, now time.Time) error
	subscribe(ctx context.Context, relay string, room *discovery.Room, now func() time.Time) (<-chan discovery.Discovered, error)
}

// nostrTransport carries announcements through Nostr relays.
type nostrTransport struct{}

func (nostrTransport) publish(ctx context.Context, relays []string, room *discovery.Room, key string, a discovery.Announcement, now time.Time) error {
	_, err := discovery.Publish(ctx, relays, room, key, a, now)
	return err
}

func (nostrTransport) subscribe(ctx context.Context, relay string, room *discovery.Room, now func() time.Time) (<-chan discovery.Discovered, error) {
	return discovery.Subscribe(ctx, []string{relay}, room, now)
}

// Validate reports a missing required field.
func (c GroupConfig) Validate() error {
	switch {
	case c.Name == "":
		return errors.New("p2p: group: no group name")
	case c.Room == nil:
		return errors.New("p2p: group: no discovery room (derive it from the group name and the group passphrase)")
	case c.Host == nil:
		return errors.New("p2p: group: no host")
	case c.Book == nil:
		return errors.New("p2p: group: no peer book")
	case len(c.NostrRelays) == 0:
		return errors.New("p2p: group: no Nostr relay to find peers through")
	case c.AnnounceInterval < 0:
		return errors.New("p2p: group: negative announce interval")
	}
	return nil
}

// PeerStatus is one peer as the group sees it.
type PeerStatus struct {
	PeerEntry
	Approved  bool
	Connected bool
	// Present: the peer's announcement is current (it was found and has
	// not been lost since).
	Present  bool
	Counters PeerCounters
}

// PeerEventKind says what happened to a peer.
type PeerEventKind int

const (
	PeerFound    PeerEventKind = iota + 1 // an announcement of an approved peer
	PeerLost                              // its announcements expired
	PeerPending                           // an unapproved peer announced or knocked
	PeerApproved                          // the book approved it
	PeerRevoked                           // the book revoked it; its streams were closed
)

// String names the kind.
func (k PeerEventKind) String() string {
	switch k {
	case PeerFound:
		return "found"
	case PeerLost:
		return "lost"
	case PeerPending:
		return "pending"
	case PeerApproved:
		return "approved"
	case PeerRevoked:
		return "revoked"
	}
	return "PeerEventKind(?)"
}

// PeerEvent is one change in the group.
type PeerEvent struct {
	Kind PeerEventKind
	Peer PeerStatus
}

// Group is this peer's membership of one sync group: it serves the
// group's vault to approved peers, announces this peer in the group's
// discovery room, keeps a table of the peers it hears of and reports
// their comings and goings as PeerEvents. Safe for concurrent use.
type Group struct {
	cfg      GroupConfig
	h        host.Host
	book     *PeerBook
	meter    *Meter
	log      *slog.Logger
	now      func() time.Time
	interval time.Duration
	nostrKey string

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	stopServe func()
	unwatch   func()
	closeOnce sync.Once

	strangers newcomers // new unapproved announcers in the table

	mu       sync.Mutex
	closed   bool
	peers    map[peer.ID]*seenPeer
	remotes  map[peer.ID]*Remote
	watchers map[*groupWatcher]struct{}
}

// seenPeer is one announcer in the table.
type seenPeer struct {
	entry   PeerEntry // Since: first seen; Device: as announced
	expires time.Time
	present bool // announced and not expired
}

// JoinGroup serves cfg.Serve to approved peers, announces this peer and
// watches the room until Close (or until ctx ends; Close is still
// needed). Changes another process makes to the peer book are picked up
// every BookPollInterval; a revoked peer's connections (and so its
// streams) are closed at once.
func JoinGroup(ctx context.Context, cfg GroupConfig) (*Group, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g := &Group{cfg: cfg, h: cfg.Host, book: cfg.Book, meter: NewMeter(), log: cfg.Logger, now: cfg.Now,
		interval: cfg.AnnounceInterval, nostrKey: discovery.NewNostrKey(),
		peers: map[peer.ID]*seenPeer{}, remotes: map[peer.ID]*Remote{}, watchers: map[*groupWatcher]struct{}{}}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.now == nil {
		g.now = time.Now
	}
	if g.interval == 0 {
		g.interval = DefaultAnnounceInterval
	}
	if g.cfg.transport == nil {
		g.cfg.transport = nostrTransport{}
	}
	g.ctx, g.cancel = context.WithCancel(ctx)
	g.unwatch = g.book.Allow().Watch(g.onAllow)
	if cfg.Serve != nil {
		g.stopServe = Serve(g.h, ServeConfig{DB: *cfg.Serve, Allow: g.book.Allow(), OnRefused: g.onRefused,
			Meter: g.meter, Logger: g.log})
	}
	g.wg.Go(g.announceLoop)
	for _, url := range cfg.NostrRelays {
		g.wg.Go(func() { g.watchRelay(url) })
	}
	g.wg.Go(g.pollLoop)
	return g, nil
}

// Name is the group's name.
func (g *Group) Name() string { return g.cfg.Name }

// Host is the group's host.
func (g *Group) Host() host.Host { return g.h }

// Book is the group's peer book.
func (g *Group) Book() *PeerBook { return g.book }

// Meter counts what each peer exchanged with this host, served and
// fetched.
func (g *Group) Meter() *Meter { return g.meter }

// Close stops serving, announcing and watching, ends every Watch and
// waits for all of the group's goroutines (so it must not be called from
// a Watch function). It does not close the host.
func (g *Group) Close() error {
	g.closeOnce.Do(func() {
		g.cancel()
		if g.stopServe != nil {
			g.stopServe()
		}
		g.unwatch()
		g.mu.Lock()
		g.closed = true
		ws := g.watchers
		g.watchers = map[*groupWatcher]struct{}{}
		rs := g.remotes
		g.remotes = map[peer.ID]*Remote{}
		g.mu.Unlock()
		for w := range ws {
			w.stop()
		}
		g.wg.Wait()
		for _, r := range rs {
			_ = r.Close()
		}
	})
	return nil
}

// Peers lists the peers the group knows: every approved peer of the book
// and every peer whose announcement it heard, by peer id.
func (g *Group) Peers() []PeerStatus {
	g.mu.Lock()
	ids := make([]peer.ID, 0, len(g.peers))
	for id := range g.peers {
		ids = append(ids, id)
	}
	g.mu.Unlock()
	for _, e := range g.book.Approved() {
		ids = append(ids, e.ID)
	}
	slices.SortFunc(ids, func(a, b peer.ID) int { return strings.Compare(string(a), string(b)) })
	ids = slices.Compact(ids)
	counters := g.meter.Snapshot()
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]PeerStatus, 0, len(ids))
	for _, id := range ids {
		out = append(out, g.statusLocked(id, counters))
	}
	return out
}

// Remote returns the approved peer id as a vault.Remote (cached: the same
// Remote until the peer is revoked), reached at the addresses it
// announced; nil when id is not approved or the group is closed.
func (g *Group) Remote(id peer.ID) *Remote {
	g.mu.Lock()
	defer g.mu.Unlock()
	// Checked under g.mu: a revocation drops the cached Remote under it.
	if _, ok := g.book.Allow().Device(id); !ok || g.closed {
		return nil
	}
	if r := g.remotes[id]; r != nil {
		return r
	}
	info := peer.AddrInfo{ID: id}
	if p := g.peers[id]; p != nil {
		_, info = parseAddrs(id, p.entry.Addrs)
	}
	r := NewRemote(g.h, info, RemoteOptions{Group: g.cfg.Name, Meter: g.meter})
	g.remotes[id] = r
	return r
}

// statusLocked builds id's status from the table and the book.
func (g *Group) statusLocked(id peer.ID, counters map[peer.ID]PeerCounters) PeerStatus {
	s := PeerStatus{PeerEntry: PeerEntry{ID: id}}
	if p := g.peers[id]; p != nil {
		s.PeerEntry = cloneEntry(p.entry)
		s.Present = p.present
	}
	if e, approved, ok := g.book.Entry(id); ok {
		s.Approved = approved
		if e.Device != "" && (approved || s.Device == "") {
			s.Device = e.Device
		}
		if approved {
			s.Since = e.Since
		}
		if len(s.Addrs) == 0 {
			s.Addrs = e.Addrs
		}
		if e.LastSeen.After(s.LastSeen) {
			s.LastSeen = e.LastSeen
		}
	}
	s.Connected = g.h.Network().Connectedness(id) == network.Connected
	if counters != nil {
		s.Counters = counters[id]
	}
	return s
}

// announceLoop publishes this peer's announcement every interval, and
// at once when the host's addresses change (a relay reservation came
// through, a listener was added), checked every BookPollInterval.
func (g *Group) announceLoop() {
	t := time.NewTicker(g.interval)
	defer t.Stop()
	check := time.NewTicker(BookPollInterval)
	defer check.Stop()
	last := g.announce()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
			last = g.announce()
		case <-check.C:
			if !slices.Equal(announceAddrs(g.h), last) {
				last = g.announce()
				t.Reset(g.interval)
			}
		}
	}
}

// announce publishes the announcement once and returns the addresses it
// carried.
func (g *Group) announce() []string {
	now := g.now()
	ttl := min(AnnounceExpiry*g.interval, discovery.MaxTTL)
	addrs := announceAddrs(g.h)
	a := discovery.Announcement{PeerID: g.h.ID().String(), Addrs: addrs, DeviceName: truncDevice(g.cfg.Device),
		Expires: now.Add(ttl)}
	if err := g.sign(&a); err != nil {
		g.log.Warn("p2p: signing this peer's announcement failed", "err", err)
		return addrs
	}
	ctx, cancel := context.WithTimeout(g.ctx, min(g.interval, 20*time.Second))
	defer cancel()
	if err := g.cfg.transport.publish(ctx, g.cfg.NostrRelays, g.cfg.Room, g.nostrKey, a, now); err != nil && g.ctx.Err() == nil {
		g.log.Warn("p2p: announcing this peer failed", "err", err)
	}
	return addrs
}

// sign signs a with the host's key: only this peer can announce its id.
func (g *Group) sign(a *discovery.Announcement) error {
	key := g.h.Peerstore().PrivKey(g.h.ID())
	if key == nil {
		return errors.New("the host's private key is not in its peerstore")
	}
	sig, err := key.Sign(g.cfg.Room.SignedBytes(*a))
	a.Sig = sig
	return err
}

// signedBy reports whether a carries a valid signature of id's key: an
// announcement for an id from anyone but that peer (who knows the group
// passphrase, but not the peer's key) is ignored.
func (g *Group) signedBy(id peer.ID, a discovery.Announcement) bool {
	pub, err := id.ExtractPublicKey()
	if err != nil || len(a.Sig) == 0 {
		return false
	}
	ok, err := pub.Verify(g.cfg.Room.SignedBytes(a), a.Sig)
	return err == nil && ok
}

// announceAddrs are h's addresses with its peer id (circuit addresses
// included), as many as an announcement carries.
func announceAddrs(h host.Host) []string {
	var out []string
	for _, s := range Addrs(h) {
		if len(s) <= maxBookAddrLen && len(out) < discovery.MaxAddrs {
			out = append(out, s)
		}
	}
	return out
}

// truncDevice sanitises the device name and keeps it within what an
// announcement may carry.
func truncDevice(s string) string {
	s = SanitizeDevice(s)
	for len(s) > 128 {
		r := []rune(s)
		s = string(r[:len(r)-1])
	}
	return s
}

// watchRelay subscribes to the room on one relay, again after the relay
// drops the subscription, with a growing pause while it fails.
func (g *Group) watchRelay(url string) {
	pause := time.Second
	for g.ctx.Err() == nil {
		start := time.Now()
		ch, err := g.cfg.transport.subscribe(g.ctx, url, g.cfg.Room, g.now)
		if err != nil {
			g.log.Warn("p2p: subscribing to a Nostr relay failed", "relay", url, "err", err)
		} else {
			for d := range ch {
				g.seen(d.Announcement)
			}
		}
		if g.ctx.Err() != nil {
			return
		}
		if time.Since(start) > maxResubscribe {
			pause = time.Second
		}
		t := time.NewTimer(pause)
		select {
		case <-g.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, maxResubscribe)
	}
}

// parseAddrs keeps the announced addresses that name id, as strings and
// as the transports to dial.
func parseAddrs(id peer.ID, in []string) ([]string, peer.AddrInfo) {
	var strs []string
	dial := peer.AddrInfo{ID: id}
	for _, s := range in {
		info, err := peer.AddrInfoFromString(s)
		if err != nil || info.ID != id || len(info.Addrs) == 0 {
			continue
		}
		strs = append(strs, s)
		dial.Addrs = append(dial.Addrs, info.Addrs...)
	}
	return strs, dial
}

// seen takes one announcement into the table.
func (g *Group) seen(a discovery.Announcement) {
	id, err := peer.Decode(a.PeerID)
	if err != nil || id == g.h.ID() || !g.signedBy(id, a) {
		return
	}
	now := g.now()
	exp := a.Expires
	if exp.Sub(now) > discovery.MaxTTL {
		exp = now.Add(discovery.MaxTTL)
	}
	addrs, dial := parseAddrs(id, a.Addrs)
	device := SanitizeDevice(a.DeviceName)
	_, approved := g.book.Allow().Device(id)
	if approved && len(dial.Addrs) > 0 && exp.After(now) {
		g.h.Peerstore().AddAddrs(id, dial.Addrs, exp.Sub(now))
	}
	g.mu.Lock()
	p := g.peers[id]
	if g.closed || (p == nil && !approved && (len(g.peers) >= maxPeerTable || !g.strangers.take(now))) {
		g.mu.Unlock()
		return
	}
	if p == nil {
		p = &seenPeer{entry: PeerEntry{ID: id, Since: now}}
		g.peers[id] = p
	}
	p.entry.Device, p.entry.LastSeen = device, now
	if len(addrs) > 0 {
		p.entry.Addrs = addrs
	}
	if exp.After(p.expires) {
		p.expires = exp
	}
	if !p.present {
		p.present = true
		kind := PeerPending
		if approved {
			kind = PeerFound
		}
		g.emitLocked(kind, id)
	}
	g.mu.Unlock()
	if !approved {
		if err := g.book.NotePending(id, device, addrs, now); err != nil {
			g.log.Warn("p2p: recording a pending peer failed", "peer", id.String(), "err", err)
		}
	}
}

// onRefused notes a peer that asked to be served without approval.
func (g *Group) onRefused(id peer.ID) {
	var device string
	var addrs []string
	g.mu.Lock()
	if p := g.peers[id]; p != nil {
		device, addrs = p.entry.Device, slices.Clone(p.entry.Addrs)
	}
	g.mu.Unlock()
	added, err := g.book.notePending(id, device, addrs, g.now())
	if err != nil {
		g.log.Warn("p2p: recording a pending peer failed", "peer", id.String(), "err", err)
	}
	if added {
		g.mu.Lock()
		if !g.closed {
			g.emitLocked(PeerPending, id)
		}
		g.mu.Unlock()
	}
}

// onAllow follows the allow-list: a revoked peer loses its connections
// (and with them its streams) and its cached Remote.
func (g *Group) onAllow(id peer.ID, approved bool) {
	if !approved {
		_ = g.h.Network().ClosePeer(id)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	if approved {
		g.emitLocked(PeerApproved, id)
		if p := g.peers[id]; p != nil && p.present {
			g.emitLocked(PeerFound, id)
		}
		return
	}
	if r := g.remotes[id]; r != nil {
		delete(g.remotes, id)
		_ = r.Close()
	}
	g.emitLocked(PeerRevoked, id)
}

// pollLoop reloads the peer book when another process changed it and
// expires announcements.
func (g *Group) pollLoop() {
	t := time.NewTicker(BookPollInterval)
	defer t.Stop()
	var lastErr string
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
		if err := g.book.Reload(); err != nil {
			if err.Error() != lastErr {
				g.log.Warn("p2p: reloading the peer book failed; keeping the peers it had", "err", err)
			}
			lastErr = err.Error()
		} else {
			lastErr = ""
		}
		g.expire()
	}
}

// expire marks the peers whose announcement expired as lost and forgets
// announcers that are neither present nor approved.
func (g *Group) expire() {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, p := range g.peers {
		_, approved := g.book.Allow().Device(id)
		if p.present && !p.expires.After(now) {
			p.present = false
			if approved {
				g.emitLocked(PeerLost, id)
			}
		}
		if !p.present && !approved {
			delete(g.peers, id)
		}
	}
}

// groupWatcher delivers events to one Watch in order, from its own
// goroutine, so that a slow watcher delays no one else.
type groupWatcher struct {
	fn     func(PeerEvent)
	mu     sync.Mutex
	queue  []PeerEvent
	wake   chan struct{} // capacity 1
	done   chan struct{} // closed by stop
	exited chan struct{} // closed when the goroutine returns
	once   sync.Once
}

// Watch calls fn with every later event of the group, in order, from one
// goroutine (never two calls at once), until stop or Close. stop waits
// for a call in progress and must not be called from fn.
func (g *Group) Watch(fn func(PeerEvent)) (stop func()) {
	w := &groupWatcher{fn: fn, wake: make(chan struct{}, 1), done: make(chan struct{}), exited: make(chan struct{})}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return func() {}
	}
	g.watchers[w] = struct{}{}
	g.wg.Go(w.run)
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		delete(g.watchers, w)
		g.mu.Unlock()
		w.stop()
	}
}

func (w *groupWatcher) run() {
	defer close(w.exited)
	for {
		select {
		case <-w.done:
			return
		case <-w.wake:
		}
		for {
			w.mu.Lock()
			if len(w.queue) == 0 {
				w.mu.Unlock()
				break
			}
			e := w.queue[0]
			w.queue = w.queue[1:]
			w.mu.Unlock()
			select {
			case <-w.done:
				return
			default:
			}
			w.fn(e)
		}
	}
}

func (w *groupWatcher) push(e PeerEvent) {
	w.mu.Lock()
	w.queue = append(w.queue, e)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *groupWatcher) stop() {
	w.once.Do(func() { close(w.done) })
	<-w.exited
}

// emitLocked queues an event about id for every watcher (g.mu held, so
// that every watcher sees one peer's events in the order they happened).
func (g *Group) emitLocked(kind PeerEventKind, id peer.ID) {
	if len(g.watchers) == 0 {
		return
	}
	e := PeerEvent{Kind: kind, Peer: g.statusLocked(id, g.meter.Snapshot())}
	for w := range g.watchers {
		w.push(e)
	}
}
