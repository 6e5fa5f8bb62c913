package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
