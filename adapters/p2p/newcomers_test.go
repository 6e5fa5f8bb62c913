//go:build !js

package p2p

import (
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p/discovery"
)

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
	fakes := newPeerIDs(t, 4*newcomerBurst)
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
		for _, id := range fakes {
			a := discovery.Announcement{PeerID: id.String(), DeviceName: "fake", Expires: now.Add(time.Minute)}
			if err := room.publish(t.Context(), nil, nil, "", a, now); err != nil {
				t.Fatal(err)
			}
		}
		a := discovery.Announcement{PeerID: friend.ID().String(), DeviceName: "friend", Expires: now.Add(time.Minute)}
		if err := room.publish(t.Context(), nil, nil, "", a, now); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		pending := 0
		for _, id := range fakes {
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
