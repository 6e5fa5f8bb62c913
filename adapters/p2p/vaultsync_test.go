//go:build !js

package p2p

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p/nostrrelay"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// startNostrRelay serves the discovery relay on loopback and returns its
// ws:// URL.
func startNostrRelay(t *testing.T) string {
	t.Helper()
	r := nostrrelay.New(nostrrelay.Config{})
	srv := httptest.NewServer(r)
	t.Cleanup(func() {
		r.Close()
		srv.Close()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

var e2ee = livesync.Settings{Encrypt: true, Passphrase: "vault passphrase", CustomChunkSize: 60}

// vaultPeer is one device: a host, a peer book, a vault over a memory
// store, and (once joined) its group.
type vaultPeer struct {
	h    host.Host
	book *PeerBook
	v    *vault.Vault
	g    *Group
	name string
}

func newVaultPeer(t *testing.T, name string, settings livesync.Settings) *vaultPeer {
	t.Helper()
	st, err := store.NewMemory(store.Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	v, err := vault.Open(t.Context(), st, vault.Options{Settings: &settings, Device: negotiate.DeviceInfo{DeviceName: name}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return &vaultPeer{h: newTestHost(t), book: openBook(t, filepath.Join(t.TempDir(), PeerBookFileName)), v: v, name: name}
}

// join joins the test group through the relay, serving the vault.
func (p *vaultPeer) join(t *testing.T, relay string, settings livesync.Settings) {
	t.Helper()
	g, err := JoinGroup(t.Context(), GroupConfig{Name: "test group", Room: testRoom(), Host: p.h, NostrRelays: []string{relay},
		Device: p.name, Book: p.book, Serve: ServedVault(p.v, "test group", settings), AnnounceInterval: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	p.g = g
}

func (p *vaultPeer) approve(t *testing.T, other *vaultPeer) {
	t.Helper()
	if err := p.book.Approve(other.h.ID(), other.name); err != nil {
		t.Fatal(err)
	}
}

func (p *vaultPeer) write(t *testing.T, path, text string) {
	t.Helper()
	if _, err := p.v.Write(t.Context(), path, []byte(text), vault.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// files maps each live file of the vault to its text.
func (p *vaultPeer) files(t *testing.T) map[string]string {
	t.Helper()
	list, err := p.v.List(t.Context(), "", vault.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range list {
		if f.Meta.Deleted {
			continue
		}
		data, err := p.v.Read(t.Context(), f.Meta.Path)
		if err != nil {
			t.Fatalf("%s: read %s: %v", p.name, f.Meta.Path, err)
		}
		out[f.Meta.Path] = string(data)
	}
	return out
}

func sameFiles(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Two hosts find each other through a real Nostr relay on loopback.
func TestGroupDiscoveryOverNostr(t *testing.T) {
	relay := startNostrRelay(t)
	a, b := newVaultPeer(t, "laptop", e2ee), newVaultPeer(t, "phone", e2ee)
	a.approve(t, b)
	a.join(t, relay, e2ee)
	found := make(chan PeerEvent, 4)
	defer a.g.Watch(func(e PeerEvent) { found <- e })()
	b.join(t, relay, e2ee)
	select {
	case e := <-found:
		if e.Kind != PeerFound || e.Peer.ID != b.h.ID() || e.Peer.Device != "phone" || !e.Peer.Approved || len(e.Peer.Addrs) == 0 {
			t.Fatalf("first event = %v %+v; want B found, approved, with addresses", e.Kind, e.Peer)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("A never found B")
	}
	waitFor(t, 20*time.Second, "B to note A pending", func() bool {
		p := b.book.Pending()
		return len(p) == 1 && p[0].ID == a.h.ID() && p[0].Device == "laptop"
	})
}

// Two end-to-end encrypted vaults, each serving its replica and each
// approving the other, converge with one one-shot sync each.
func TestSyncVaultConvergesE2EE(t *testing.T) {
	relay := startNostrRelay(t)
	a, b := newVaultPeer(t, "laptop", e2ee), newVaultPeer(t, "phone", e2ee)
	a.write(t, "notes/laptop.md", "written on the laptop\n")
	b.write(t, "notes/phone.md", "written on the phone\n")
	a.approve(t, b)
	b.approve(t, a)
	a.join(t, relay, e2ee)
	b.join(t, relay, e2ee)

	var mu sync.Mutex
	var reported []peer.ID
	opts := VaultSyncOptions{Wait: 30 * time.Second, Hunt: true, Attach: vault.AttachOptions{Create: true},
		OnPeer: func(id peer.ID, _ vault.SyncResult, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("peer %s: %v", id, err)
			}
			reported = append(reported, id)
		}}
	start := time.Now()
	res, err := SyncVault(t.Context(), a.v, a.g, opts)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("the sync took %v: it did not return early once every approved peer was found", time.Since(start))
	}
	if !slices.Equal(res.Peers, []peer.ID{b.h.ID()}) || len(res.Failed) != 0 || !slices.Equal(reported, res.Peers) {
		t.Fatalf("A synced with %v (failed %v, reported %v), want B", res.Peers, res.Failed, reported)
	}
	if len(a.v.Links()) != 0 {
		t.Error("a one-shot sync left links attached")
	}
	want := map[string]string{"notes/laptop.md": "written on the laptop\n", "notes/phone.md": "written on the phone\n"}
	if got := a.files(t); !sameFiles(got, want) {
		t.Errorf("A after its sync: %v", got)
	}
	// A pushed through B's served view: B's replica holds A's note in
	// plaintext form already.
	if got := b.files(t); !sameFiles(got, want) {
		t.Errorf("B after A's sync: %v", got)
	}
	// What B's served view stores for the group is the salt A's
	// handshake created; the documents themselves are not encrypted in
	// B's replica.
	if _, _, err := StoreRecords(b.v.Store(), ServedRecordsPrefix("test group")).Read(t.Context(), negotiate.RecordSyncParameters); err != nil {
		t.Errorf("B holds no sync parameters for the group: %v", err)
	}

	b.write(t, "notes/phone.md", "edited on the phone\n")
	if _, err := SyncVault(t.Context(), b.v, b.g, VaultSyncOptions{Wait: 30 * time.Second, Direction: replicate.Push,
		Attach: vault.AttachOptions{Create: true}}); err != nil {
		t.Fatal(err)
	}
	want["notes/phone.md"] = "edited on the phone\n"
	if got := a.files(t); !sameFiles(got, want) {
		t.Errorf("A after B pushed: %v", got)
	}
}

// A peer that is not approved gets nothing: its sync is refused, the
// other side's vault is unchanged and notes it pending.
func TestSyncVaultUnapprovedGetsNothing(t *testing.T) {
	relay := startNostrRelay(t)
	a, c := newVaultPeer(t, "laptop", e2ee), newVaultPeer(t, "stranger", e2ee)
	a.write(t, "secret.md", "not for strangers\n")
	c.write(t, "spam.md", "unwanted\n")
	c.approve(t, a) // c wants a; a never approved c
	a.join(t, relay, e2ee)
	c.join(t, relay, e2ee)

	res, err := SyncVault(t.Context(), c.v, c.g, VaultSyncOptions{Wait: 30 * time.Second, Attach: vault.AttachOptions{Create: true}})
	if err == nil {
		t.Fatal("an unapproved peer synced")
	}
	if ferr := res.Failed[a.h.ID()]; !errors.Is(ferr, ErrRefused) {
		t.Errorf("the failure is %v, want ErrRefused", ferr)
	}
	if got := c.files(t); !sameFiles(got, map[string]string{"spam.md": "unwanted\n"}) {
		t.Errorf("the stranger's vault changed: %v", got)
	}
	if got := a.files(t); !sameFiles(got, map[string]string{"secret.md": "not for strangers\n"}) {
		t.Errorf("the refusing vault changed: %v", got)
	}
	waitFor(t, 10*time.Second, "A to note the stranger pending", func() bool {
		p := a.book.Pending()
		return len(p) == 1 && p[0].ID == c.h.ID()
	})
	if _, _, err := StoreRecords(a.v.Store(), ServedRecordsPrefix("test group")).Read(t.Context(), negotiate.RecordSyncParameters); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("the stranger's handshake left sync parameters on A: %v", err)
	}
}

// Revoking a peer, here from another process through the book's file,
// closes its connections and the streams it has open; its next request
// is refused.
func TestRevokeClosesConnections(t *testing.T) {
	server, client := newTestHost(t), newTestHost(t)
	path := filepath.Join(t.TempDir(), PeerBookFileName)
	book := openBook(t, path)
	if err := book.Approve(client.ID(), "client"); err != nil {
		t.Fatal(err)
	}
	st, err := store.NewMemory(store.Options{Name: "served"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, err := JoinGroup(t.Context(), GroupConfig{Name: "test group", Room: testRoom(), Host: server, NostrRelays: []string{"mem://"},
		Book: book, Serve: &Served{Endpoint: st, Chunks: st, Records: StoreRecords(st, "")}, transport: newMemRoom()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	revoked := make(chan PeerEvent, 1)
	defer g.Watch(func(e PeerEvent) {
		if e.Kind == PeerRevoked {
			revoked <- e
		}
	})()

	r := NewRemote(client, addrInfo(server), RemoteOptions{Group: "test group", Timeout: time.Minute})
	info, err := r.Endpoint().Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	longpoll := make(chan error, 1)
	go func() {
		_, err := r.Endpoint().Changes(context.Background(), engine.ChangesRequest{Since: info.UpdateSeq, Wait: true})
		longpoll <- err
	}()
	waitFor(t, 5*time.Second, "the client's connection", func() bool {
		return server.Network().Connectedness(client.ID()) == network.Connected
	})
	if err := openBook(t, path).Revoke(client.ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-longpoll:
		if err == nil {
			t.Fatal("the open longpoll ended without an error")
		}
	case <-time.After(BookPollInterval + 5*time.Second):
		t.Fatal("the revoked peer's open stream was not closed")
	}
	if e := <-revoked; e.Peer.ID != client.ID() {
		t.Errorf("revoked event for %s", e.Peer.ID)
	}
	if _, err := r.Endpoint().Info(t.Context()); !errors.Is(err, ErrRefused) {
		t.Errorf("the revoked peer's next request: %v, want ErrRefused", err)
	}
}

// A one-shot sync with no approved peer, or none present, says so.
func TestSyncVaultNoPeers(t *testing.T) {
	h := newTestHost(t)
	other := newPeerID(t)
	synctest.Test(t, func(t *testing.T) {
		book := openBook(t, "")
		g, _ := joinMem(t, h, book, newMemRoom(), "alone")
		defer g.Close()
		if _, err := SyncVault(t.Context(), nil, g, VaultSyncOptions{}); !errors.Is(err, ErrNoApprovedPeers) {
			t.Fatalf("no approved peer: %v", err)
		}
		if err := book.Approve(other, "away"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := SyncVault(t.Context(), nil, g, VaultSyncOptions{Wait: 7 * time.Second}); !errors.Is(err, ErrNoPeerFound) {
			t.Fatalf("no peer present: %v", err)
		}
		if d := time.Since(start); d != 7*time.Second {
			t.Errorf("waited %v, want the 7 s asked", d)
		}
	})
}

// A live sync follows a peer while it is present: what the peer writes
// arrives, and the sync with it stops (its link detached) once its
// announcements expire.
func TestSyncVaultLive(t *testing.T) {
	relay := startNostrRelay(t)
	a, b := newVaultPeer(t, "laptop", e2ee), newVaultPeer(t, "phone", e2ee)
	b.write(t, "first.md", "one\n")
	a.approve(t, b)
	b.approve(t, a)
	a.join(t, relay, e2ee)
	b.join(t, relay, e2ee)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type outcome struct {
		res VaultSyncResult
		err error
	}
	done := make(chan outcome, 1)
	started := make(chan peer.ID, 4)
	go func() {
		res, err := SyncVault(ctx, a.v, a.g, VaultSyncOptions{Live: true, Hunt: true, Attach: vault.AttachOptions{Create: true},
			OnPeer: func(id peer.ID, _ vault.SyncResult, err error) {
				if err == nil {
					started <- id
				}
			}})
		done <- outcome{res, err}
	}()
	select {
	case id := <-started:
		if id != b.h.ID() {
			t.Fatalf("live sync started with %s", id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the live sync never started with B")
	}
	waitFor(t, 20*time.Second, "B's first note on A", func() bool { return a.files(t)["first.md"] == "one\n" })
	b.write(t, "second.md", "two\n")
	waitFor(t, 20*time.Second, "B's second note on A", func() bool { return a.files(t)["second.md"] == "two\n" })
	a.write(t, "from-a.md", "three\n")
	waitFor(t, 20*time.Second, "A's note on B", func() bool { return b.files(t)["from-a.md"] == "three\n" })

	b.g.Close()
	waitFor(t, 30*time.Second, "A to stop syncing with B once B is lost", func() bool { return len(a.v.Links()) == 0 })
	cancel()
	select {
	case o := <-done:
		if !errors.Is(o.err, context.Canceled) {
			t.Errorf("live SyncVault ended with %v, want context.Canceled", o.err)
		}
		if !slices.Equal(o.res.Peers, []peer.ID{b.h.ID()}) {
			t.Errorf("live SyncVault synced with %v, want B", o.res.Peers)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("live SyncVault did not return after its context ended")
	}
	if len(ourGoroutines()) == 0 {
		t.Fatal("the leak check sees none of the running group's goroutines")
	}
	a.g.Close()
	waitFor(t, 10*time.Second, "the group's and the sync's goroutines to end", func() bool {
		return len(ourGoroutines()) == 0
	})
}

// ourGoroutines lists the stacks of running goroutines that are in the
// group's or SyncVault's code.
func ourGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, fn := range []string{"p2p.(*Group)", "p2p.(*groupWatcher)", "p2p.(*liveSync)", "p2p.syncLive"} {
			if strings.Contains(g, fn) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}
