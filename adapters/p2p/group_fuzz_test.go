//go:build !js

package p2p

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p/discovery"
)

// FuzzGroupSeen feeds the group's announcement handler arbitrary
// announcements (what a room member may send, once it opens), signed by
// the peer they name when sign is set: it never panics, the table stays
// within maxPeerTable, and what it keeps is a valid peer id that signed
// its announcement, a sanitised device name and only addresses that name
// the announcing peer.
func FuzzGroupSeen(f *testing.F) {
	h := newTestHost(f)
	key := newKeys(f, 1)[0]
	keyID, _ := peer.IDFromPrivateKey(key)
	id := keyID.String()
	f.Add(id, "/ip4/127.0.0.1/tcp/4001/p2p/"+id+"\n/ip4/1.2.3.4/tcp/1", "laptop\x1b[2J", int64(60), true)
	f.Add(id, "/ip4/127.0.0.1/tcp/4001/p2p/"+id, "unsigned", int64(60), false)
	f.Add("12D3KooWtypo", "", "", int64(-5), false)
	f.Add(h.ID().String(), "/dns/x/tcp/1/p2p/"+h.ID().String(), "me", int64(7200), true)
	book, err := OpenPeerBook("")
	if err != nil {
		f.Fatal(err)
	}
	g := &Group{cfg: GroupConfig{Room: testRoom()}, h: h, book: book, meter: NewMeter(), log: slog.New(slog.DiscardHandler), now: time.Now,
		peers: map[peer.ID]*seenPeer{}, remotes: map[peer.ID]*Remote{}, watchers: map[*groupWatcher]struct{}{}}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	f.Cleanup(g.cancel)
	f.Fuzz(func(t *testing.T, pid, addrs, device string, expSeconds int64, sign bool) {
		var list []string
		if addrs != "" {
			list = strings.Split(addrs, "\n")
		}
		a := discovery.Announcement{PeerID: pid, Addrs: list, DeviceName: device,
			Expires: time.Now().Add(time.Duration(expSeconds) * time.Second)}
		if sign {
			a = signed(t, key, a)
		}
		g.seen(a)
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.peers) > maxPeerTable {
			t.Fatalf("%d peers in the table", len(g.peers))
		}
		for id, p := range g.peers {
			if id == h.ID() || id != keyID {
				t.Fatalf("the table holds %q", id)
			}
			if strings.ContainsFunc(p.entry.Device, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) ||
				len([]rune(p.entry.Device)) > MaxDeviceName {
				t.Fatalf("device %q kept", p.entry.Device)
			}
			for _, a := range p.entry.Addrs {
				info, err := peer.AddrInfoFromString(a)
				if err != nil || info.ID != id {
					t.Fatalf("address %q kept for %s", a, id)
				}
			}
		}
	})
}
