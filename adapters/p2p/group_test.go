//go:build !js

package p2p

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/livesync-go/livesync-go/adapters/p2p/discovery"
)

// memRoom carries announcements in memory, like a relay that keeps the
// newest announcement per peer, so that group schedules run under
// testing/synctest (real sockets would keep the bubble's clock still).
type memRoom struct {
	mu         sync.Mutex
	latest     map[string]discovery.Announcement
	subs       map[*memSub]struct{}
	published  map[string][]time.Time // by peer id
	subscribed int
	down       bool
}

type memSub struct {
	mu      sync.Mutex
	queue   []discovery.Announcement
	notify  chan struct{}
	dropped chan struct{}
}

func newMemRoom() *memRoom {
	return &memRoom{latest: map[string]discovery.Announcement{}, subs: map[*memSub]struct{}{}, published: map[string][]time.Time{}}
}

var errRoomDown = errors.New("memRoom: down")

func (r *memRoom) publish(_ context.Context, _ []string, _ *discovery.Room, _ string, a discovery.Announcement, now time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return errRoomDown
	}
	r.latest[a.PeerID] = a
	r.published[a.PeerID] = append(r.published[a.PeerID], now)
	for s := range r.subs {
		s.add(a)
	}
	return nil
}

func (r *memRoom) subscribe(ctx context.Context, _ string, _ *discovery.Room, now func() time.Time) (<-chan discovery.Discovered, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return nil, errRoomDown
	}
	r.subscribed++
	s := &memSub{notify: make(chan struct{}, 1), dropped: make(chan struct{})}
	for _, a := range r.latest {
		if a.Expires.After(now()) {
			s.add(a)
		}
	}
	r.subs[s] = struct{}{}
	out := make(chan discovery.Discovered)
	go func() {
		defer close(out)
		defer func() {
			r.mu.Lock()
			delete(r.subs, s)
			r.mu.Unlock()
		}()
		for {
			s.mu.Lock()
			q := s.queue
			s.queue = nil
			s.mu.Unlock()
			for _, a := range q {
				select {
				case out <- discovery.Discovered{Announcement: a, Relay: "mem"}:
				case <-ctx.Done():
					return
				case <-s.dropped:
					return
				}
			}
			select {
			case <-s.notify:
			case <-ctx.Done():
				return
			case <-s.dropped:
				return
			}
		}
	}()
	return out, nil
}

func (s *memSub) add(a discovery.Announcement) {
	s.mu.Lock()
	s.queue = append(s.queue, a)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// drop ends every subscription, as a relay that went away.
func (r *memRoom) drop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for s := range r.subs {
		close(s.dropped)
		delete(r.subs, s)
	}
}

func (r *memRoom) publishedBy(id peer.ID) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.published[id.String()])
}

// eventLog records a group's events.
type eventLog struct {
	mu  sync.Mutex
	evs []PeerEvent
}

func (l *eventLog) add(e PeerEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, e)
}

// of lists the kinds of the events about id, in order.
func (l *eventLog) of(id peer.ID) []PeerEventKind {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []PeerEventKind
	for _, e := range l.evs {
		if e.Peer.ID == id {
			out = append(out, e.Kind)
		}
	}
	return out
}

func kinds(k ...PeerEventKind) []PeerEventKind { return k }

// testRoom is derived once (deliberately slow key derivation), when a
// test first needs it.
var testRoom = sync.OnceValue(func() *discovery.Room {
	r, err := discovery.NewRoom("test group", "test passphrase")
	if err != nil {
		panic(err)
	}
	return r
})

const testInterval = 10 * time.Second

// gatedRoom is a memRoom whose subscriptions wait until open is closed.
type gatedRoom struct {
	*memRoom
	open chan struct{}
}

func (r gatedRoom) subscribe(ctx context.Context, relay string, room *discovery.Room, now func() time.Time) (<-chan discovery.Discovered, error) {
	select {
	case <-r.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return r.memRoom.subscribe(ctx, relay, room, now)
}

// joinMem joins a group whose announcements travel through room; the
// group hears the room only once the event log watches it.
func joinMem(t *testing.T, h host.Host, book *PeerBook, room *memRoom, device string) (*Group, *eventLog) {
	t.Helper()
	gate := gatedRoom{memRoom: room, open: make(chan struct{})}
	g, err := JoinGroup(t.Context(), GroupConfig{Name: "test group", Room: testRoom(), Host: h, NostrRelays: []string{"mem://"},
		Device: device, Book: book, AnnounceInterval: testInterval, transport: gate})
	if err != nil {
		t.Fatal(err)
	}
	log := &eventLog{}
	g.Watch(log.add)
	close(gate.open)
	return g, log
}

// Announcements every interval, valid three intervals; an approved peer
// is found once while it keeps announcing, lost once its announcement
// expires, and found again when it comes back; an unapproved announcer is
// pending, and noted in the book.
func TestGroupFindsAndLosesPeers(t *testing.T) {
	ha, hb := newTestHost(t), newTestHost(t)
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		room := newMemRoom()
		bookA := openBook(t, filepath.Join(dir, "a.json"))
		if err := bookA.Approve(hb.ID(), "b"); err != nil {
			t.Fatal(err)
		}
		bookB := openBook(t, filepath.Join(dir, "b.json"))
		start := time.Now()
		ga, logA := joinMem(t, ha, bookA, room, "device A")
		gb, logB := joinMem(t, hb, bookB, room, "device\x1b B")
		synctest.Wait()
		if got := logA.of(hb.ID()); !slices.Equal(got, kinds(PeerFound)) {
			t.Fatalf("A's events about B = %v, want [found]", got)
		}
		if got := logB.of(ha.ID()); !slices.Equal(got, kinds(PeerPending)) {
			t.Fatalf("B's events about A = %v, want [pending]", got)
		}
		if p := bookB.Pending(); len(p) != 1 || p[0].ID != ha.ID() || p[0].Device != "device A" {
			t.Fatalf("B's pending peers = %+v, want A with its device name", p)
		}

		time.Sleep(35 * time.Second)
		synctest.Wait()
		want := []time.Time{start, start.Add(10 * time.Second), start.Add(20 * time.Second), start.Add(30 * time.Second)}
		if got := room.publishedBy(hb.ID()); !slices.Equal(got, want) {
			t.Errorf("B announced at %v, want every interval from the start", got)
		}
		if got := logA.of(hb.ID()); !slices.Equal(got, kinds(PeerFound)) {
			t.Fatalf("A's events about B after re-announcements = %v, want one found", got)
		}
		peers := ga.Peers()
		if len(peers) != 1 || peers[0].ID != hb.ID() || !peers[0].Approved || !peers[0].Present || peers[0].Device != "b" {
			t.Fatalf("A's peers = %+v; want B, approved and present, under its approved name", peers)
		}
		if a := room.latest[hb.ID().String()]; a.DeviceName != "device B" || !a.Expires.Equal(start.Add(60*time.Second)) {
			t.Errorf("B's announcement: device %q, expires %v; want the sanitised name and three intervals", a.DeviceName, a.Expires.Sub(start))
		}

		// B's last announcement (at 30 s) expires at 60 s.
		gb.Close()
		time.Sleep(59*time.Second - time.Since(start))
		synctest.Wait()
		if got := logA.of(hb.ID()); !slices.Equal(got, kinds(PeerFound)) {
			t.Fatalf("lost early: %v", got)
		}
		time.Sleep(BookPollInterval)
		synctest.Wait()
		if got := logA.of(hb.ID()); !slices.Equal(got, kinds(PeerFound, PeerLost)) {
			t.Fatalf("A's events about B after B left = %v, want found, lost", got)
		}
		if p := ga.Peers(); len(p) != 1 || p[0].Present {
			t.Errorf("A's peers after B left = %+v, want B approved but not present", p)
		}

		gb2, _ := joinMem(t, hb, bookB, room, "device B")
		synctest.Wait()
		if got := logA.of(hb.ID()); !slices.Equal(got, kinds(PeerFound, PeerLost, PeerFound)) {
			t.Fatalf("A's events about B after B came back = %v, want found, lost, found", got)
		}
		gb2.Close()
		ga.Close()
	})
}

// Another process revokes and approves in the book's file; the running
// group follows within BookPollInterval. A revocation in this process is
// immediate.
func TestGroupFollowsTheBookFile(t *testing.T) {
	ha, hb := newTestHost(t), newTestHost(t)
	path := filepath.Join(t.TempDir(), PeerBookFileName)
	synctest.Test(t, func(t *testing.T) {
		room := newMemRoom()
		bookA := openBook(t, path)
		if err := bookA.Approve(hb.ID(), "b"); err != nil {
			t.Fatal(err)
		}
		ga, logA := joinMem(t, ha, bookA, room, "A")
		gb, _ := joinMem(t, hb, openBook(t, ""), room, "B")
		synctest.Wait()
		if ga.Remote(hb.ID()) == nil {
			t.Fatal("no Remote for an approved peer")
		}

		cli := openBook(t, path)
		if err := cli.Revoke(hb.ID()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(BookPollInterval)
		synctest.Wait()
		if got := logA.of(hb.ID()); !slices.Equal(got, kinds(PeerFound, PeerRevoked)) {
			t.Fatalf("after another process revoked B: %v, want found, revoked", got)
		}
		if ga.Remote(hb.ID()) != nil {
			t.Error("a Remote for a revoked peer")
		}
		if err := cli.Approve(hb.ID(), "b again"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(BookPollInterval)
		synctest.Wait()
		if got := logA.of(hb.ID()); !slices.Equal(got, kinds(PeerFound, PeerRevoked, PeerApproved, PeerFound)) {
			t.Fatalf("after another process approved B again: %v, want ... approved, found", got)
		}
		if err := bookA.Revoke(hb.ID()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := logA.of(hb.ID()); got[len(got)-1] != PeerRevoked {
			t.Fatalf("after revoking in this process: %v, want revoked at once", got)
		}
		gb.Close()
		ga.Close()
	})
}

// A relay that drops the subscription is subscribed to again, after a
// pause that grows while subscribing fails.
func TestGroupResubscribes(t *testing.T) {
	ha, hb := newTestHost(t), newTestHost(t)
	synctest.Test(t, func(t *testing.T) {
		room := newMemRoom()
		bookA := openBook(t, "")
		if err := bookA.Approve(hb.ID(), "b"); err != nil {
			t.Fatal(err)
		}
		ga, logA := joinMem(t, ha, bookA, room, "A")
		synctest.Wait()
		room.mu.Lock()
		room.down = true
		room.mu.Unlock()
		room.drop()
		synctest.Wait()
		// Tries at 1 s, then 2 s and 4 s later: three failed tries by 7 s.
		time.Sleep(7*time.Second + time.Millisecond)
		synctest.Wait()
		room.mu.Lock()
		if room.subscribed != 1 {
			t.Errorf("%d successful subscriptions while down", room.subscribed)
		}
		room.down = false
		room.mu.Unlock()
		// The next try, 8 s after the last, succeeds.
		time.Sleep(8 * time.Second)
		synctest.Wait()
		room.mu.Lock()
		n := room.subscribed
		room.mu.Unlock()
		if n != 2 {
			t.Fatalf("%d subscriptions, want a second one after the relay came back", n)
		}
		gb, _ := joinMem(t, hb, openBook(t, ""), room, "B")
		synctest.Wait()
		if got := logA.of(hb.ID()); !slices.Equal(got, kinds(PeerFound)) {
			t.Fatalf("after resubscribing: %v, want B found", got)
		}
		gb.Close()
		ga.Close()
	})
}

func TestGroupConfigValidate(t *testing.T) {
	h := newTestHost(t)
	book := openBook(t, "")
	ok := GroupConfig{Name: "g", Room: testRoom(), Host: h, Book: book, NostrRelays: []string{"ws://x"}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]GroupConfig{
		"no name":   {Room: testRoom(), Host: h, Book: book, NostrRelays: []string{"ws://x"}},
		"no room":   {Name: "g", Host: h, Book: book, NostrRelays: []string{"ws://x"}},
		"no host":   {Name: "g", Room: testRoom(), Book: book, NostrRelays: []string{"ws://x"}},
		"no book":   {Name: "g", Room: testRoom(), Host: h, NostrRelays: []string{"ws://x"}},
		"no relays": {Name: "g", Room: testRoom(), Host: h, Book: book},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: valid", name)
		}
		if _, err := JoinGroup(t.Context(), c); err == nil {
			t.Errorf("%s: JoinGroup succeeded", name)
		}
	}
}

// A stranger that knocks (asks to be served without approval) is refused,
// noted pending in the book and reported once, however often it knocks.
func TestGroupNotesKnockers(t *testing.T) {
	server, stranger := newTestHost(t), newTestHost(t)
	st := memStore(t)
	book := openBook(t, filepath.Join(t.TempDir(), PeerBookFileName))
	g, err := JoinGroup(t.Context(), GroupConfig{Name: "test group", Room: testRoom(), Host: server, NostrRelays: []string{"mem://"},
		Book: book, Serve: &Served{Endpoint: st, Chunks: st, Records: StoreRecords(st, "")}, transport: newMemRoom()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	log := &eventLog{}
	defer g.Watch(log.add)()
	r := NewRemote(stranger, addrInfo(server), RemoteOptions{Group: "test group", Timeout: 10 * time.Second})
	for range 3 {
		if _, err := r.Endpoint().Info(t.Context()); !errors.Is(err, ErrRefused) {
			t.Fatalf("a stranger's request: %v, want ErrRefused", err)
		}
	}
	// The refusal is answered before the stranger is noted.
	waitFor(t, 5*time.Second, "the stranger noted pending", func() bool {
		p := book.Pending()
		return len(p) == 1 && p[0].ID == stranger.ID()
	})
	waitFor(t, 5*time.Second, "the pending event", func() bool { return len(log.of(stranger.ID())) > 0 })
	g.Close() // delivers nothing more
	if got := log.of(stranger.ID()); !slices.Equal(got, kinds(PeerPending)) {
		t.Errorf("events about the stranger = %v, want one pending", got)
	}
}

// A host whose addresses change announces them at once, not an interval
// later.
func TestGroupAnnouncesNewAddresses(t *testing.T) {
	h := newTestHost(t)
	room := newMemRoom()
	g, err := JoinGroup(t.Context(), GroupConfig{Name: "test group", Room: testRoom(), Host: h, NostrRelays: []string{"mem://"},
		Book: openBook(t, ""), AnnounceInterval: time.Hour, transport: room})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	waitFor(t, 5*time.Second, "the first announcement", func() bool { return len(room.publishedBy(h.ID())) == 1 })
	before := len(h.Addrs())
	if err := h.Network().Listen(ma.StringCast("/ip4/127.0.0.1/tcp/0")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "an announcement of the new address", func() bool {
		room.mu.Lock()
		defer room.mu.Unlock()
		return len(room.latest[h.ID().String()].Addrs) > before
	})
}
