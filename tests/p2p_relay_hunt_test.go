//go:build !js

package tests

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// p2pHuntPeer is a peer of the group in /status, with the relay's hunt's
// view of it.
type p2pHuntPeer struct {
	ID       string `json:"id"`
	Present  bool   `json:"present"`
	ChunksIn uint64 `json:"chunks_in"`
	Hunt     *struct {
		Source      bool   `json:"source"`
		Requests    uint64 `json:"requests"`
		Found       uint64 `json:"found"`
		Failed      uint64 `json:"failed"`
		Chunks      uint64 `json:"chunks"`
		Unusable    uint64 `json:"unusable"`
		MaxInFlight int    `json:"max_in_flight"`
		MaxInWindow int    `json:"max_in_window"`
	} `json:"hunt"`
}

// p2pHuntStatus is the part of /status the hunt test reads.
type p2pHuntStatus struct {
	Databases []struct {
		HeldDocuments int `json:"held_documents"`
		P2P           []struct {
			PeerID string        `json:"peer_id"`
			Peers  []p2pHuntPeer `json:"peers"`
		} `json:"p2p"`
	} `json:"databases"`
}

// startP2PHuntRelay starts the relay binary with database "vault" (with
// the vault passphrase, no upstream) in a group approving device, and
// hunt limits that bind: one request at a time per source, two a 600 ms
// window, two chunk ids each; a pushed note is hunted after 200 ms.
func startP2PHuntRelay(t *testing.T, device peer.ID) *p2pRelay {
	t.Helper()
	bin := buildRelay(t)
	wd := t.TempDir()
	conf := fmt.Sprintf(`data_dir = "data"

[[users]]
name = "admin"
password_env = "P2P_ADMIN"
admin = true

[[databases]]
name = "vault"
passphrase_env = "VAULT_PASS"

[[databases.p2p]]
group = %q
passphrase_env = "P2P_GROUP_PASS"
approved = [{peer = %q, device = "desktop"}]

[hunt]
max_in_flight = 1
max_per_window = 2
window = "600ms"
batch_size = 2
backoff_base = "200ms"
backoff_cap = "400ms"

[purgatory]
pushed_delay = "200ms"

[p2p]
listen = ["/ip4/127.0.0.1/tcp/0"]
circuit_relay = false
`, p2pRelayGroup, device)
	if err := os.WriteFile(filepath.Join(wd, "relay.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"P2P_ADMIN=" + p2pRelayAdminPass, "P2P_GROUP_PASS=" + p2pRelayGroupPass, "VAULT_PASS=" + p2pRelayVaultPass}
	p := startRelayOpts(t, bin, wd, relayStart{env: env, args: []string{"--config", filepath.Join(wd, "relay.toml"), "--listen", "127.0.0.1:0"}, graceful: true})
	r := &p2pRelay{p: p, wd: wd}
	upPoll(t, "the relay to join its group", func() bool { return r.status(t).Databases[0].P2P[0].Joined }, nil)
	return r
}

func (r *p2pRelay) huntStatus(t *testing.T) p2pHuntStatus {
	t.Helper()
	code, b := r.do(t, "GET", "/status", "")
	var s p2pHuntStatus
	if code != 200 || json.Unmarshal(b, &s) != nil || len(s.Databases) != 1 || len(s.Databases[0].P2P) != 1 {
		t.Fatalf("/status: %d %s", code, b)
	}
	return s
}

func (s p2pHuntStatus) peer(id string) (p2pHuntPeer, bool) {
	for _, p := range s.Databases[0].P2P[0].Peers {
		if p.ID == id {
			return p, true
		}
	}
	return p2pHuntPeer{}, false
}

// feedIDs lists the ids of the relay database's changes feed.
func (r *p2pRelay) feedIDs(t *testing.T) []string {
	t.Helper()
	code, b := r.do(t, "GET", "/vault/_changes", "")
	var c struct {
		Results []struct {
			ID string `json:"id"`
		} `json:"results"`
	}
	if code != 200 || json.Unmarshal(b, &c) != nil {
		t.Fatalf("_changes: %d %s", code, b)
	}
	var ids []string
	for _, row := range c.Results {
		ids = append(ids, row.ID)
	}
	return ids
}

// TestP2PRelayHuntsPeers: a note's metadata reaches the relay from a
// CouchDB client without its chunks (as a plugin whose push was cut off
// would leave it) and is held; the only replica with the chunks is a CLI
// device of the database's group running `livesync p2p host`, which does
// not push them. The relay's
// hunt asks that peer, within its per-source limits, re-encrypts the
// chunks with the database's salt (the device serves the group with a
// salt of its own) and releases the note, which a fresh CouchDB client
// then pulls and reads.
func TestP2PRelayHuntsPeers(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir()}
	env := map[string]string{"LIVESYNC_P2P_PASSPHRASE": p2pRelayGroupPass, "LIVESYNC_PASSPHRASE": p2pRelayVaultPass}
	const path = "notes/hunted.md"
	var text strings.Builder
	for i := range 600 {
		fmt.Fprintf(&text, "line %d: only the desktop holds this note's chunks\n", i)
	}
	dev := t.TempDir()
	in := filepath.Join(t.TempDir(), "in.md")
	if err := os.WriteFile(in, []byte(text.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	c.ok(t, dev, env, "put", "--encrypt", "--obfuscate-paths", path, in)
	idDev := strings.TrimSpace(c.ok(t, dev, env, "p2p", "id").stdout)
	devID, err := peer.Decode(idDev)
	if err != nil {
		t.Fatal(err)
	}
	r := startP2PHuntRelay(t, devID)
	relayID := r.status(t).Databases[0].P2P[0].PeerID

	// A CouchDB client sets the vault up on the relay (its salt, and its
	// settings: those of the desktop but for path obfuscation), then
	// sends the note's metadata alone: held.
	settings := &livesync.Settings{Encrypt: true, Passphrase: p2pRelayVaultPass, CustomChunkSize: 60}
	cv := newP2PVault(t, settings)
	remote, err := couchdb.NewRemote(couchdb.Config{URL: r.p.url, Database: "vault", User: "admin", Password: p2pRelayAdminPass}, couchdb.RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	clink, err := cv.Attach(ctx, remote, vault.AttachOptions{Create: true})
	if err != nil {
		t.Fatalf("attach over CouchDB: %v", err)
	}
	metaID, nchunks := pushMetadataOnly(t, r, settings, path, text.String())
	if nchunks < 6 {
		t.Fatalf("%d chunks, want several requests' worth", nchunks)
	}
	if slices.Contains(r.feedIDs(t), metaID) || r.huntStatus(t).Databases[0].HeldDocuments != 1 {
		t.Fatal("the note is in the relay's changes feed before its chunks, or not held")
	}

	// The desktop hosts its vault in the group. Its own sync with the
	// relay is refused (path obfuscation is on for it, off for the
	// vault the relay holds: an incompatible setting), so no replication
	// brings the chunks; chunk ids do not depend on path obfuscation, so
	// its chunks are the note's.
	c.ok(t, dev, env, "p2p", "approve", relayID, "--device", "relay")
	host := startHost(t, c, dev, env, "p2p", "host", "--group", p2pRelayGroup, "--nostr", "ws"+strings.TrimPrefix(r.p.url, "http")+"/_nostr")
	host.waitFor(t, "listening on")
	upPoll(t, "the note released into the changes feed", func() bool { return slices.Contains(r.feedIDs(t), metaID) },
		func() string {
			b, _ := json.Marshal(r.huntStatus(t))
			return string(b) + "\nrelay:\n" + r.p.output() + "\nhost:\n" + host.output()
		})
	if _, err := cv.Pull(ctx, clink, vault.SyncOptions{}); err != nil {
		t.Fatalf("pull over CouchDB: %v", err)
	}
	if got, err := cv.Read(ctx, path); err != nil || string(got) != text.String() {
		t.Fatalf("%s pulled from the relay: %v, %d bytes, want %d", path, err, len(got), text.Len())
	}

	// The desktop was the source, asked within the per-source limits.
	p, _ := r.huntStatus(t).peer(idDev)
	h := p.Hunt
	minReq := uint64((nchunks + 1) / 2)
	if h == nil || h.Chunks != uint64(nchunks) || h.Requests < minReq || h.Found < minReq || h.Failed != 0 || h.Unusable != 0 {
		t.Fatalf("the desktop's part in the hunt: %+v, want %d chunks in at least %d requests", h, nchunks, minReq)
	}
	if h.MaxInFlight != 1 || h.MaxInWindow < 1 || h.MaxInWindow > 2 {
		t.Errorf("max in flight %d, max in window %d: the limits are 1 and 2", h.MaxInFlight, h.MaxInWindow)
	}
	if p.ChunksIn != uint64(nchunks) {
		t.Errorf("chunks_in %d, want %d", p.ChunksIn, nchunks)
	}
	_, m := r.do(t, "GET", "/metrics", "")
	for _, want := range []string{
		fmt.Sprintf(`livesync_relay_p2p_hunt_fetches_total{db="vault",group=%q,outcome="found",peer=%q} %d`, p2pRelayGroup, idDev, h.Found),
		fmt.Sprintf(`livesync_relay_p2p_hunt_fetches_total{db="vault",group=%q,outcome="failed",peer=%q} 0`, p2pRelayGroup, idDev),
		fmt.Sprintf(`livesync_relay_p2p_chunks_total{db="vault",direction="in",group=%q,peer=%q} %d`, p2pRelayGroup, idDev, nchunks),
		fmt.Sprintf(`livesync_relay_p2p_hunt_max_in_flight{db="vault",group=%q,peer=%q} 1`, p2pRelayGroup, idDev),
	} {
		if !strings.Contains(string(m), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if out := host.stop(t); !strings.Contains(out, "usePathObfuscation is false there, true here") {
		t.Errorf("the desktop's own sync with the relay was not refused, so replication could have brought the chunks:\n%s", out)
	}
	if out := r.p.output(); strings.Contains(out, p2pRelayGroupPass) || strings.Contains(out, p2pRelayVaultPass) {
		t.Fatal("the relay printed a passphrase")
	}
}

// pushMetadataOnly sends the note's metadata, encoded with the relay
// database's salt, to the relay with _bulk_docs new_edits=false, as a
// plugin's replication does, without its chunks. It returns the
// metadata's id and the number of chunks it names.
func pushMetadataOnly(t *testing.T, r *p2pRelay, settings *livesync.Settings, path, text string) (string, int) {
	t.Helper()
	code, raw := r.do(t, "GET", "/vault/_local/"+url.PathEscape(negotiate.SyncParametersLocalID), "")
	if code != 200 {
		t.Fatalf("the relay's sync parameters: %d %s", code, raw)
	}
	salt, err := negotiate.SaltOf(raw)
	if err != nil || salt == nil {
		t.Fatalf("the relay's salt: %v", err)
	}
	codec, err := livesync.New(livesync.Config{Settings: *settings, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	m, chunks, err := codec.FileDocs(path, []byte(text), 1700000000000, 1700000000000)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := codec.EncodeRemote(m.Doc())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(meta)
	sum := md5.Sum(body)
	h := hex.EncodeToString(sum[:])
	meta["_rev"] = json.RawMessage(`"1-` + h + `"`)
	meta["_revisions"] = json.RawMessage(fmt.Sprintf(`{"start":1,"ids":[%q]}`, h))
	req, _ := json.Marshal(map[string]any{"docs": []livesync.Doc{meta}, "new_edits": false})
	hr, _ := http.NewRequest("POST", r.p.url+"/vault/_bulk_docs", bytes.NewReader(req))
	hr.SetBasicAuth("admin", p2pRelayAdminPass)
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || strings.Contains(string(b), `"error"`) {
		t.Fatalf("_bulk_docs: %d %s", resp.StatusCode, b)
	}
	return meta.ID(), len(chunks)
}
