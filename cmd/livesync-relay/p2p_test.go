package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/engine"
)

const (
	p2pTestNotesPass = "family-group-secret-passphrase"
	p2pTestWorkPass  = "office-group-secret-passphrase"
)

// p2pTestHost is a loopback host with a fresh identity.
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

// startP2P starts a relay whose databases "notes" and "work" each join
// a group: phone is approved in notes/family, laptop in work/office.
func startP2P(t *testing.T, phone, laptop peer.ID) *running {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "relay.toml")
	text := fmt.Sprintf(`
[[databases]]
name = "notes"
[[databases.p2p]]
group = "family"
passphrase_env = "NOTES_GROUP"
approved = [{peer = %q, device = "phone"}]

[[databases]]
name = "work"
[[databases.p2p]]
group = "office"
passphrase_env = "WORK_GROUP"
device = "office relay"
approved = [{peer = %q, device = "laptop"}]

[p2p]
listen = ["/ip4/127.0.0.1/tcp/0"]
circuit_relay = false
`, phone, laptop)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{envAdminPassword: "test-admin-password", "NOTES_GROUP": p2pTestNotesPass, "WORK_GROUP": p2pTestWorkPass}
	rn := start(t, []string{"--data-dir", filepath.Join(dir, "data"), "--config", cfg}, env)
	rn.user, rn.pass = defaultAdminName, env[envAdminPassword]
	// The groups join once the relay serves (onReady comes first).
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for _, g := range rn.r.p2p.groups {
		for g.group() == nil {
			if time.Now().After(deadline) {
				t.Fatalf("group %s/%s never joined:\n%s", g.db, g.name, rn.out)
			}
			<-tick.C
		}
	}
	return rn
}

// relayRemote reaches the relay's host from h.
func relayRemote(rn *running, h host.Host, group string) *p2p.Remote {
	rh := rn.r.p2p.host
	return p2p.NewRemote(h, peer.AddrInfo{ID: rh.ID(), Addrs: rh.Addrs()}, p2p.RemoteOptions{Group: group})
}

// refusedAfterRevoke asks r for its info until it answers other than
// with a transport error: the relay closes a revoked peer's connections,
// so a request racing that close fails on the closing connection (a
// retryable error) and the next one dials anew.
func refusedAfterRevoke(ctx context.Context, r *p2p.Remote) error {
	var err error
	for range 20 {
		_, err = r.Endpoint().Info(ctx)
		var ee *engine.Error
		if !errors.As(err, &ee) || ee.Stage != engine.StageTransport {
			return err
		}
	}
	return err
}

// One host serves both groups: each peer's streams reach the database of
// the group that approved it; a stranger is refused, noted pending and
// approved or revoked through the admin API; /status shows the groups
// without their passphrases; /_nostr answers.
func TestP2PRelayGroups(t *testing.T) {
	ctx := t.Context()
	phone, laptop, stranger := p2pTestHost(t), p2pTestHost(t), p2pTestHost(t)
	rn := startP2P(t, phone.ID(), laptop.ID())

	for h, want := range map[host.Host]string{phone: "notes", laptop: "work"} {
		info, err := relayRemote(rn, h, "g").Endpoint().Info(ctx)
		if err != nil || info.Name != want {
			t.Fatalf("peer approved for %s reached %q: %v", want, info.Name, err)
		}
	}
	// A peer's push goes through the hold-back: metadata without its
	// chunks is held, for the group's peers as one user.
	meta, _ := note(t, plainCodec(t), "held/over-p2p.md", "chunks never sent")
	mb, _ := json.Marshal(meta)
	if res, err := relayRemote(rn, phone, "family").Endpoint().BulkDocs(ctx, []json.RawMessage{mb}); err != nil || len(res) > 0 && res[0].Error != "" {
		t.Fatalf("push over p2p: %v %+v", err, res)
	}
	if d := rn.status().db(t, "notes"); d.HeldDocuments != 1 || d.Holdback.HeldByUser["p2p:family"] != 1 {
		t.Fatalf("held after a p2p push: %d, by user %v", d.HeldDocuments, d.Holdback.HeldByUser)
	}

	sr := relayRemote(rn, stranger, "family")
	if _, err := sr.Endpoint().Info(ctx); !errors.Is(err, p2p.ErrRefused) {
		t.Fatalf("a stranger: %v, want ErrRefused", err)
	}

	st := rn.status()
	notes, work := st.db(t, "notes").P2P, st.db(t, "work").P2P
	if len(notes) != 1 || len(work) != 1 || notes[0].Group != "family" || work[0].Group != "office" ||
		notes[0].PeerID != rn.r.p2p.host.ID().String() || work[0].PeerID != notes[0].PeerID || len(notes[0].Addrs) == 0 {
		t.Fatalf("/status p2p: %+v %+v", notes, work)
	}
	if len(notes[0].Pending) != 1 || notes[0].Pending[0].ID != stranger.ID().String() || len(work[0].Pending) != 0 {
		t.Fatalf("pending: %+v / %+v", notes[0].Pending, work[0].Pending)
	}
	raw := rn.admin("GET", "/status", nil, 200)
	for _, secret := range []string{p2pTestNotesPass, p2pTestWorkPass} {
		if strings.Contains(string(raw), secret) || strings.Contains(rn.out.String(), secret) {
			t.Fatal("a group passphrase is in /status or the log")
		}
	}

	// Approve the stranger in family: served at once, from notes.
	peers := "/_p2p/notes/family/peers/" + stranger.ID().String()
	if code, _ := rn.do("PUT", peers, "", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("approve without credentials: %d", code)
	}
	rn.admin("PUT", peers, map[string]string{"device": "tablet"}, 200)
	if info, err := sr.Endpoint().Info(ctx); err != nil || info.Name != "notes" {
		t.Fatalf("after approval: %q %v", info.Name, err)
	}
	var g p2pStatus
	if err := json.Unmarshal(rn.admin("GET", "/_p2p/notes/family", nil, 200), &g); err != nil || len(g.Pending) != 0 {
		t.Fatalf("group after approval: %+v %v", g, err)
	}
	// A peer is approved in one group of the relay.
	rn.admin("PUT", "/_p2p/work/office/peers/"+stranger.ID().String(), nil, http.StatusConflict)
	rn.admin("PUT", "/_p2p/work/nope/peers/"+stranger.ID().String(), nil, http.StatusNotFound)
	rn.admin("PUT", "/_p2p/work/office/peers/12D3KooWnope", nil, http.StatusBadRequest)
	rn.admin("PUT", "/_p2p/work/office/peers/"+stranger.ID().String(), "not json", http.StatusBadRequest)

	// Revoke: refused again; the book file keeps the change.
	rn.admin("DELETE", peers, nil, 200)
	if err := refusedAfterRevoke(ctx, sr); !errors.Is(err, p2p.ErrRefused) {
		t.Fatalf("after revocation: %v, want ErrRefused", err)
	}
	book, err := p2p.OpenPeerBook(bookPath(rn.r.s.dataDir, "notes", "family"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := book.Allow().Device(stranger.ID()); ok {
		t.Fatal("the revoked peer is approved in the book file")
	}
	if _, ok := book.Allow().Device(phone.ID()); !ok {
		t.Fatal("the configured approval is not in the book file")
	}

	// The discovery relay answers NIP-11 without credentials.
	req, _ := http.NewRequest("GET", rn.url+nostrPath, nil)
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var nip11 struct {
		Name string `json:"name"`
	}
	json.NewDecoder(resp.Body).Decode(&nip11)
	resp.Body.Close()
	if resp.StatusCode != 200 || nip11.Name == "" {
		t.Fatalf("NIP-11 at %s: %d %+v", nostrPath, resp.StatusCode, nip11)
	}

	_, metrics := rn.do("GET", "/metrics", rn.user, rn.pass, nil)
	for _, want := range []string{
		`livesync_relay_p2p_pending_peers{db="notes",group="family"} 1`,
		`livesync_relay_p2p_peers_approved{db="work",group="office"} 1`,
		`livesync_relay_p2p_documents_total{db="notes",direction="out",group="family",peer="` + phone.ID().String() + `"} 0`,
		`livesync_relay_nostr_connections `,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code := rn.stop(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, rn.out)
	}
}

// Without groups the relay starts no host and mounts no /_p2p; [nostr]
// enabled = true serves discovery alone.
func TestNostrWithoutGroups(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "relay.toml")
	if err := os.WriteFile(cfg, []byte("[nostr]\nenabled = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rn := startAdmin(t, filepath.Join(dir, "data"), "--config", cfg)
	if rn.r.p2p.host != nil || len(rn.r.p2p.groups) != 0 || rn.r.p2p.nostr == nil {
		t.Fatalf("runtime %+v", rn.r.p2p)
	}
	req, _ := http.NewRequest("GET", rn.url+nostrPath, nil)
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("NIP-11: %d", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", p2p.IdentityFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an identity without groups: %v", err)
	}
}
