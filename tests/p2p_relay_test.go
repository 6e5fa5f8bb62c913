package tests

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/adapters/p2p/discovery"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

const (
	p2pRelayGroup      = "relay-test-group"
	p2pRelayGroupPass  = "relay group passphrase"
	p2pRelayVaultPass  = "relay vault passphrase"
	p2pRelayAdminPass  = "relay-admin-password"
	p2pRelayDeviceName = "laptop"
)

// p2pRelayStatus is the part of /status these tests read.
type p2pRelayStatus struct {
	Databases []struct {
		Name string `json:"name"`
		P2P  []struct {
			Group   string         `json:"group"`
			PeerID  string         `json:"peer_id"`
			Addrs   []string       `json:"addrs"`
			Joined  bool           `json:"joined"`
			Peers   []p2pRelayPeer `json:"peers"`
			Pending []struct {
				ID     string `json:"id"`
				Device string `json:"device"`
			} `json:"pending"`
		} `json:"p2p"`
	} `json:"databases"`
}

// p2pRelayPeer is one peer of a group in /status.
type p2pRelayPeer struct {
	ID        string `json:"id"`
	Device    string `json:"device"`
	Approved  bool   `json:"approved"`
	Connected bool   `json:"connected"`
	BytesIn   uint64 `json:"bytes_in"`
	BytesOut  uint64 `json:"bytes_out"`
	DocsIn    uint64 `json:"docs_in"`
	DocsOut   uint64 `json:"docs_out"`
}

// p2pRelay is a running relay binary with one P2P group on "vault".
type p2pRelay struct {
	p  *relayProcess
	wd string
}

func (r *p2pRelay) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, r.p.url+path, strings.NewReader(body))
	req.SetBasicAuth("admin", p2pRelayAdminPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (r *p2pRelay) status(t *testing.T) p2pRelayStatus {
	t.Helper()
	code, b := r.do(t, "GET", "/status", "")
	var s p2pRelayStatus
	if code != 200 || json.Unmarshal(b, &s) != nil || len(s.Databases) != 1 || len(s.Databases[0].P2P) != 1 {
		t.Fatalf("/status: %d %s", code, b)
	}
	return s
}

// startP2PRelay starts the relay binary with database "vault" in a group
// approving the peers given, its own /_nostr, and loopback P2P ports.
func startP2PRelay(t *testing.T, approved ...peer.ID) *p2pRelay {
	t.Helper()
	bin := buildRelay(t)
	wd := t.TempDir()
	var ap []string
	for _, id := range approved {
		ap = append(ap, fmt.Sprintf("{peer = %q, device = %q}", id.String(), p2pRelayDeviceName))
	}
	conf := fmt.Sprintf(`data_dir = "data"

[[users]]
name = "admin"
password_env = "P2P_ADMIN"
admin = true

[[databases]]
name = "vault"

[[databases.p2p]]
group = %q
passphrase_env = "P2P_GROUP_PASS"
nostr_relays = ["self"]
approved = [%s]

[p2p]
listen = ["/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"]
circuit_relay = false
`, p2pRelayGroup, strings.Join(ap, ", "))
	if err := os.WriteFile(filepath.Join(wd, "relay.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"P2P_ADMIN=" + p2pRelayAdminPass, "P2P_GROUP_PASS=" + p2pRelayGroupPass}
	p := startRelayOpts(t, bin, wd, relayStart{env: env, args: []string{"--config", filepath.Join(wd, "relay.toml"), "--listen", "127.0.0.1:0"}, graceful: true})
	r := &p2pRelay{p: p, wd: wd}
	upPoll(t, "the relay to join its group", func() bool { return r.status(t).Databases[0].P2P[0].Joined }, nil)
	return r
}

// p2pTestHost is a loopback libp2p host with a fresh identity.
func p2pTestHost(t *testing.T) host.Host {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h, err := p2p.NewHost(context.Background(), p2p.Config{Identity: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// relayAddrInfo is the relay's peer id and addresses as /status shows
// them.
func relayAddrInfo(t *testing.T, s p2pRelayStatus) peer.AddrInfo {
	t.Helper()
	g := s.Databases[0].P2P[0]
	var mas []ma.Multiaddr
	for _, a := range g.Addrs {
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			t.Fatalf("address %q: %v", a, err)
		}
		mas = append(mas, m)
	}
	infos, err := peer.AddrInfosFromP2pAddrs(mas...)
	if err != nil || len(infos) != 1 || infos[0].ID.String() != g.PeerID {
		t.Fatalf("the relay's addresses %v (peer %s): %v", g.Addrs, g.PeerID, err)
	}
	return infos[0]
}

// newP2PVault opens an empty vault in memory.
func newP2PVault(t *testing.T, settings *livesync.Settings) *vault.Vault {
	t.Helper()
	st, err := store.NewMemory(store.Options{Name: "p2p-relay-test"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := vault.Open(context.Background(), st, vault.Options{Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close(); st.Close() })
	return v
}

func p2pPassphrase() (string, error) { return p2pRelayVaultPass, nil }

// TestP2PRelay runs the relay binary as an always-on peer of a group: a
// device approved in the configuration finds it through the relay's own
// /_nostr, pushes an end-to-end encrypted vault to it over libp2p, and a
// CouchDB client of the relay reads the same notes (and the reverse);
// /status and /metrics count the peer's traffic; a device not approved
// is refused, listed pending, approved and revoked through the admin
// API.
func TestP2PRelay(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	laptop := p2pTestHost(t)
	r := startP2PRelay(t, laptop.ID())
	st := r.status(t)
	relayInfo := relayAddrInfo(t, st)

	// The laptop joins the group (serving nothing) and finds the relay
	// through /_nostr.
	book, err := p2p.OpenPeerBook("")
	if err != nil {
		t.Fatal(err)
	}
	if err := book.Approve(relayInfo.ID, "relay"); err != nil {
		t.Fatal(err)
	}
	room, err := discovery.NewRoom(p2pRelayGroup, p2pRelayGroupPass)
	if err != nil {
		t.Fatal(err)
	}
	nostrURL := "ws://" + strings.TrimPrefix(r.p.url, "http://") + "/_nostr"
	g, err := p2p.JoinGroup(ctx, p2p.GroupConfig{Name: p2pRelayGroup, Room: room, Host: laptop, NostrRelays: []string{nostrURL},
		Device: p2pRelayDeviceName, Book: book})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	upPoll(t, "the relay's announcement on /_nostr", func() bool {
		return slices.ContainsFunc(g.Peers(), func(p p2p.PeerStatus) bool { return p.ID == relayInfo.ID && len(p.Addrs) > 0 })
	}, func() string { return fmt.Sprintf("%+v", g.Peers()) })

	// The laptop pushes a new encrypted vault to the relay over libp2p.
	lv := newP2PVault(t, &livesync.Settings{Encrypt: true, Passphrase: p2pRelayVaultPass})
	link, err := lv.Attach(ctx, g.Remote(relayInfo.ID), vault.AttachOptions{Create: true})
	if err != nil {
		t.Fatalf("attach to the relay over p2p: %v", err)
	}
	notes := map[string]string{"Daily/p2p.md": "# Over libp2p\npushed to the relay\n", "big.md": strings.Repeat("chunks and chunks\n", 4000)}
	for p, text := range notes {
		if _, err := lv.Write(ctx, p, []byte(text), vault.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lv.Push(ctx, link, vault.SyncOptions{}); err != nil {
		t.Fatalf("push over p2p: %v", err)
	}

	// A CouchDB client of the relay reads them.
	cv := newP2PVault(t, nil)
	remote, err := couchdb.NewRemote(couchdb.Config{URL: r.p.url, Database: "vault", User: "admin", Password: p2pRelayAdminPass}, couchdb.RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	clink, err := cv.Attach(ctx, remote, vault.AttachOptions{Passphrase: p2pPassphrase})
	if err != nil {
		t.Fatalf("attach over CouchDB: %v", err)
	}
	if _, err := cv.Pull(ctx, clink, vault.SyncOptions{}); err != nil {
		t.Fatalf("pull over CouchDB: %v", err)
	}
	for p, text := range notes {
		if got, err := cv.Read(ctx, p); err != nil || string(got) != text {
			t.Fatalf("%s over CouchDB: %v, %d bytes", p, err, len(got))
		}
	}

	// The reverse: a note pushed over CouchDB reaches the laptop over
	// libp2p.
	const back = "# From a CouchDB client\nthrough the relay\n"
	if _, err := cv.Write(ctx, "from-couch.md", []byte(back), vault.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cv.Push(ctx, clink, vault.SyncOptions{}); err != nil {
		t.Fatalf("push over CouchDB: %v", err)
	}
	if _, err := lv.Pull(ctx, link, vault.SyncOptions{}); err != nil {
		t.Fatalf("pull over p2p: %v", err)
	}
	if got, err := lv.Read(ctx, "from-couch.md"); err != nil || string(got) != back {
		t.Fatalf("from-couch.md over p2p: %v %q", err, got)
	}

	p2pRelayCheckCounters(t, r, laptop.ID())
	p2pRelayApproval(t, ctx, r, relayInfo)
}

// p2pRelayCheckCounters checks the laptop in /status and /metrics.
func p2pRelayCheckCounters(t *testing.T, r *p2pRelay, laptop peer.ID) {
	t.Helper()
	grp := r.status(t).Databases[0].P2P[0]
	i := slices.IndexFunc(grp.Peers, func(p p2pRelayPeer) bool { return p.ID == laptop.String() })
	if i < 0 {
		t.Fatalf("the laptop is not in /status: %+v", grp)
	}
	lp := grp.Peers[i]
	if !lp.Approved || !lp.Connected || lp.Device != p2pRelayDeviceName || lp.DocsIn < 4 || lp.DocsOut < 1 || lp.BytesIn == 0 || lp.BytesOut == 0 {
		t.Errorf("the laptop in /status: %+v", lp)
	}
	code, b := r.do(t, "GET", "/metrics", "")
	m := string(b)
	for _, want := range []string{
		`livesync_relay_p2p_peers_connected{db="vault",group="` + p2pRelayGroup + `"} 1`,
		`livesync_relay_p2p_documents_total{db="vault",direction="in",group="` + p2pRelayGroup + `",peer="` + laptop.String() + `"} ` + fmt.Sprint(lp.DocsIn),
		`livesync_relay_p2p_bytes_total{db="vault",direction="out",group="` + p2pRelayGroup + `",peer="` + laptop.String() + `"}`,
		`livesync_relay_nostr_events_total{outcome="accepted"}`,
	} {
		if code != 200 || !strings.Contains(m, want) {
			t.Errorf("/metrics (%d) lacks %s", code, want)
		}
	}
}

// p2pRelayApproval: a device the relay has not approved is refused with
// an explicit error and listed pending; the admin API approves it (it is
// served at once) and revokes it (refused again).
func p2pRelayApproval(t *testing.T, ctx context.Context, r *p2pRelay, relayInfo peer.AddrInfo) {
	t.Helper()
	phone := p2pTestHost(t)
	pr := p2p.NewRemote(phone, relayInfo, p2p.RemoteOptions{Group: p2pRelayGroup})
	defer pr.Close()
	if _, err := pr.Endpoint().Info(ctx); !errors.Is(err, p2p.ErrRefused) {
		t.Fatalf("an unapproved device: %v, want ErrRefused", err)
	}
	pending := func() bool {
		for _, p := range r.status(t).Databases[0].P2P[0].Pending {
			if p.ID == phone.ID().String() {
				return true
			}
		}
		return false
	}
	upPoll(t, "the phone pending in /status", pending, nil)

	path := "/_p2p/vault/" + p2pRelayGroup + "/peers/" + phone.ID().String()
	if code, b := r.do(t, "PUT", path, `{"device":"phone"}`); code != 200 {
		t.Fatalf("approve: %d %s", code, b)
	}
	if pending() {
		t.Error("the approved phone is still pending")
	}
	if _, err := pr.Endpoint().Info(ctx); err != nil {
		t.Fatalf("the approved phone: %v", err)
	}
	bookFile, err := os.ReadFile(filepath.Join(r.wd, "data", "p2p", "vault", p2pRelayGroup, p2p.PeerBookFileName))
	if err != nil || !strings.Contains(string(bookFile), phone.ID().String()) {
		t.Fatalf("the peer book file: %v %s", err, bookFile)
	}
	if code, b := r.do(t, "DELETE", path, ""); code != 200 {
		t.Fatalf("revoke: %d %s", code, b)
	}
	// The relay closes a revoked peer's connections: a request racing
	// that close fails on the closing connection (a transport error) and
	// the next one dials anew.
	var err2 error
	for range 20 {
		_, err2 = pr.Endpoint().Info(ctx)
		var ee *engine.Error
		if !errors.As(err2, &ee) || ee.Stage != engine.StageTransport {
			break
		}
	}
	if err := err2; !errors.Is(err, p2p.ErrRefused) {
		t.Fatalf("a revoked device: %v, want ErrRefused", err)
	}

	// Only admins approve; unknown groups and malformed ids are refused.
	req, _ := http.NewRequest("PUT", r.p.url+path, nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("approve without credentials: %v %v", resp, err)
	}
	if code, _ := r.do(t, "PUT", "/_p2p/vault/other-group/peers/"+phone.ID().String(), ""); code != 404 {
		t.Errorf("unknown group: %d", code)
	}
	if code, _ := r.do(t, "PUT", "/_p2p/vault/"+p2pRelayGroup+"/peers/12D3KooWnope", ""); code != 400 {
		t.Errorf("malformed peer id: %d", code)
	}
}

// TestP2PRelayCLI is the relay's reason to be a peer: device A pushes its
// encrypted vault (obfuscated paths) to the relay with the livesync CLI
// and goes offline; device B, which never saw A online, pulls the notes
// from the relay, and A later pulls B's answer.
func TestP2PRelayCLI(t *testing.T) {
	t.Parallel()
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir()}
	env := map[string]string{"LIVESYNC_P2P_PASSPHRASE": p2pRelayGroupPass, "LIVESYNC_PASSPHRASE": p2pRelayVaultPass}
	a, b := t.TempDir(), t.TempDir()
	in := filepath.Join(t.TempDir(), "in")
	put := func(dir, path, text string) {
		if err := os.WriteFile(in, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"put", path, in}
		if dir == a && path == "notes/from-a.md" {
			args = []string{"put", "--encrypt", "--obfuscate-paths", path, in}
		}
		c.ok(t, dir, env, args...)
	}
	put(a, "notes/from-a.md", "written on A\n")
	id := func(dir string) peer.ID {
		s := strings.TrimSpace(c.ok(t, dir, env, "p2p", "id").stdout)
		pid, err := peer.Decode(s)
		if err != nil {
			t.Fatalf("p2p id: %q: %v", s, err)
		}
		return pid
	}
	idA, idB := id(a), id(b)
	r := startP2PRelay(t, idA, idB)
	relayID := r.status(t).Databases[0].P2P[0].PeerID
	for _, dir := range []string{a, b} {
		c.ok(t, dir, env, "p2p", "approve", relayID, "--device", "relay")
	}
	group := []string{"p2p://" + p2pRelayGroup, "--nostr", "ws" + strings.TrimPrefix(r.p.url, "http") + "/_nostr", "--wait", "30s"}

	if res := c.run(t, a, env, append([]string{"push", "--verbose"}, group...)...); res.code != 0 {
		t.Fatalf("push from A: exit %d\n%s", res.code, res.stderr)
	}
	res := c.run(t, b, env, append([]string{"sync", "--verbose"}, group...)...)
	if res.code != 0 || !strings.Contains(res.stdout, "synced with peer "+relayID) {
		t.Fatalf("sync from B: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	c.noSecrets(t, res, p2pRelayGroupPass, p2pRelayVaultPass)
	if got := c.ok(t, b, env, "cat", "notes/from-a.md").stdout; got != "written on A\n" {
		t.Fatalf("B's notes/from-a.md: %q", got)
	}
	put(b, "notes/from-b.md", "written on B\n")
	c.ok(t, b, env, append([]string{"push"}, group...)...)
	c.ok(t, a, env, append([]string{"pull"}, group...)...)
	if got := c.ok(t, a, env, "cat", "notes/from-b.md").stdout; got != "written on B\n" {
		t.Fatalf("A's notes/from-b.md: %q", got)
	}
	if out := r.p.output(); strings.Contains(out, p2pRelayGroupPass) || strings.Contains(out, p2pRelayVaultPass) {
		t.Fatal("the relay printed a passphrase")
	}
}
