//go:build !js

package p2p

import (
	"crypto/rand"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p/discovery"
)

// signed signs a with key for the test room.
func signed(t testing.TB, key crypto.PrivKey, a discovery.Announcement) discovery.Announcement {
	sig, err := key.Sign(testRoom().SignedBytes(a))
	if err != nil {
		t.Fatal(err)
	}
	a.Sig = sig
	return a
}

func newKeys(t testing.TB, n int) []crypto.PrivKey {
	keys := make([]crypto.PrivKey, n)
	for i := range keys {
		k, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	return keys
}

func newPeerIDs(t *testing.T, n int) []peer.ID {
	ids := make([]peer.ID, n)
	for i := range ids {
		ids[i] = newPeerID(t)
	}
	return ids
}

// Strangers knocking with a new peer id each time are written to the
// book at most newcomerBurst at once, then one per newcomerEvery.
func TestPeerBookBoundsNewcomers(t *testing.T) {
	b := openBook(t, filepath.Join(t.TempDir(), PeerBookFileName))
	at := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	for _, id := range newPeerIDs(t, 3*newcomerBurst) {
		if err := b.NotePending(id, "flood", nil, at); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(b.Pending()); n != newcomerBurst {
		t.Fatalf("%d pending after a flood at one instant, want %d", n, newcomerBurst)
	}
	at = at.Add(10 * newcomerEvery)
	for _, id := range newPeerIDs(t, 20) {
		if err := b.NotePending(id, "flood", nil, at); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(b.Pending()); n != newcomerBurst+10 {
		t.Fatalf("%d pending ten seconds later, want %d", n, newcomerBurst+10)
	}
}

// A room member announcing made-up peer ids by the thousand gets a
// bounded number of them into the group's table and its watchers'
// events; an approved peer's announcement still gets through.
func TestGroupBoundsStrangers(t *testing.T) {
	h, friend := newTestHost(t), newTestHost(t)
	fakes := newKeys(t, 4*newcomerBurst)
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		room := newMemRoom()
		book := openBook(t, filepath.Join(dir, "a.json"))
		if err := book.Approve(friend.ID(), "friend"); err != nil {
			t.Fatal(err)
		}
		g, log := joinMem(t, h, book, room, "device A")
		defer g.Close()
		now := time.Now()
		for _, key := range fakes {
			id, _ := peer.IDFromPrivateKey(key)
			a := signed(t, key, discovery.Announcement{PeerID: id.String(), DeviceName: "fake", Expires: now.Add(time.Minute)})
			if err := room.publish(t.Context(), nil, nil, "", a, now); err != nil {
				t.Fatal(err)
			}
		}
		a := signed(t, friend.Peerstore().PrivKey(friend.ID()), discovery.Announcement{PeerID: friend.ID().String(), DeviceName: "friend", Expires: now.Add(time.Minute)})
		if err := room.publish(t.Context(), nil, nil, "", a, now); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		pending := 0
		for _, key := range fakes {
			id, _ := peer.IDFromPrivateKey(key)
			pending += len(log.of(id))
		}
		if pending > newcomerBurst || len(g.Peers()) > newcomerBurst+1 || len(book.Pending()) > newcomerBurst {
			t.Fatalf("%d pending events, %d peers in the table, %d in the book; want at most %d strangers",
				pending, len(g.Peers()), len(book.Pending()), newcomerBurst)
		}
		if got := log.of(friend.ID()); len(got) != 1 || got[0] != PeerFound {
			t.Fatalf("the approved peer's events: %v; want found", got)
		}
	})
}

// Anyone who knows the group passphrase can seal an announcement, but
// only a peer can sign one for its id: an announcement of an approved
// peer's id that it did not sign (unsigned, signed by another key, or
// changed after signing) neither makes it present nor gives it
// addresses.
func TestGroupIgnoresForgedAnnouncements(t *testing.T) {
	ha, hb := newTestHost(t), newTestHost(t)
	other := newKeys(t, 1)[0]
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		room := newMemRoom()
		book := openBook(t, filepath.Join(dir, "a.json"))
		if err := book.Approve(hb.ID(), "b"); err != nil {
			t.Fatal(err)
		}
		ga, log := joinMem(t, ha, book, room, "device A")
		defer ga.Close()
		now := time.Now()
		evil := "/ip4/203.0.113.66/tcp/4001/p2p/" + hb.ID().String()
		base := discovery.Announcement{PeerID: hb.ID().String(), Addrs: []string{evil}, DeviceName: "evil", Expires: now.Add(time.Minute)}
		tampered := signed(t, hb.Peerstore().PrivKey(hb.ID()), discovery.Announcement{PeerID: hb.ID().String(), Expires: now.Add(time.Minute)})
		tampered.Addrs = []string{evil}
		for _, a := range []discovery.Announcement{base, signed(t, other, base), tampered} {
			if err := room.publish(t.Context(), nil, nil, "", a, now); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if got := log.of(hb.ID()); len(got) != 0 {
			t.Fatalf("forged announcements of B: events %v", got)
		}
		if p := ga.Peers(); len(p) != 1 || p[0].Present || len(p[0].Addrs) != 0 {
			t.Fatalf("B after forged announcements: %+v; want approved, absent, without addresses", p)
		}
		gb, _ := joinMem(t, hb, openBook(t, filepath.Join(dir, "b.json")), room, "device B")
		defer gb.Close()
		synctest.Wait()
		if got := log.of(hb.ID()); len(got) != 1 || got[0] != PeerFound {
			t.Fatalf("B's own announcement: events %v; want found", got)
		}
	})
}
