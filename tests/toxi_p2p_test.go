//go:build !js

package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
	"github.com/livesync-go/livesync-go/tests/internal/faultnet"
)

// countedEndpoint counts the documents a served peer receives, and calls
// onWrite (once armed) when they pass at.
type countedEndpoint struct {
	engine.Endpoint
	mu      sync.Mutex
	written map[string]int
	total   int
	at      int
	onWrite func()
}

func (c *countedEndpoint) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	c.mu.Lock()
	for _, d := range docs {
		var head struct {
			ID  string `json:"_id"`
			Rev string `json:"_rev"`
		}
		json.Unmarshal(d, &head)
		c.written[head.ID+" "+head.Rev]++
		c.total++
	}
	var fire func()
	if c.onWrite != nil && c.total >= c.at {
		fire, c.onWrite = c.onWrite, nil
	}
	c.mu.Unlock()
	if fire != nil {
		go fire()
	}
	return c.Endpoint.BulkDocs(ctx, docs)
}

func (c *countedEndpoint) arm(at int, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.onWrite = c.total+at, f
}

func (c *countedEndpoint) counts() (total, distinct int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, len(c.written)
}

// TestToxiP2P: a peer pushes a vault of 1,500 notes (E2EE) to another peer
// over libp2p on TCP, through toxiproxy (latency 20±10 ms up, slicer
// down). Each fault in turn (a reset, an answer cut off after 4 KB, the
// peer's address gone, a black hole closed after 1 s) strikes once the
// served peer has received another 300 documents; the push fails, and
// the pusher comes back with a new host (same identity, same vault). A
// last push completes: the served peer holds exactly the pusher's
// documents at the pusher's revisions, and received at most a batch
// (100) per fault again: each push resumes from its checkpoints.
func TestToxiP2P(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := vault.DefaultSettings(false)
	s.Encrypt, s.Passphrase = true, "toxi p2p passphrase"
	const group = "toxi-group"
	attach := vault.AttachOptions{Create: true, Passphrase: func() (string, error) { return s.Passphrase, nil }}
	openV := func(st store.Store, device string) *vault.Vault {
		v, err := vault.Open(ctx, st, vault.Options{Settings: &s, Device: negotiate.DeviceInfo{DeviceName: device}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Close() })
		return v
	}
	tcpOnly := []string{"/ip4/127.0.0.1/tcp/0"}

	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	pusherID, _ := peer.IDFromPrivateKey(key)
	servedSt := newMemoryStore(t)
	served := *p2p.ServedVault(openV(servedSt, "served"), group, s)
	counted := &countedEndpoint{Endpoint: served.Endpoint, written: map[string]int{}}
	served.Endpoint = counted
	allow := p2p.NewAllowList()
	allow.Allow(pusherID, "pusher")
	sh, err := p2p.NewHost(ctx, p2p.Config{ListenAddrs: tcpOnly})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	t.Cleanup(p2p.Serve(sh, p2p.ServeConfig{DB: served, Allow: allow}))
	port, err := sh.Addrs()[0].ValueForProtocol(ma.P_TCP)
	if err != nil {
		t.Fatal(err)
	}
	px := toxiProxy(t, "127.0.0.1:"+port)
	toxiMust(t, px.Latency("latency", faultnet.Up, 20*time.Millisecond, 10*time.Millisecond))
	toxiMust(t, px.Slicer("slicer", faultnet.Down, 1024, 512, 50*time.Microsecond))
	info := peer.AddrInfo{ID: sh.ID(), Addrs: []ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/" + px.Addr()[len("127.0.0.1:"):])}}

	pst := newMemoryStore(t)
	pv := openV(pst, "pusher")
	const notes = 1500
	for i := range notes {
		if _, err := pv.Write(ctx, fmt.Sprintf("notes/%04d.md", i), []byte(fmt.Sprintf("# note %d\npushed through a bad network\n", i)), vault.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := p2pDocRevs(t, pst)
	push := func() error {
		h, err := p2p.NewHost(ctx, p2p.Config{Identity: key, ListenAddrs: tcpOnly})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		l, err := pv.Attach(ctx, p2p.NewRemote(h, info, p2p.RemoteOptions{Group: group}), attach)
		if err != nil {
			return err
		}
		_, err = pv.Push(ctx, l, vault.SyncOptions{})
		return err
	}
	faults := []toxiUpstreamFault{
		{"reset_peer", func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.ResetPeer("fault", faultnet.Down, 0)) }, removeFault},
		{"answer_cut_mid_body", func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.CutAfter("fault", faultnet.Down, 4096)) }, removeFault},
		{"peer_gone", func(t *testing.T, p *faultnet.Proxy) { p.Cut() }, func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.Restore()) }},
		{"black_hole", func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.Timeout("fault", faultnet.Up, time.Second)) }, removeFault},
	}
	for _, f := range faults {
		counted.arm(300, func() { f.inject(t, px) })
		err := push()
		counted.arm(1<<30, nil)
		f.heal(t, px)
		total, _ := counted.counts()
		t.Logf("push through %s: %d documents received so far; %v", f.name, total, err)
		if err == nil {
			t.Errorf("the push went through %s", f.name)
		}
	}
	if err := push(); err != nil {
		t.Fatalf("the push after the faults: %v", err)
	}
	got := p2pDocRevs(t, servedSt)
	total, distinct := counted.counts()
	t.Logf("%d documents: received %d (%d distinct, %d again)", len(want), total, distinct, total-distinct)
	if len(got) != len(want) {
		t.Errorf("the served peer holds %d documents, the pusher %d", len(got), len(want))
	}
	for id, rev := range want {
		if got[id] != rev {
			t.Fatalf("%s is at %q on the served peer, %q on the pusher", id, got[id], rev)
		}
	}
	if total-distinct > 100*len(faults) {
		t.Errorf("%d documents received again, more than a batch (100) per fault", total-distinct)
	}
}

// p2pDocRevs lists the (id, winning revision) of every document of st but
// the system ones.
func p2pDocRevs(t *testing.T, st store.Store) map[string]string {
	t.Helper()
	infos, err := st.AllDocs(ctxT(t), store.AllDocsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, in := range infos {
		if !docid.IsSystemID(in.ID) {
			out[in.ID] = in.Rev
		}
	}
	return out
}
