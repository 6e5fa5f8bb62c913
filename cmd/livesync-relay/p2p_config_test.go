package main

import (
	"crypto/rand"
	"slices"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// testPeerID returns a fresh libp2p peer id.
func testPeerID(t *testing.T) peer.ID {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestP2PConfigResolves(t *testing.T) {
	laptop, phone := testPeerID(t), testPeerID(t)
	text := `
[p2p]
listen = ["/ip4/127.0.0.1/tcp/0"]
identity_file = "keys/relay.key"
circuit_relay = false
announce_addrs = ["/ip4/203.0.113.7/tcp/4001"]

[nostr]
max_events = 500
events_per_minute = 30
forward_ephemeral = true

[[databases]]
name = "notes"

[[databases.p2p]]
group = "family"
passphrase_env = "GROUP_PASS"
approved = [{peer = "` + laptop.String() + `", device = "laptop"}, {peer = "` + phone.String() + `"}]

[[databases.p2p]]
group = "work"
passphrase_env = "WORK_PASS"
nostr_relays = ["wss://nostr.example.com", "self"]
device = "home server"
`
	c, err := parseConfig(text, "/etc/relay/relay.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	s, err := resolve(c, flagValues{}, envOf(map[string]string{"GROUP_PASS": "family secret", "WORK_PASS": "work secret"}))
	if err != nil {
		t.Fatal(err)
	}
	p := s.p2p
	if !p.nostr || p.circuitRelay || p.identityPath != "/etc/relay/keys/relay.key" || !slices.Equal(p.listen, []string{"/ip4/127.0.0.1/tcp/0"}) ||
		len(p.announceAddrs) != 1 || p.nostrLimits.MaxEvents != 500 || p.nostrLimits.EventsPerMinute != 30 || !p.nostrLimits.ForwardEphemeral {
		t.Fatalf("p2p settings %+v", p)
	}
	if len(p.groups) != 2 {
		t.Fatalf("groups %+v", p.groups)
	}
	g := p.groups[0]
	if g.db != "notes" || g.group != "family" || g.passphrase != "family secret" || g.device != defaultP2PDevice ||
		!slices.Equal(g.relays, []string{selfNostr}) || len(g.approved) != 2 || g.approved[0].id != laptop ||
		g.approved[0].device != "laptop" || g.approved[1].id != phone {
		t.Errorf("family %+v", g)
	}
	if w := p.groups[1]; w.device != "home server" || !slices.Equal(w.relays, []string{"wss://nostr.example.com", selfNostr}) {
		t.Errorf("work %+v", w)
	}
}

func TestP2PConfigDefaults(t *testing.T) {
	s, err := resolve(&fileConfig{}, flagValues{}, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.p2p.nostr || len(s.p2p.groups) != 0 || !s.p2p.circuitRelay || !slices.Equal(s.p2p.listen, defaultP2PListen) {
		t.Fatalf("no configuration: %+v", s.p2p)
	}
	c, err := parseConfig("[nostr]\nenabled = true", "t.toml")
	if err != nil || c.validate() != nil {
		t.Fatal(err)
	}
	if s, err = resolve(c, flagValues{}, envOf(nil)); err != nil || !s.p2p.nostr {
		t.Fatalf("a Nostr relay without groups: %v %+v", err, s.p2p)
	}
}

func TestP2PConfigErrors(t *testing.T) {
	id := testPeerID(t).String()
	grp := func(body string) string {
		return "[[databases]]\nname = \"v\"\n[[databases.p2p]]\ngroup = \"g\"\n" + body
	}
	pass := "passphrase_env = \"P\"\n"
	for _, tc := range []struct{ name, text, want string }{
		{"unknown group key", grp(pass + "passphrase = \"x\""), "databases.p2p.passphrase"},
		{"unknown p2p key", "[p2p]\nport = 4001", "p2p.port"},
		{"unknown nostr key", "[nostr]\nkinds = [1]", "nostr.kinds"},
		{"no passphrase", grp(""), "discovery passphrase with passphrase_file or passphrase_env"},
		{"two passphrases", grp(pass + "passphrase_file = \"f\""), "not both"},
		{"group name", "[[databases]]\nname = \"v\"\n[[databases.p2p]]\ngroup = \"../x\"\n" + pass, "group \"../x\""},
		{"group twice", grp(pass) + "[[databases.p2p]]\ngroup = \"g\"\n" + pass, "p2p group \"g\" is listed twice"},
		{"listen", "[p2p]\nlisten = [\"0.0.0.0:4001\"]", "p2p.listen \"0.0.0.0:4001\": not a multiaddr"},
		{"announce", "[p2p]\nannounce_addrs = [\"example.com\"]", "p2p.announce_addrs"},
		{"nostr url", grp(pass + "nostr_relays = [\"https://nostr.example.com\"]"), "want a ws:// or wss:// URL"},
		{"self without nostr", grp(pass+"nostr_relays = [\"self\"]\n") + "[nostr]\nenabled = false", "[nostr] enabled = false"},
		{"no relays without nostr", grp(pass) + "[nostr]\nenabled = false", "nostr_relays is empty"},
		{"self with TLS", "[tls]\ncert_file = \"c\"\nkey_file = \"k\"\n" + grp(pass), "list the relay's public wss:// URL"},
		{"bad peer", grp(pass + "approved = [{peer = \"12D3KooWnope\", device = \"x\"}]"), "is not a libp2p peer id"},
		{"unknown approved key", grp(pass + "approved = [{id = \"" + id + "\"}]"), "approved.id"},
		{"peer twice", grp(pass + "approved = [{peer = \"" + id + "\"}, {peer = \"" + id + "\"}]"), "listed twice"},
		{"peer in two groups", grp(pass+"approved = [{peer = \""+id+"\"}]\n") + "[[databases.p2p]]\ngroup = \"h\"\n" + pass +
			"approved = [{peer = \"" + id + "\"}]", "approved in group v/g too"},
		{"long device", grp(pass + "device = \"" + strings.Repeat("d", 129) + "\""), "device is longer than 128 bytes"},
		{"nostr limit", "[nostr]\nmax_connections = -1", "nostr.max_connections is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig(tc.text, "test.toml")
			if err == nil {
				err = c.validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// The group passphrase is read like the other secrets and never shows in
// an error.
func TestP2PPassphraseMissing(t *testing.T) {
	c, err := parseConfig("[[databases]]\nname = \"v\"\n[[databases.p2p]]\ngroup = \"g\"\npassphrase_env = \"GROUP_PASS\"\n", "t.toml")
	if err != nil || c.validate() != nil {
		t.Fatal(err)
	}
	_, err = resolve(c, flagValues{}, envOf(nil))
	if err == nil || !strings.Contains(err.Error(), `p2p group "g": the group passphrase variable GROUP_PASS is empty or unset`) {
		t.Fatalf("error %v", err)
	}
}

// relay.example.toml documents the peer-to-peer keys; it parses and
// validates (TestExampleConfigParsesAndValidates), and its group is read
// as written.
func TestExampleConfigP2P(t *testing.T) {
	c, err := loadConfig("relay.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	g := c.Databases[1].P2P
	if len(g) != 1 || g[0].Group != "bob-devices" || g[0].PassphraseEnv == "" || len(g[0].Approved) != 1 ||
		!slices.Equal(g[0].NostrRelays, []string{"wss://relay.example.com:6984/_nostr"}) {
		t.Fatalf("bob-notes p2p %+v", g)
	}
	if !c.nostrEnabled() || c.Nostr.MaxEvents != 10000 || len(c.P2P.Listen) != 2 || c.P2P.CircuitRelay == nil || !*c.P2P.CircuitRelay {
		t.Fatalf("[p2p] %+v [nostr] %+v", c.P2P, c.Nostr)
	}
}
