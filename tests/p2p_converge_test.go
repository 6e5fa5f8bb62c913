//go:build !js

package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/engine"
)

// convDevice is one CLI replica of the convergence test.
type convDevice struct {
	name  string
	dir   string
	id    peer.ID
	host  *hostProc // nil while its p2p host is stopped
	addrs []ma.Multiaddr
}

// convWorld is what the convergence test drives: the CLI, the relay
// binary, the devices and an observer peer that reads the devices'
// served changes feeds while their hosts run (the replicas are locked
// then, so the CLI cannot read them).
type convWorld struct {
	t        *testing.T
	ctx      context.Context
	c        *cliRunner
	env      map[string]string
	relay    *p2pRelay
	relayID  string
	nostrURL string
	observer host.Host
	couch    *couchdb.Remote
}

func (w *convWorld) put(d *convDevice, path, text string) {
	w.t.Helper()
	in := filepath.Join(d.dir, ".in")
	if err := os.WriteFile(in, []byte(text), 0o600); err != nil {
		w.t.Fatal(err)
	}
	w.c.ok(w.t, d.dir, w.env, "put", path, in)
}

// startHost starts d's p2p host and learns its listening addresses.
func (w *convWorld) startHost(d *convDevice) {
	w.t.Helper()
	d.host = startHost(w.t, w.c, d.dir, w.env, "p2p", "host", "--group", p2pRelayGroup, "--nostr", w.nostrURL,
		"--listen", "/ip4/127.0.0.1/tcp/0", "--listen", "/ip4/127.0.0.1/udp/0/quic-v1")
	d.host.waitFor(w.t, "listening on")
	d.addrs = nil
	for _, l := range strings.Split(d.host.output(), "\n") {
		rest, ok := strings.CutPrefix(l, "listening on ")
		if !ok {
			continue
		}
		for _, s := range strings.Fields(rest) {
			m, err := ma.NewMultiaddr(s)
			if err != nil {
				w.t.Fatalf("%s listens on %q: %v", d.name, s, err)
			}
			d.addrs = append(d.addrs, m)
		}
	}
	if len(d.addrs) == 0 {
		w.t.Fatalf("%s printed no address:\n%s", d.name, d.host.output())
	}
}

func (w *convWorld) stopHost(d *convDevice) {
	w.t.Helper()
	d.host.stop(w.t)
	d.host = nil
}

// feed is a database's documents: id -> leaf revisions (winning first),
// with " deleted" when the winner is a tombstone.
type feed map[string]string

// readFeed reads a whole changes feed.
func readFeed(ctx context.Context, ep engine.Endpoint) (feed, error) {
	f := feed{}
	since := ""
	for {
		page, err := ep.Changes(ctx, engine.ChangesRequest{Since: since, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, ch := range page.Results {
			if strings.HasPrefix(ch.ID, "_design/") || ch.ID == "obsydian_livesync_version" {
				continue // the relay's own; a replica keeps its handshake records as _local documents
			}
			v := strings.Join(ch.Revs, ",")
			if ch.Deleted {
				v += " deleted"
			}
			f[ch.ID] = v
		}
		if len(page.Results) == 0 || page.LastSeq == since {
			return f, nil
		}
		since = page.LastSeq
	}
}

// feeds reads the relay's database (over its CouchDB endpoint) and the
// served feed of each device whose host runs, keyed by name.
func (w *convWorld) feeds(devs ...*convDevice) (map[string]feed, error) {
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	defer cancel()
	out := map[string]feed{}
	f, err := readFeed(ctx, w.couch.Endpoint())
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	out["relay"] = f
	for _, d := range devs {
		r := p2p.NewRemote(w.observer, peer.AddrInfo{ID: d.id, Addrs: d.addrs}, p2p.RemoteOptions{Group: p2pRelayGroup})
		f, err := readFeed(ctx, r.Endpoint())
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.name, err)
		}
		out[d.name] = f
	}
	return out, nil
}

// converge waits until the relay and the running devices hold the same
// documents at the same revisions, and returns that feed.
func (w *convWorld) converge(what string, devs ...*convDevice) feed {
	w.t.Helper()
	var last map[string]feed
	var lastErr error
	agree := func() bool {
		last, lastErr = w.feeds(devs...)
		if lastErr != nil {
			return false
		}
		for _, f := range last {
			if !maps.Equal(f, last["relay"]) {
				return false
			}
		}
		return true
	}
	upPoll(w.t, what, agree, func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "last error: %v\n", lastErr)
		for name, f := range last {
			fmt.Fprintf(&b, "%s: %d documents\n", name, len(f))
			for id, rev := range f {
				if last["relay"][id] != rev {
					fmt.Fprintf(&b, "  %s: %s (relay: %q)\n", id, rev, last["relay"][id])
				}
			}
		}
		for _, d := range devs {
			fmt.Fprintf(&b, "--- %s's host:\n%s\n", d.name, d.host.output())
		}
		return b.String()
	})
	for id, rev := range last["relay"] {
		if strings.Contains(rev, ",") {
			w.t.Errorf("%s: document %s has conflicting leaves %s", what, id, rev)
		}
	}
	return last["relay"]
}

// tree is a replica's files, listed and read with the CLI: path -> rev
// and contents ("deleted" for a deleted file).
func (w *convWorld) tree(dir string, env map[string]string) map[string]string {
	w.t.Helper()
	var ls struct {
		Files []struct {
			Path    string `json:"path"`
			Rev     string `json:"rev"`
			Deleted bool   `json:"deleted"`
		} `json:"files"`
	}
	out := w.c.ok(w.t, dir, env, "ls", "--deleted", "--json").stdout
	if err := json.Unmarshal([]byte(out), &ls); err != nil {
		w.t.Fatalf("ls --json: %v\n%s", err, out)
	}
	files := map[string]string{}
	for _, f := range ls.Files {
		if f.Deleted {
			files[f.Path] = f.Rev + " deleted"
			continue
		}
		files[f.Path] = f.Rev + " " + w.c.ok(w.t, dir, env, "cat", f.Path).stdout
	}
	return files
}

// TestP2PThreePeersAndRelayConverge runs the acceptance at the
// binaries' level: the relay binary, an always-on peer of group G with
// its own /_nostr, and three livesync CLI replicas of one end-to-end
// encrypted vault with obfuscated paths, each approving the two others
// and the relay. Device A creates the vault and hosts it; B and C start
// empty, pull from the group, edit (a new note, an edit of A's note, a
// deletion) and host too; the three hosts and the relay end with the same
// documents at the same revisions, without conflicts. Then C goes
// offline, A and B edit and converge with the relay, A and B stop, and C,
// with only the relay online, gets everything from it. Finally every
// replica, and one more replica pulled from the relay's CouchDB endpoint
// with the vault passphrase, holds the same files.
func TestP2PThreePeersAndRelayConverge(t *testing.T) {
	t.Parallel()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir()}
	env := map[string]string{"LIVESYNC_P2P_PASSPHRASE": p2pRelayGroupPass, "LIVESYNC_PASSPHRASE": p2pRelayVaultPass}
	w := &convWorld{t: t, ctx: ctx, c: c, env: env, observer: p2pTestHost(t)}
	a, b, cc := &convDevice{name: "A", dir: t.TempDir()}, &convDevice{name: "B", dir: t.TempDir()}, &convDevice{name: "C", dir: t.TempDir()}
	devs := []*convDevice{a, b, cc}

	// A creates the vault.
	in := filepath.Join(a.dir, ".in")
	if err := os.WriteFile(in, []byte("written on A\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.ok(t, a.dir, env, "put", "--encrypt", "--obfuscate-paths", "notes/a1.md", in)
	w.put(a, "notes/shared.md", "first version, by A\n")
	w.put(a, "notes/temp.md", "to be deleted by C\n")
	for _, d := range devs {
		s := strings.TrimSpace(c.ok(t, d.dir, env, "p2p", "id").stdout)
		id, err := peer.Decode(s)
		if err != nil {
			t.Fatalf("%s's p2p id %q: %v", d.name, s, err)
		}
		d.id = id
	}
	w.relay = startP2PRelay(t, a.id, b.id, cc.id)
	w.relayID = w.relay.status(t).Databases[0].P2P[0].PeerID
	w.nostrURL = "ws" + strings.TrimPrefix(w.relay.p.url, "http") + "/_nostr"
	remote, err := couchdb.NewRemote(couchdb.Config{URL: w.relay.p.url, Database: "vault", User: "admin", Password: p2pRelayAdminPass}, couchdb.RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { remote.Close() })
	w.couch = remote
	approve := func(d *convDevice, id, device string) { c.ok(t, d.dir, env, "p2p", "approve", id, "--device", device) }

	// A approves everyone (the observer too: it reads feeds, never
	// announces, so no host syncs with it) and hosts; B and C approve A
	// and the relay, so their one-shot pulls start as soon as both are
	// found, and get the vault.
	for _, d := range devs {
		approve(d, w.relayID, "relay")
	}
	approve(a, b.id.String(), "B")
	approve(a, cc.id.String(), "C")
	approve(a, w.observer.ID().String(), "observer")
	w.startHost(a)
	a.host.waitFor(t, "syncing live with peer "+w.relayID)
	for _, d := range []*convDevice{b, cc} {
		approve(d, a.id.String(), "A")
		r := c.ok(t, d.dir, env, "pull", "p2p://"+p2pRelayGroup, "--nostr", w.nostrURL, "--wait", "30s")
		if !strings.Contains(r.stdout, "synced with peer "+a.id.String()) || !strings.Contains(r.stdout, "synced with peer "+w.relayID) {
			t.Fatalf("%s's pull from the group: %q", d.name, r.stdout)
		}
		c.noSecrets(t, r, p2pRelayGroupPass, p2pRelayVaultPass)
		if got := c.ok(t, d.dir, env, "cat", "notes/a1.md").stdout; got != "written on A\n" {
			t.Fatalf("%s's notes/a1.md: %q", d.name, got)
		}
	}
	approve(b, cc.id.String(), "C")
	approve(cc, b.id.String(), "B")
	approve(b, w.observer.ID().String(), "observer")
	approve(cc, w.observer.ID().String(), "observer")

	// B and C edit, then host: three hosts and the relay converge.
	w.put(b, "notes/b1.md", "written on B\n")
	w.put(b, "notes/shared.md", "second version, by B\n")
	w.put(cc, "notes/c1.md", "written on C\n")
	c.ok(t, cc.dir, env, "rm", "notes/temp.md")
	w.startHost(b)
	w.startHost(cc)
	first := w.converge("A, B, C and the relay to converge", a, b, cc)
	t.Logf("three hosts and the relay converged on %d documents after %.1f s", len(first), time.Since(start).Seconds())

	// C goes offline; A and B edit and converge with the relay.
	w.stopHost(cc)
	w.stopHost(a)
	w.put(a, "notes/a2.md", "written on A while C was away\n")
	w.put(a, "notes/a1.md", "written on A, edited while C was away\n")
	w.startHost(a)
	w.stopHost(b)
	w.put(b, "notes/b2.md", strings.Repeat("written on B while C was away\n", 2000))
	c.ok(t, b.dir, env, "rm", "notes/b1.md")
	w.startHost(b)
	second := w.converge("A, B and the relay to converge without C", a, b)
	if len(second) <= len(first) {
		t.Errorf("the second round added nothing: %d documents, then %d", len(first), len(second))
	}
	t.Logf("A, B and the relay converged on %d documents without C", len(second))

	// Only the relay is online: C gets everything from it.
	w.stopHost(a)
	w.stopHost(b)
	w.startHost(cc)
	cc.host.waitFor(t, "syncing live with peer "+w.relayID)
	if got := w.converge("C to catch up from the relay alone", cc); !maps.Equal(got, second) {
		t.Errorf("C and the relay agree on %d documents, A and B had %d", len(got), len(second))
	}
	w.stopHost(cc)

	w.checkFinalTrees(devs)
	t.Logf("done in %.1f s", time.Since(start).Seconds())
}

// checkFinalTrees checks that every replica holds the same files, and so
// does a replica pulled from the relay's CouchDB endpoint with the vault
// passphrase, with the contents and deletions of the test's two rounds.
func (w *convWorld) checkFinalTrees(devs []*convDevice) {
	t, c, env := w.t, w.c, w.env
	t.Helper()
	e := t.TempDir()
	couchEnv := maps.Clone(env)
	couchEnv["LIVESYNC_PASSWORD"] = p2pRelayAdminPass
	c.ok(t, e, couchEnv, "pull", strings.Replace(w.relay.p.url, "://", "://admin@", 1)+"/vault", "--quiet")
	want := map[string]string{
		"notes/a1.md":     "written on A, edited while C was away\n",
		"notes/a2.md":     "written on A while C was away\n",
		"notes/b2.md":     strings.Repeat("written on B while C was away\n", 2000),
		"notes/c1.md":     "written on C\n",
		"notes/shared.md": "second version, by B\n",
	}
	trees := map[string]map[string]string{"relay (CouchDB)": w.tree(e, couchEnv)}
	for _, d := range devs {
		trees[d.name] = w.tree(d.dir, env)
	}
	for name, tr := range trees {
		if !maps.Equal(tr, trees["A"]) {
			t.Errorf("%s's files differ from A's:\n%v\n%v", name, slices.Sorted(maps.Keys(tr)), slices.Sorted(maps.Keys(trees["A"])))
		}
	}
	for p, text := range want {
		if got, ok := trees["C"][p]; !ok || !strings.HasSuffix(got, " "+text) {
			t.Errorf("C's %s: %.60q, want %.60q", p, got, text)
		}
	}
	for _, p := range []string{"notes/temp.md", "notes/b1.md"} {
		if got := trees["C"][p]; !strings.HasSuffix(got, " deleted") {
			t.Errorf("C's %s: %.60q, want deleted", p, got)
		}
	}
	if n := len(trees["C"]); n != len(want)+2 {
		t.Errorf("C holds %d files, want %d", n, len(want)+2)
	}
}
