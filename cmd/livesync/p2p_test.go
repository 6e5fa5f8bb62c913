package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

// p2p://GROUP resolves to a p2p remote, on the command line and in the
// configuration; what cannot be a group is a usage error.
func TestResolveP2PRemote(t *testing.T) {
	cfg := &config{Remotes: map[string]*remoteConfig{"peers": {Kind: "p2p", URL: "p2p://home-notes"}}}
	for arg, group := range map[string]string{"p2p://home": "home", "p2p://home/": "home", "P2P://Notes.2": "Notes.2", "peers": "home-notes"} {
		spec, err := resolveRemote(cfg, arg)
		if err != nil || spec.kind != "p2p" || spec.group != group || spec.String() != "p2p://"+group {
			t.Errorf("%q: %+v %v", arg, spec, err)
		}
	}
	for _, arg := range []string{"p2p://", "p2p://a/b", "p2p://a?b", "p2p://u@g"} {
		if _, err := resolveRemote(cfg, arg); !errors.As(err, new(usageError)) {
			t.Errorf("%q: %v, want a usage error", arg, err)
		}
	}
}

func TestLoadP2PConfig(t *testing.T) {
	cfg, err := testEnv(map[string]string{"HOME": t.TempDir()}).loadConfig("config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := resolveRemote(cfg, "peers")
	if err != nil || spec.kind != "p2p" || spec.group != "home-notes" {
		t.Errorf("remote peers: %+v %v", spec, err)
	}
	p := cfg.P2P
	if p.Group != "home-notes" || len(p.NostrRelays) != 2 || len(p.Listen) != 2 || len(p.RelayPeers) != 1 ||
		!filepath.IsAbs(p.PassphraseFile) {
		t.Errorf("[p2p]: %+v", p)
	}
	dir := t.TempDir()
	for name, body := range map[string]string{
		"user on p2p":     "[remote.x]\nurl = \"p2p://g\"\nuser = \"a\"\n",
		"kind without":    "[remote.x]\nkind = \"p2p\"\nurl = \"http://h/db\"\n",
		"bad relay url":   "[p2p]\nnostr_relays = [\"https://relay\"]\n",
		"bad relay peer":  "[p2p]\nrelay_peers = [\"/ip4/1.2.3.4/tcp/1\"]\n",
		"bad group":       "[p2p]\ngroup = \"a/b\"\n",
		"unknown p2p key": "[p2p]\nnostr = [\"wss://r\"]\n",
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".toml")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := testEnv(nil).loadConfig(path); !errors.As(err, new(usageError)) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
}

// The command lines that cannot work are refused before anything is
// opened: p2p flags on other remotes, options peers do not have, p2p://
// where a command needs a server, a group without relays or a name.
func TestP2PCommandLines(t *testing.T) {
	home := t.TempDir()
	store := filepath.Join(t.TempDir(), "store.db")
	env := map[string]string{"HOME": home, "LIVESYNC_P2P_PASSPHRASE": "group secret"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sync", "https://h/db", "--nostr", "ws://127.0.0.1:1"}, "--nostr applies only to p2p://GROUP remotes"},
		{[]string{"pull", "https://h/db", "--listen", "/ip4/0.0.0.0/tcp/4001", "--wait", "1s"}, "--listen, --wait apply only"},
		{[]string{"pull", "p2p://g", "--metadata-only"}, "--metadata-only is not supported"},
		{[]string{"push", "p2p://g", "--rebuild"}, "push --rebuild cannot use p2p://g"},
		{[]string{"sync", "p2p://g", "--watch", "--interval", "5s"}, "--interval applies to journal buckets"},
		{[]string{"sync", "p2p://g", "--store", store}, "no Nostr relay"},
		{[]string{"sync", "p2p://g", "--nostr", "http://relay", "--store", store}, "not a ws:// or wss:// URL"},
		{[]string{"sync", "p2p://g", "--nostr", "ws://r", "--relay-peer", "/ip4/1.2.3.4/tcp/1", "--store", store}, "--relay-peer"},
		{[]string{"sync", "p2p://g", "--nostr", "ws://r", "--wait", "0s", "--store", store}, "--wait must be positive"},
		{[]string{"p2p", "sync", "--nostr", "ws://r", "--store", store}, "no sync group"},
		{[]string{"p2p", "peers", "--group", "a/b", "--nostr", "ws://r", "--store", store}, "holds one of"},
		{[]string{"p2p", "host", "extra"}, "takes no arguments"},
		{[]string{"p2p", "approve", "--store", store}, "takes one peer id"},
		{[]string{"p2p", "approve", "not-a-peer", "--store", store}, "is not a peer id"},
		{[]string{"p2p", "frobnicate"}, "unknown p2p command"},
		{[]string{"p2p"}, "p2p needs a command"},
		{[]string{"doctor", "p2p://g"}, "doctor cannot use p2p://g"},
		{[]string{"unlock", "p2p://g", "--store", store}, "cannot use p2p://g"},
		{[]string{"ls", "--remote", "p2p://g", "--store", store}, "cannot use p2p://g"},
	} {
		code, _, stderr := cli(t, env, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
		if strings.Contains(stderr, "group secret") {
			t.Errorf("%v prints the group passphrase: %q", tc.args, stderr)
		}
	}
}

// The group passphrase: the variable --p2p-passphrase-env names, the
// file flag, [p2p] passphrase_file, then the vault passphrase.
func TestGroupPassphrase(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "group")
	if err := os.WriteFile(file, []byte("from file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(conf, []byte("[p2p]\npassphrase_file = \"group\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		vars map[string]string
		f    p2pFlags
		conf string
		want string
	}{
		{map[string]string{"LIVESYNC_P2P_PASSPHRASE": "env", "LIVESYNC_PASSPHRASE": "vault"}, p2pFlags{}, "", "env"},
		{map[string]string{"OTHER": "named", "LIVESYNC_P2P_PASSPHRASE": "env"}, p2pFlags{passphraseEnv: "OTHER"}, "", "named"},
		{map[string]string{"LIVESYNC_PASSPHRASE": "vault"}, p2pFlags{passphraseFile: file}, "", "from file"},
		{map[string]string{"LIVESYNC_PASSPHRASE": "vault"}, p2pFlags{}, conf, "from file"},
		{map[string]string{"LIVESYNC_PASSPHRASE": "vault"}, p2pFlags{}, "", "vault"},
	} {
		c := testEnv(tc.vars).newCommand("p2p sync", "")
		c.cf.config = tc.conf
		if tc.conf == "" {
			c.cfg = &config{}
		}
		got, err := c.groupPassphrase(tc.f, nil)
		if err != nil || got != tc.want {
			t.Errorf("%v %+v: %q %v, want %q", tc.vars, tc.f, got, err, tc.want)
		}
	}
	c := testEnv(nil).newCommand("p2p sync", "")
	c.cfg = &config{}
	if _, err := c.groupPassphrase(p2pFlags{}, nil); !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), "LIVESYNC_P2P_PASSPHRASE") {
		t.Errorf("no passphrase: %v", err)
	}
}

// id, approve, revoke and pending work on the files beside the replica,
// without the network and without opening the replica.
func TestP2PPeerBookCommands(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	env := map[string]string{"HOME": t.TempDir()}
	storeA, storeB := filepath.Join(dirA, "store.db"), filepath.Join(dirB, "store.db")
	id := func(store string) string {
		t.Helper()
		code, out, stderr := cli(t, env, "p2p", "id", "--store", store)
		if code != 0 {
			t.Fatalf("p2p id: %d %s", code, stderr)
		}
		return strings.TrimSpace(out)
	}
	idA, idB := id(storeA), id(storeB)
	if idA == idB || id(storeA) != idA || !strings.HasPrefix(idA, "12D3KooW") {
		t.Fatalf("ids %q %q", idA, idB)
	}
	if fileExists(storeA) {
		t.Error("p2p id created the replica")
	}
	if code, _, stderr := cli(t, env, "p2p", "approve", idA, "--store", storeA); code != exitUsage || !strings.Contains(stderr, "own peer id") {
		t.Errorf("approving oneself: %d %s", code, stderr)
	}
	code, out, _ := cli(t, env, "p2p", "approve", idB, "--device", "phone", "--store", storeA)
	if code != 0 || !strings.Contains(out, "approved "+idB+" (phone)") {
		t.Errorf("approve: %d %q", code, out)
	}
	code, out, _ = cli(t, env, "p2p", "pending", "--json", "--store", storeA)
	if code != 0 || !strings.Contains(out, `"pending":[]`) {
		t.Errorf("pending: %d %q", code, out)
	}
	code, out, _ = cli(t, env, "p2p", "revoke", idB, "--store", storeA)
	if code != 0 || !strings.Contains(out, "revoked "+idB+" (phone)") {
		t.Errorf("revoke: %d %q", code, out)
	}
	if code, _, stderr := cli(t, env, "p2p", "revoke", idB, "--store", storeA); code != exitUsage || !strings.Contains(stderr, "is not approved here") {
		t.Errorf("revoking again: %d %s", code, stderr)
	}
}

func TestPeerRows(t *testing.T) {
	a, b, c := peerIDs(t, 3)
	seen := []p2p.PeerStatus{
		{PeerEntry: p2p.PeerEntry{ID: a, Device: "announced-a", Addrs: []string{"/ip4/1.2.3.4/tcp/1"}}, Approved: true, Present: true},
		{PeerEntry: p2p.PeerEntry{ID: c, Device: "stranger"}, Present: true},
	}
	approved := []p2p.PeerEntry{{ID: a, Device: "desk"}, {ID: b, Device: "away"}}
	rows := peerRows(seen, approved, nil)
	if len(rows) != 3 || rows[0].id != b || rows[0].online || rows[1].id != a || !rows[1].online || rows[1].device != "desk" ||
		len(rows[1].addrs) != 1 || rows[2].id != c || rows[2].approved || !rows[2].online {
		t.Errorf("rows: %+v", rows)
	}
}

func peerIDs(t *testing.T, n int) (a, b, c peer.ID) {
	t.Helper()
	var ids []peer.ID
	for range n {
		key, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		id, err := peer.IDFromPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids[0], ids[1], ids[2]
}

func TestPrefixWriter(t *testing.T) {
	var b strings.Builder
	w := &prefixWriter{w: &b, prefix: "peer …x: "}
	fmt.Fprintf(w, "pulled 1/2 docs\n")
	fmt.Fprintf(w, "a\nb\n")
	if got, want := b.String(), "peer …x: pulled 1/2 docs\npeer …x: a\npeer …x: b\n"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// A one-shot sync shows a bar on a terminal, after a line naming the
// peer; elsewhere (or live) lines prefixed with the peer's short id.
func TestPeerProgress(t *testing.T) {
	var b strings.Builder
	env := testEnv(nil)
	env.stderr = &b
	env.stderrTerminal = true
	r := &p2pRun{command: env.newCommand("p2p sync", "")}
	if p := r.peerProgress("12D3KooWabcdefgh12345678"); !p.bar || b.String() != "peer …12345678\n" {
		t.Errorf("terminal: bar %v, %q", p.bar, b.String())
	}
	b.Reset()
	r.live = true
	p := r.peerProgress("12D3KooWabcdefgh12345678")
	p.written(replicate.Pull, 3)
	if p.bar || b.String() != "peer …12345678: pulled 3 docs\n" {
		t.Errorf("live: bar %v, %q", p.bar, b.String())
	}
}

// A replica without a vault has nothing to serve; a device that approves
// no peer is told to approve the others first.
func TestP2PNothingToDo(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store.db")
	env := map[string]string{"HOME": t.TempDir(), "LIVESYNC_P2P_PASSPHRASE": "group secret"}
	relay := []string{"--nostr", "ws://127.0.0.1:1", "--store", store}
	code, _, stderr := cli(t, env, append([]string{"sync", "p2p://g", "--wait", "1s"}, relay...)...)
	if code != exitRefused || !strings.Contains(stderr, "approves no peer of group g yet") {
		t.Errorf("sync approving no one: %d %s", code, stderr)
	}
	code, _, stderr = cli(t, env, append([]string{"p2p", "host", "--group", "g"}, relay...)...)
	if code != exitFailed || !strings.Contains(stderr, "holds no vault yet, so there is nothing to serve") {
		t.Errorf("host without a vault: %d %s", code, stderr)
	}
}
