package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine/trystero"
)

func TestLiveSyncP2PConfigResolves(t *testing.T) {
	text := `
[[databases]]
name = "notes"
passphrase_env = "VAULT_PASS"

[[databases.livesync_p2p]]
group = "my vault room"
room_passphrase_env = "ROOM_PASS"
auto_accept = "laptop, ~^phone"

[[databases.livesync_p2p]]
group = "other"
room_passphrase_file = "room.txt"
app_id = "my-app"
relays = ["wss://nostr.example.com", "self"]
device_name = "home server"
auto_accept = "~.*"
auto_deny = "guest"
stun = []
relay_only = true
broadcast = false
turn = {urls = ["turn:turn.example.com:3478"], username = "u", credential_env = "TURN_CRED"}
`
	c, err := parseConfig(text, "/etc/relay/relay.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if !c.nostrEnabled() || !c.forwardEphemeral() {
		t.Fatalf("a room on /_nostr: nostr %v, forward_ephemeral %v; want both on", c.nostrEnabled(), c.forwardEphemeral())
	}
	c.Databases[0].LiveSyncP2P[1].RoomPassphraseFile = "" // no file in the test: read the variable instead
	c.Databases[0].LiveSyncP2P[1].RoomPassphraseEnv = "ROOM2_PASS"
	s, err := resolve(c, flagValues{}, envOf(map[string]string{"VAULT_PASS": "v", "ROOM_PASS": "room secret", "ROOM2_PASS": "r2", "TURN_CRED": "tc"}))
	if err != nil {
		t.Fatal(err)
	}
	rooms := s.p2p.livesync
	if len(rooms) != 2 || !s.p2p.nostr || !s.p2p.nostrLimits.ForwardEphemeral {
		t.Fatalf("rooms %d, nostr %v, forward %v", len(rooms), s.p2p.nostr, s.p2p.nostrLimits.ForwardEphemeral)
	}
	a, b := rooms[0], rooms[1]
	if a.db != "notes" || a.group != "my vault room" || a.roomPassword != trystero.RoomPassword("room secret") || a.appID != trystero.DefaultAppID ||
		!slices.Equal(a.relays, []string{selfNostr}) || a.device != defaultLSP2PDevice || !a.broadcast || a.stun != nil || a.relayOnly {
		t.Fatalf("first room %+v", a)
	}
	if b.appID != "my-app" || b.device != "home server" || b.broadcast || b.stun == nil || len(b.stun) != 0 || !b.relayOnly ||
		!slices.Equal(b.turnURLs, []string{"turn:turn.example.com:3478"}) || b.turnUser != "u" || b.turnCred != "tc" || b.autoDeny != "guest" {
		t.Fatalf("second room %+v", b)
	}
}

func TestLiveSyncP2PConfigErrors(t *testing.T) {
	room := func(body string) string {
		return "[[databases]]\nname = \"v\"\n[[databases.livesync_p2p]]\ngroup = \"g\"\n" + body
	}
	ok := "room_passphrase_env = \"P\"\nauto_accept = \"laptop\"\n"
	for _, tc := range []struct{ name, text, want string }{
		{"unknown key", room(ok + "passphrase = \"x\""), "databases.livesync_p2p.passphrase"},
		{"no passphrase", room("auto_accept = \"x\""), "room_passphrase_file or room_passphrase_env"},
		{"two passphrases", room(ok + "room_passphrase_file = \"f\""), "not both"},
		{"empty group", "[[databases]]\nname = \"v\"\n[[databases.livesync_p2p]]\ngroup = \"\"\n" + ok, "want the plugin's P2P room id"},
		{"control in group", "[[databases]]\nname = \"v\"\n[[databases.livesync_p2p]]\ngroup = \"a\\nb\"\n" + ok, "want the plugin's P2P room id"},
		{"group twice", room(ok) + "[[databases.livesync_p2p]]\ngroup = \"g\"\n" + ok, "livesync_p2p group \"g\" is listed twice"},
		{"bad accept pattern", room("room_passphrase_env = \"P\"\nauto_accept = \"~(unclosed\""), "auto_accept"},
		{"bad deny pattern", room(ok + "auto_deny = \"~[z-a]\""), "auto_deny"},
		{"no accept", room("room_passphrase_env = \"P\"\n"), "auto_accept is empty"},
		{"relay url", room(ok + "relays = [\"https://nostr.example.com\"]"), "want a ws:// or wss:// Nostr relay URL"},
		{"self without nostr", room(ok) + "[nostr]\nenabled = false", "[nostr] enabled = false"},
		{"self without forwarding", room(ok) + "[nostr]\nforward_ephemeral = false", "forward_ephemeral = false"},
		{"self with TLS", "[tls]\ncert_file = \"c\"\nkey_file = \"k\"\n" + room(ok), "list the relay's public wss:// URL"},
		{"stun url", room(ok + "stun = [\"stun.example.com\"]"), "want a stun: or stuns: URL"},
		{"turn url", room(ok + "turn = {urls = [\"stun:x\"]}"), "want a turn: or turns: URL"},
		{"two credentials", room(ok + "turn = {urls = [\"turn:x\"], credential = \"a\", credential_env = \"B\"}"), "one of credential"},
		{"credential without urls", room(ok + "turn = {username = \"u\"}"), "without urls"},
		{"relay only without turn", room(ok + "relay_only = true"), "needs a TURN server"},
		{"long device", room(ok + "device_name = \"" + strings.Repeat("d", 129) + "\""), "device_name"},
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

// A room on other Nostr relays leaves /_nostr as configured; a room on
// /_nostr with forward_ephemeral = true given is fine.
func TestLiveSyncP2PNostrDefaults(t *testing.T) {
	c, err := parseConfig("[[databases]]\nname = \"v\"\n[[databases.livesync_p2p]]\ngroup = \"g\"\nroom_passphrase_env = \"P\"\nauto_accept = \"x\"\nrelays = [\"wss://n.example.com\"]\n", "t.toml")
	if err != nil || c.validate() != nil {
		t.Fatal(err)
	}
	if c.nostrEnabled() || c.forwardEphemeral() {
		t.Fatalf("no room on /_nostr: nostr %v, forward %v", c.nostrEnabled(), c.forwardEphemeral())
	}
	c, err = parseConfig("[nostr]\nforward_ephemeral = true\n[[databases]]\nname = \"v\"\n[[databases.livesync_p2p]]\ngroup = \"g\"\nroom_passphrase_env = \"P\"\nauto_accept = \"x\"\n", "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.validate(); err != nil || !c.nostrEnabled() || !c.forwardEphemeral() {
		t.Fatalf("validate %v, nostr %v, forward %v", err, c.nostrEnabled(), c.forwardEphemeral())
	}
}

// The room passphrase is read like the other secrets and never shows in
// an error.
func TestLiveSyncP2PPassphraseMissing(t *testing.T) {
	c, err := parseConfig("[[databases]]\nname = \"v\"\n[[databases.livesync_p2p]]\ngroup = \"g\"\nroom_passphrase_env = \"ROOM_PASS\"\nauto_accept = \"x\"\n", "t.toml")
	if err != nil || c.validate() != nil {
		t.Fatal(err)
	}
	_, err = resolve(c, flagValues{}, envOf(nil))
	if err == nil || !strings.Contains(err.Error(), `livesync_p2p group "g": the room passphrase variable ROOM_PASS is empty or unset`) {
		t.Fatalf("error %v", err)
	}
}

// relay.example.toml documents the LiveSync P2P keys, and its room is
// read as written.
func TestExampleConfigLiveSyncP2P(t *testing.T) {
	c, err := loadConfig("relay.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	g := c.Databases[0].LiveSyncP2P
	if len(g) != 1 || g[0].Group != "alice-vault-room" || g[0].RoomPassphraseEnv == "" || g[0].AutoAccept == "" ||
		!slices.Equal(g[0].Relays, []string{"wss://relay.example.com:6984/_nostr"}) || !c.forwardEphemeral() {
		t.Fatalf("alice-notes livesync_p2p %+v", g)
	}
}
