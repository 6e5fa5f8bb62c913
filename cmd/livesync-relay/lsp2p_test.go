package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/p2p/livesyncp2p"
	"github.com/livesync-go/livesync-go/adapters/p2p/trysteronet"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/fetch"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/trystero"
)

const (
	unitRoom     = "unit-room"
	unitRoomPass = "unit room passphrase"
)

// startLSP2PRelay runs the relay with database "vault" (unencrypted) in
// room unitRoom on its own /_nostr, loopback candidates only, accepting
// device names matching accept, and waits until it joined.
func startLSP2PRelay(t *testing.T, accept string) *running {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "relay.toml")
	text := `[[databases]]
name = "vault"

[[databases.livesync_p2p]]
group = "` + unitRoom + `"
room_passphrase_env = "ROOM_PASS"
auto_accept = "` + accept + `"
loopback_only = true
stun = []
`
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{envAdminPassword: "test-admin-password", "ROOM_PASS": unitRoomPass}
	rn := start(t, []string{"--data-dir", filepath.Join(dir, "data"), "--config", cfg}, env)
	rn.user, rn.pass = defaultAdminName, env[envAdminPassword]
	waitUntil(t, "the relay to join its LiveSync P2P room", func() bool { return rn.lsp2pStatus().State == lsp2pJoined })
	return rn
}

func (rn *running) lsp2pStatus() lsp2pStatus {
	rn.t.Helper()
	rooms := rn.status().db(rn.t, "vault").LiveSyncP2P
	if len(rooms) != 1 {
		rn.t.Fatalf("/status livesync_p2p: %+v", rooms)
	}
	return rooms[0]
}

// openUnitPeer joins the relay's room as a Go LiveSync device named name
// over a memory store, accepting the relay.
func openUnitPeer(t *testing.T, rn *running, name string, db store.Store) *livesyncp2p.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := livesyncp2p.Open(ctx, livesyncp2p.Config{
		Room: trysteronet.Config{RoomID: unitRoom, Password: trystero.RoomPassword(unitRoomPass),
			Relays: []string{"ws" + strings.TrimPrefix(rn.url, "http") + nostrPath}, STUN: []string{}, LoopbackOnly: true},
		Peer: livesyncrpc.Config{DB: db, DBName: livesyncrpc.DBName("vault"), DeviceName: name, AutoAccept: defaultLSP2PDevice,
			Follow: defaultLSP2PDevice},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func memStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.NewMemory(store.Options{Name: "lsp2p-unit"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func docsJSON(t *testing.T, docs ...livesync.Doc) []json.RawMessage {
	t.Helper()
	out := make([]json.RawMessage, len(docs))
	for i, d := range docs {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// The relay in a LiveSync P2P room: a Go device it accepts syncs with it
// (pulls a note a CouchDB client pushed, then the relay pulls the
// device's note through its reqSync), and /status and /metrics count it.
func TestLiveSyncP2PRoomSyncs(t *testing.T) {
	rn := startLSP2PRelay(t, "go-peer")
	codec := plainCodec(t)
	httpMeta, httpChunks := note(t, codec, "From CouchDB.md", "pushed over HTTP\n")
	rn.pushDocs("vault", append([]livesync.Doc{httpMeta}, httpChunks...)...)

	db := memStore(t)
	peerMeta, peerChunks := note(t, codec, "From P2P.md", "written on a P2P device\n")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := db.BulkDocs(ctx, docsJSON(t, append([]livesync.Doc{peerMeta}, peerChunks...)...)); err != nil {
		t.Fatal(err)
	}
	n := openUnitPeer(t, rn, "go-peer", db)
	// The relay serves a device once it has its advertisement.
	waitUntil(t, "the relay to know the device", func() bool { return len(rn.lsp2pStatus().Peers) == 1 })
	res, err := n.Sync(ctx, defaultLSP2PDevice, livesyncrpc.PullOptions{})
	if err != nil {
		t.Fatalf("sync with the relay: %v", err)
	}
	if res.Docs != 1+len(httpChunks) {
		t.Errorf("pulled %d documents from the relay, want %d", res.Docs, 1+len(httpChunks))
	}
	if _, err := db.Get(ctx, httpMeta.ID(), store.GetOptions{}); err != nil {
		t.Fatalf("the device lacks the CouchDB client's note: %v", err)
	}
	if ids := rn.changedIDs("vault"); !slices.Contains(ids, peerMeta.ID()) {
		t.Fatalf("the relay lacks the device's note: %v", ids)
	}
	// The relay announces a CouchDB client's later note; the device,
	// which watches it, pulls.
	laterMeta, laterChunks := note(t, codec, "Later.md", "pushed after the sync\n")
	rn.pushDocs("vault", append([]livesync.Doc{laterMeta}, laterChunks...)...)
	waitUntil(t, "the device to pull the relay's change", func() bool {
		_, err := db.Get(ctx, laterMeta.ID(), store.GetOptions{})
		return err == nil
	}, rn.out.String)
	// The device announces its own change (the plugin's broadcasting
	// device); the relay, which follows every device it accepts, pulls.
	bctx, stop := context.WithCancel(ctx)
	defer stop()
	go n.Hosted().Broadcast(bctx)
	devMeta, devChunks := note(t, codec, "Announced.md", "announced by the device\n")
	if _, err := db.BulkDocs(ctx, docsJSON(t, append([]livesync.Doc{devMeta}, devChunks...)...)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the relay to pull the device's announced change", func() bool {
		return slices.Contains(rn.changedIDs("vault"), devMeta.ID())
	}, rn.out.String)
	st := rn.lsp2pStatus()
	if len(st.Peers) != 1 || st.Peers[0].Name != "go-peer" || !st.Peers[0].Accepted || st.PullsServed < 1 || st.PullsMade < 1 ||
		st.DocumentsIn < 1 || st.DocumentsOut < 1 || st.SelfID == "" || st.DeviceName != defaultLSP2PDevice {
		t.Fatalf("/status %+v", st)
	}
	metrics := string(rn.admin("GET", "/metrics", nil, 200))
	for _, want := range []string{
		`livesync_relay_livesync_p2p_joined{db="vault",group="unit-room"} 1`,
		`livesync_relay_livesync_p2p_peers{accepted="true",db="vault",group="unit-room"} 1`,
		`livesync_relay_livesync_p2p_pulls_total{db="vault",group="unit-room",kind="made"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(rn.out.String(), unitRoomPass) || strings.Contains(string(rn.admin("GET", "/status", nil, 200)), unitRoomPass) {
		t.Error("the room passphrase shows in the log or /status")
	}
}

// A device the relay does not accept is present but not served: its sync
// times out unanswered or is rejected.
func TestLiveSyncP2PRoomRefuses(t *testing.T) {
	rn := startLSP2PRelay(t, "someone-else")
	n := openUnitPeer(t, rn, "stranger", memStore(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitUntil(t, "the relay to know the device", func() bool { return len(rn.lsp2pStatus().Peers) == 1 })
	_, err := n.Pull(ctx, defaultLSP2PDevice, livesyncrpc.PullOptions{})
	if !errors.Is(err, livesyncrpc.ErrRejected) {
		t.Fatalf("an unaccepted device's pull: %v, want rejected", err)
	}
	waitUntil(t, "the stranger in /status", func() bool {
		st := rn.lsp2pStatus()
		return len(st.Peers) == 1 && st.Peers[0].Name == "stranger" && !st.Peers[0].Accepted
	})
}

// A vault whose settings say end-to-end encrypted cannot be served
// without the database's passphrase: the room leaves and /status says
// why.
func TestLiveSyncP2PEncryptedVaultNeedsPassphrase(t *testing.T) {
	rn := startLSP2PRelay(t, "go-peer")
	db, err := couchdb.New(couchdb.Config{URL: rn.url, Database: "vault", User: rn.user, Password: rn.pass})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	settings := livesync.Settings{Encrypt: true, Passphrase: "vault passphrase"}
	if _, _, err := db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "lsp2p-unit", Settings: settings.TweakValues()}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the room to stop for want of the passphrase", func() bool {
		st := rn.lsp2pStatus()
		return st.State == lsp2pError && strings.Contains(st.Error, "passphrase_file or passphrase_env")
	})
}

// A device with another room passphrase fails the handshake (the relay
// counts it when it is the side that finds out) and is never listed.
func TestLiveSyncP2PWrongRoomPassphrase(t *testing.T) {
	rn := startLSP2PRelay(t, "go-peer")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := livesyncp2p.Open(ctx, livesyncp2p.Config{
		Room: trysteronet.Config{RoomID: unitRoom, Password: trystero.RoomPassword("another passphrase"),
			Relays: []string{"ws" + strings.TrimPrefix(rn.url, "http") + nostrPath}, STUN: []string{}, LoopbackOnly: true},
		Peer: livesyncrpc.Config{DB: memStore(t), DBName: livesyncrpc.DBName("vault"), DeviceName: "go-peer", AutoAccept: defaultLSP2PDevice},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	// The side that receives the other's sealed offer finds the wrong
	// password; which side offers depends on the peer ids.
	var mu sync.Mutex
	var deviceErr error
	n.OnJoinError(func(_ string, err error) { mu.Lock(); deviceErr = err; mu.Unlock() })
	waitUntil(t, "a side to find the wrong passphrase", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return rn.lsp2pStatus().JoinErrors >= 1 || errors.Is(deviceErr, trystero.ErrIncorrectPassword)
	}, rn.out.String)
	if st := rn.lsp2pStatus(); len(st.Peers) != 0 {
		t.Fatalf("a device with the wrong passphrase is listed: %+v", st.Peers)
	}
	metrics := string(rn.admin("GET", "/metrics", nil, 200))
	if !strings.Contains(metrics, `livesync_relay_livesync_p2p_join_errors_total{db="vault",group="unit-room"} `) {
		t.Error("/metrics lacks the join errors")
	}
}

// The devices recorded as hunt sources belong to one hunt: when the
// database's hunt is replaced (this relay became the leader of a shared
// database again), the new hunt gets every device added afresh.
func TestLiveSyncP2PSourcesFollowTheHunt(t *testing.T) {
	newHunt := func() *hunt.Hunt {
		h, err := hunt.New(hunt.Config{}, hunt.Deps{Local: enginetest.NewMemChunks(), Claims: fetch.NewCoordinator()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Close)
		return h
	}
	first, second := newHunt(), newHunt()
	rm := &lsp2pRoom{}
	rm.sourcesFor(first)
	rm.sources["peer"] = true
	rm.sourcesFor(first)
	if !rm.sources["peer"] {
		t.Fatal("the same hunt lost its recorded devices")
	}
	rm.sourcesFor(second)
	if len(rm.sources) != 0 {
		t.Fatalf("a new hunt starts with devices %v recorded as its sources", rm.sources)
	}
}
