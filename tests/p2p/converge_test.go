//go:build !js

package p2ptest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/adapters/p2p/discovery"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// member is one peer of a group test: a vault peer (v set) or the
// always-on peer (a relay's database, v nil).
type member struct {
	name string
	key  crypto.PrivKey
	id   peer.ID
	h    host.Host
	st   store.Store
	v    *vault.Vault
	book *p2p.PeerBook
	g    *p2p.Group
}

// newMember makes a peer's identity, host and (empty, in-memory) book;
// st is its store.
func newMember(t *testing.T, name string, st store.Store) *member {
	t.Helper()
	key, id := newKey(t)
	book, err := p2p.OpenPeerBook("")
	if err != nil {
		t.Fatal(err)
	}
	return &member{name: name, key: key, id: id, h: newHost(t, key), st: st, book: book}
}

// approveAll makes every member approve every other one.
func approveAll(t *testing.T, ms []*member) {
	t.Helper()
	for _, a := range ms {
		for _, b := range ms {
			if a != b {
				if err := a.book.Approve(b.id, b.name); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// join makes m a member of the group on the Nostr relay at url, serving
// served; the cleanup leaves the group.
func (m *member) join(t *testing.T, room *discovery.Room, url string, served *p2p.Served) {
	t.Helper()
	g, err := p2p.JoinGroup(context.Background(), p2p.GroupConfig{
		Name: groupName, Room: room, Host: m.h, NostrRelays: []string{url}, Device: m.name,
		Book: m.book, Serve: served, AnnounceInterval: time.Second,
	})
	if err != nil {
		t.Fatalf("%s joins the group: %v", m.name, err)
	}
	m.g = g
	t.Cleanup(func() { g.Close() })
}

// syncLive runs SyncVault live for m until the test ends.
func (m *member) syncLive(t *testing.T) {
	background(t, func(ctx context.Context) {
		_, err := p2p.SyncVault(ctx, m.v, m.g, p2p.VaultSyncOptions{Live: true, Attach: attachOptions(vaultPassphrase)})
		if err != nil && ctx.Err() == nil {
			t.Errorf("%s: live sync ended: %v", m.name, err)
		}
	})
}

// trees reads every member's tree (the always-on peer's decoded from the
// remote form).
func trees(ctx context.Context, ms []*member, s livesync.Settings) ([]tree, error) {
	out := make([]tree, len(ms))
	for i, m := range ms {
		var err error
		if m.v != nil {
			out[i], err = vaultTree(ctx, m.v)
		} else {
			var codec *livesync.Codec
			if codec, err = remoteCodec(ctx, p2p.StoreRecords(m.st, ""), s); err == nil {
				out[i], err = storeTree(ctx, m.st, codec)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.name, err)
		}
	}
	return out, nil
}

// waitConverged waits until every member holds want. Members announce
// every second, and on an idle machine they converge in a few seconds;
// the wait is long because under the race detector on a loaded 2-core
// machine (one CI run) the relay member had still received nothing at
// 30 s, its libp2p handshakes and live pulls queued behind the others.
func waitConverged(t *testing.T, ctx context.Context, ms []*member, s livesync.Settings, want tree) {
	t.Helper()
	eventually(t, 90*time.Second, "the peers converge", func() (bool, string) {
		ts, err := trees(ctx, ms, s)
		if err != nil {
			return false, err.Error()
		}
		var diff []string
		for i, tr := range ts {
			if !tr.equal(want) {
				diff = append(diff, fmt.Sprintf("%s has %s", ms[i].name, tr))
			}
		}
		return len(diff) == 0, fmt.Sprintf("want %s; %s", want, strings.Join(diff, "; "))
	})
}

// docCounters sums what every member's meter counted in documents and
// chunks: it stops moving once replication has settled.
func docCounters(ms []*member) (total uint64, detail string) {
	var b strings.Builder
	for _, m := range ms {
		for id, c := range m.g.Meter().Snapshot() {
			n := c.DocsIn + c.DocsOut + c.ChunksIn + c.ChunksOut
			total += n
			fmt.Fprintf(&b, "%s<-%s:%d ", m.name, id.ShortString(), n)
		}
	}
	return total, b.String()
}

// waitSettled waits until the members' document counters stop moving
// (unchanged for quiet) and returns their total.
func waitSettled(t *testing.T, ms []*member, quiet time.Duration) uint64 {
	t.Helper()
	last, since := uint64(0), time.Now()
	first := true
	var settled uint64
	eventually(t, 20*time.Second, "replication counters settle", func() (bool, string) {
		n, detail := docCounters(ms)
		if first || n != last {
			first, last, since = false, n, time.Now()
			return false, detail
		}
		settled = n
		return time.Since(since) >= quiet, detail
	})
	return settled
}

// Three vault peers and an always-on peer (a relay's database served to
// the group) find each other on a Nostr relay, sync edits made on every
// side both ways, converge to identical trees (the always-on peer's
// decoded from the encrypted form it holds), with one revision per edit,
// no conflict, and nothing sent again once they agree.
func TestThreePeersAndRelayConverge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	url := startNostrRelay(t)
	room, err := discovery.NewRoom(groupName, groupPassphrase)
	if err != nil {
		t.Fatal(err)
	}
	s := settings()
	relay := newMember(t, "relay", relayStore(t))
	ms := []*member{relay}
	for _, name := range []string{"alpha", "beta", "gamma"} {
		m := newMember(t, name, memStore(t, name))
		m.v = openVault(t, m.st, s, name)
		ms = append(ms, m)
	}
	approveAll(t, ms)
	relay.join(t, room, url, relayServed(relay.st))
	want, gens := tree{}, map[string]int{}
	write := func(m *member, path, text string) {
		t.Helper()
		if _, err := m.v.Write(ctx, path, []byte(text), vault.WriteOptions{}); err != nil {
			t.Fatalf("%s writes %s: %v", m.name, path, err)
		}
		want[path] = text
		gens[path]++
	}
	for _, m := range ms[1:] {
		for i := 1; i <= 3; i++ {
			write(m, fmt.Sprintf("%s/%d.md", m.name, i), fmt.Sprintf("# %s %d\nwritten on %s before it joined\n", m.name, i, m.name))
		}
		m.join(t, room, url, p2p.ServedVault(m.v, groupName, s))
		m.syncLive(t)
	}
	alpha, beta, gamma := ms[1], ms[2], ms[3]
	waitConverged(t, ctx, ms, s, want)
	// They found each other through the room alone: every group lists
	// the three others, approved and connected, with the addresses they
	// announced.
	eventually(t, 10*time.Second, "every peer sees the three others", func() (bool, string) {
		var missing []string
		for _, m := range ms {
			seen := map[peer.ID]bool{}
			for _, p := range m.g.Peers() {
				seen[p.ID] = p.Approved && p.Connected && len(p.Addrs) > 0
			}
			for _, o := range ms {
				if o != m && !seen[o.id] {
					missing = append(missing, m.name+" misses "+o.name)
				}
			}
		}
		return len(missing) == 0, strings.Join(missing, ", ")
	})

	// Edits on every side, while live: one revision per edit everywhere.
	write(beta, "alpha/1.md", "# alpha 1\nedited on beta\n")
	write(gamma, "beta/1.md", "# beta 1\nedited on gamma\n")
	write(alpha, "gamma/1.md", "# gamma 1\nedited on alpha\n")
	write(alpha, "alpha/new.md", "# new\nwritten on alpha while live\n")
	if _, err := gamma.v.Delete(ctx, "gamma/2.md"); err != nil {
		t.Fatal(err)
	}
	delete(want, "gamma/2.md")
	delete(gens, "gamma/2.md")
	waitConverged(t, ctx, ms, s, want)
	ids := vault.IDMapper(s)
	for _, m := range ms {
		if err := checkRevisions(ctx, m.st, ids.FromPath, gens); err != nil {
			t.Errorf("%s: %v", m.name, err)
		}
	}

	// No echo: once settled, one more note adds exactly its own
	// documents to every store, and the counters settle again.
	before := waitSettled(t, ms, 500*time.Millisecond)
	seqs := make([]string, len(ms))
	for i, m := range ms {
		if _, seqs[i], err = changesSince(ctx, m.st, ""); err != nil {
			t.Fatal(err)
		}
	}
	res, err := alpha.v.Write(ctx, "marker.md", []byte("the last note\n"), vault.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want["marker.md"] = "the last note\n"
	waitConverged(t, ctx, ms, s, want)
	after := waitSettled(t, ms, 500*time.Millisecond)
	own := append([]string{res.Meta.ID}, res.Meta.Children...)
	for i, m := range ms {
		changed, _, err := changesSince(ctx, m.st, seqs[i])
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range changed {
			if !slices.Contains(own, id) {
				t.Errorf("%s: %s changed after the peers had converged (the marker is %v)", m.name, id, own)
			}
		}
	}
	// Each of the 12 (server, client) pairs moves each of the marker's
	// documents at most once each way.
	if limit := uint64(len(own) * 12 * 2); after-before > limit {
		t.Errorf("the marker's %d documents moved %d times between the peers; at most %d expected", len(own), after-before, limit)
	}
	if after == before {
		t.Errorf("the meters counted nothing for the marker")
	}
}
