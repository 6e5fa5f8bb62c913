//go:build !js

package livesyncp2p

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/p2p/nostrrelay"
	"github.com/livesync-go/livesync-go/adapters/p2p/trysteronet"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/rpcroom"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/trystero"
)

// startRelay serves an in-process Nostr relay that forwards trystero's
// ephemeral kinds, on loopback, and returns its ws:// URL.
func startRelay(t *testing.T) string {
	t.Helper()
	r := nostrrelay.New(nostrrelay.Config{ForwardEphemeral: true, EventsPerMinute: 1000})
	srv := httptest.NewServer(r)
	t.Cleanup(func() {
		_ = r.Close()
		srv.Close()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// waitFor polls cond until it holds or the deadline passes (real
// network: no fake clock drives pion and the relay).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// meetLimit bounds how long a test's nodes may take to meet and finish:
// a few seconds normally, but pion's DTLS handshakes under the race
// detector have taken 13 s for three nodes on a shared 2-core machine.
const meetLimit = 45 * time.Second

// testNode is a Node over a memory store, recording its join errors and
// progress reports.
type testNode struct {
	*Node
	st       store.Store
	mu       sync.Mutex
	joinErrs []error
	progress []livesyncrpc.Progress
}

func (n *testNode) errs() []error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.joinErrs)
}

func (n *testNode) progressReports() []livesyncrpc.Progress {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.progress)
}

// openNode joins the room "test-group" on relay as device name with the
// room passphrase roomPass (loopback only, no STUN), serving an empty
// memory store that accepts every peer unless edit says otherwise.
func openNode(t *testing.T, relay, roomPass, name string, edit func(*Config)) *testNode {
	t.Helper()
	st, err := store.NewMemory(store.Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	n := &testNode{st: st}
	cfg := Config{
		Room: trysteronet.Config{RoomID: "test-group", Password: trystero.RoomPassword(roomPass),
			Relays: []string{relay}, STUN: []string{}, LoopbackOnly: true},
		Peer: livesyncrpc.Config{DB: st, DBName: livesyncrpc.DBName("vault"), DeviceName: name,
			Tweaks: negotiate.ShouldMatchTemplate(), Passphrase: "vault passphrase", AutoAccept: "~.*",
			OnProgress: func(p livesyncrpc.Progress) { n.mu.Lock(); n.progress = append(n.progress, p); n.mu.Unlock() }},
		OnJoinError: func(_ string, err error) { n.mu.Lock(); n.joinErrs = append(n.joinErrs, err); n.mu.Unlock() },
	}
	if edit != nil {
		edit(&cfg)
	}
	node, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Node = node
	t.Cleanup(func() {
		if err := node.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return n
}

func put(t *testing.T, st store.Store, doc string) {
	t.Helper()
	if _, err := st.Put(context.Background(), json.RawMessage(doc)); err != nil {
		t.Fatal(err)
	}
}

// bigText is about 60 KB of text with two- and four-byte characters, so
// its envelope crosses in many rpc2 chunks with surrogate pairs at
// arbitrary split points.
func bigText() string {
	var b strings.Builder
	for i := 0; b.Len() < 60_000; i++ {
		fmt.Fprintf(&b, "line %d: café 😀 naïve 𝄞\n", i)
	}
	return b.String()
}

// putNote stores a note (plain metadata) with its chunks in the local
// form.
func putNote(t *testing.T, st store.Store, path string, chunks ...engine.Chunk) {
	t.Helper()
	if err := st.PutChunks(context.Background(), chunks); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(chunks))
	size := 0
	for i, c := range chunks {
		ids[i] = c.ID
		size += len(c.Data)
	}
	children, _ := json.Marshal(ids)
	put(t, st, fmt.Sprintf(`{"_id":%q,"path":%q,"type":"plain","children":%s,"ctime":1,"mtime":2,"size":%d,"eden":{}}`,
		path, path, children, size))
}

// leaves returns every document's id and leaf revisions.
func leaves(t *testing.T, st store.Store) map[string][]string {
	t.Helper()
	page, err := st.Changes(context.Background(), engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, c := range page.Results {
		revs := slices.Clone(c.Revs)
		slices.Sort(revs)
		out[c.ID] = revs
	}
	return out
}

func TestSyncVaultBothWays(t *testing.T) {
	relay := startRelay(t)
	before := runtime.NumGoroutine()
	a := openNode(t, relay, "room secret", "Alpha", nil)
	b := openNode(t, relay, "room secret", "Beta", nil)
	big := engine.Chunk{ID: "h:big", Data: bigText()}
	if len(big.Data) <= 48<<10 {
		t.Fatalf("big chunk is only %d bytes", len(big.Data))
	}
	putNote(t, a.st, "alpha/big.md", big)
	for i := range 40 {
		putNote(t, a.st, fmt.Sprintf("alpha/%02d.md", i), engine.Chunk{ID: fmt.Sprintf("h:a%02d", i), Data: fmt.Sprintf("note %d of alpha", i)})
	}
	for i := range 5 {
		putNote(t, b.st, fmt.Sprintf("beta/%02d.md", i), engine.Chunk{ID: fmt.Sprintf("h:b%02d", i), Data: fmt.Sprintf("note %d of beta", i)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), meetLimit)
	defer cancel()
	start := time.Now()
	res, err := a.Sync(ctx, "Beta", livesyncrpc.PullOptions{}) // the device name
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	t.Logf("joined and synced both ways in %s (pulled %d docs in %d batches)", time.Since(start), res.Docs, res.Batches)
	if res.Docs != 10 {
		t.Fatalf("a pulled %d documents, want b's 10", res.Docs)
	}
	la, lb := leaves(t, a.st), leaves(t, b.st)
	if len(la) != 92 || len(lb) != 92 {
		t.Fatalf("a has %d documents, b %d; want 92 each", len(la), len(lb))
	}
	for id, revs := range la {
		if !slices.Equal(revs, lb[id]) {
			t.Fatalf("%s: leaves %v on a, %v on b", id, revs, lb[id])
		}
	}
	got, err := b.st.GetChunks(ctx, []engine.ChunkID{big.ID})
	if err != nil || got[big.ID].Data != big.Data {
		t.Fatalf("b's copy of the big chunk differs (%d bytes, want %d): %v", len(got[big.ID].Data), len(big.Data), err)
	}
	// a reported its own pull, and b's acknowledgements of the pull from a.
	waitFor(t, 5*time.Second, "b's acknowledgements", func() bool {
		var own, acked bool
		for _, p := range a.progressReports() {
			own = own || (!p.Sending && p.Peer == b.SelfID() && p.Info != nil)
			acked = acked || (p.Sending && p.Peer == b.SelfID() && p.Info == nil)
		}
		return own && acked
	})
	if ad := a.Known(); len(ad) != 1 || ad[0].Name != "Beta" || ad[0].Platform != livesyncrpc.Platform || ad[0].PeerID != b.SelfID() {
		t.Fatalf("a knows %+v", ad)
	}
	// Close ends every goroutine the nodes started.
	if err := errors.Join(a.Close(), b.Close()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the nodes' goroutines to end", func() bool {
		return runtime.NumGoroutine() <= before
	})
}

func TestWrongRoomPassword(t *testing.T) {
	relay := startRelay(t)
	a := openNode(t, relay, "the right one", "Alpha", nil)
	b := openNode(t, relay, "a wrong one", "Beta", nil)
	putNote(t, a.st, "secret.md", engine.Chunk{ID: "h:s", Data: "secret"})
	// As in trystero, the side that cannot open the other's sealed
	// offer reports it: the answerer, whose id sorts last.
	answerer, leader := b, a
	if trystero.IsLeader(b.SelfID(), a.SelfID()) {
		answerer, leader = a, b
	}
	waitFor(t, meetLimit, "incorrect room password", func() bool {
		return slices.ContainsFunc(answerer.errs(), isIncorrect)
	})
	for _, err := range append(answerer.errs(), leader.errs()...) {
		if !isIncorrect(err) || !strings.Contains(err.Error(), "incorrect room password") {
			t.Errorf("join error %q, want incorrect room password", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := b.Pull(ctx, "alpha", livesyncrpc.PullOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("pull across passwords: %v, want no peer before the deadline", err)
	}
	if len(a.Known()) != 0 || len(b.Known()) != 0 || len(a.Room().Peers()) != 0 || len(b.Room().Peers()) != 0 {
		t.Fatalf("peers met across passwords: %v %v", a.Known(), b.Known())
	}
	if n := len(leaves(t, b.st)); n != 0 {
		t.Fatalf("b holds %d documents", n)
	}
}

func isIncorrect(err error) bool { return errors.Is(err, trystero.ErrIncorrectPassword) }

// A headless node serves only the peers it accepts: another peer's
// requests are dropped (its calls time out) and its pulls are rejected,
// while an auto-accepted peer syncs; a lasting decision stored in the
// decisions file then lets the other in.
func TestUnacceptedPeerDropped(t *testing.T) {
	relay := startRelay(t)
	decisions, err := OpenFileDecisions(filepath.Join(t.TempDir(), "decisions.json"))
	if err != nil {
		t.Fatal(err)
	}
	hub := openNode(t, relay, "room", "hub", func(c *Config) {
		c.Peer.AutoAccept, c.Peer.Decisions = "~^trusted", decisions
	})
	trusted := openNode(t, relay, "room", "trusted-laptop", nil)
	stranger := openNode(t, relay, "room", "stranger", nil)
	putNote(t, hub.st, "shared.md", engine.Chunk{ID: "h:shared", Data: "shared"})
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), meetLimit)
	defer cancel()
	adStranger, err := hub.WaitPeer(ctx, "stranger")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stranger.WaitPeer(ctx, "hub"); err != nil {
		t.Fatal(err)
	}
	t.Logf("the hub and the stranger met after %s", time.Since(start))
	if _, err := stranger.Pull(ctx, "hub", livesyncrpc.PullOptions{}); !errors.Is(err, livesyncrpc.ErrRejected) {
		t.Fatalf("stranger's pull: %v, want ErrRejected", err)
	}
	_, err = stranger.Hosted().RPC.CallTimeout(ctx, hub.SelfID(), livesyncrpc.MethodInfo, 2*time.Second)
	var re *rpcroom.Error
	if !errors.As(err, &re) || re.Code != rpcroom.CodeTimeout {
		t.Fatalf("stranger's db.info: %v, want it dropped (a timeout)", err)
	}
	res, err := stranger.ChunkSource(hub.SelfID()).FetchChunks(ctx, []engine.ChunkID{"h:shared"})
	if !errors.Is(err, livesyncrpc.ErrRejected) || len(res.Found)+len(res.Missing) != 0 {
		t.Fatalf("stranger fetched chunks: %+v, %v; want ErrRejected, not an omission", res, err)
	}
	if _, err := trusted.Sync(ctx, "hub", livesyncrpc.PullOptions{}); err != nil {
		t.Fatalf("trusted peer's sync: %v", err)
	}
	t.Logf("the trusted peer synced after %s", time.Since(start))
	if _, ok := leaves(t, trusted.st)["shared.md"]; !ok {
		t.Fatal("the trusted peer did not get the hub's note")
	}
	if n := len(leaves(t, stranger.st)); n != 0 {
		t.Fatalf("the stranger holds %d documents", n)
	}
	// A lasting decision by device name lets the stranger in.
	if err := hub.Hosted().Decide(ctx, adStranger, livesyncrpc.Decision{Accept: true}); err != nil {
		t.Fatal(err)
	}
	if r, err := stranger.Pull(ctx, "hub", livesyncrpc.PullOptions{}); err != nil || r.Docs != 2 {
		t.Fatalf("stranger's pull once accepted: %+v, %v", r, err)
	}
	again, err := OpenFileDecisions(decisions.Path())
	if err != nil {
		t.Fatal(err)
	}
	if got := again.All(); len(got) != 1 || !got["stranger"] {
		t.Fatalf("decisions file holds %v", got)
	}
}

func TestChunkSource(t *testing.T) {
	relay := startRelay(t)
	a := openNode(t, relay, "room", "Alpha", nil)
	b := openNode(t, relay, "room", "Beta", nil)
	big := engine.Chunk{ID: "h:big", Data: bigText()}
	one, two := engine.Chunk{ID: "h:one", Data: "first"}, engine.Chunk{ID: "h:+two", Data: "c2Vjb25k"}
	gone := engine.Chunk{ID: "h:gone", Data: "deleted later"}
	if err := a.st.PutChunks(context.Background(), []engine.Chunk{big, one, two, gone}); err != nil {
		t.Fatal(err)
	}
	rev := leaves(t, a.st)[gone.ID][0]
	put(t, a.st, fmt.Sprintf(`{"_id":%q,"_rev":%q,"_deleted":true}`, gone.ID, rev))
	ctx, cancel := context.WithTimeout(context.Background(), meetLimit)
	defer cancel()
	ad, err := b.WaitPeer(ctx, a.SelfID()) // by id
	if err != nil || ad.Name != "Alpha" {
		t.Fatalf("WaitPeer by id: %+v, %v", ad, err)
	}
	src := b.ChunkSource(a.SelfID())
	if !src.CanFetchDirect() || src.ThrottleKey() != "livesync-p2p:"+a.SelfID() {
		t.Fatalf("CanFetchDirect %v, ThrottleKey %q", src.CanFetchDirect(), src.ThrottleKey())
	}
	res, err := src.FetchChunks(ctx, []engine.ChunkID{"h:one", "h:absent", big.ID, "h:+two", "h:gone"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Found, []engine.Chunk{one, big, two}) {
		t.Fatalf("found %d chunks, want h:one, h:big and h:+two in order", len(res.Found))
	}
	if !slices.Equal(res.Missing, []engine.ChunkID{"h:absent", "h:gone"}) {
		t.Fatalf("missing %v", res.Missing)
	}
	if _, err := src.FetchChunks(ctx, []engine.ChunkID{"h:one", "h:one"}); err == nil {
		t.Fatal("a repeated id was accepted")
	}
	many := make([]engine.ChunkID, MaxChunkIDs+1)
	for i := range many {
		many[i] = fmt.Sprintf("h:%d", i)
	}
	if _, err := src.FetchChunks(ctx, many); err == nil {
		t.Fatal("more than MaxChunkIDs ids were accepted")
	}
	// A peer that is not in the room is an error, not an omission.
	if res, err := b.ChunkSource("nobody").FetchChunks(ctx, []engine.ChunkID{"h:one"}); err == nil {
		t.Fatalf("a missing peer answered %+v", res)
	}
	wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer wcancel()
	if _, err := b.WaitPeer(wctx, "nobody"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitPeer for an absent peer: %v", err)
	}
}

// WaitPeer returns once the node is closed.
func TestWaitPeerEndsAtClose(t *testing.T) {
	relay := startRelay(t)
	a := openNode(t, relay, "room", "Alpha", nil)
	done := make(chan error, 1)
	go func() {
		_, err := a.WaitPeer(context.Background(), "nobody")
		done <- err
	}()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, trysteronet.ErrClosed) {
			t.Fatalf("WaitPeer after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitPeer did not return after Close")
	}
}

func TestMatch(t *testing.T) {
	ads := []livesyncrpc.Advertisement{
		{PeerID: "id1", Name: "Laptop"}, {PeerID: "id2", Name: "Laptop"}, {PeerID: "id3", Name: "id1"}, {PeerID: "id4", Name: "Phone"},
	}
	if ad, ok, err := match(ads, "Phone"); !ok || err != nil || ad.PeerID != "id4" {
		t.Fatalf("by name: %+v %v %v", ad, ok, err)
	}
	// Names match exactly, as the plugin's CLI resolves them.
	if _, ok, err := match(ads, "PHONE"); ok || err != nil {
		t.Fatalf("a name in another case: %v %v", ok, err)
	}
	if ad, ok, err := match(ads, "id1"); !ok || err != nil || ad.PeerID != "id1" {
		t.Fatalf("an id wins over a name: %+v %v %v", ad, ok, err)
	}
	_, ok, err := match(ads, "Laptop")
	if ok || !errors.Is(err, ErrAmbiguousPeer) || !strings.Contains(err.Error(), "id1, id2") {
		t.Fatalf("ambiguous name: %v %v", ok, err)
	}
	if _, ok, err := match(ads, "tablet"); ok || err != nil {
		t.Fatalf("absent: %v %v", ok, err)
	}
}
