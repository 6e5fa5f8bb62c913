package main

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/adapters/p2p/trysteronet"
	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
	"github.com/livesync-go/livesync-go/engine/trystero"
)

// LiveSync's own peer-to-peer mode, as the plugin speaks it: the devices
// of a group meet in a Trystero room (Nostr signalling, WebRTC data
// channels) and replicate with LiveSync's RPC methods. p2p-peers,
// p2p-sync and p2p-host behave as the plugin's own command-line client's
// (plugin src/apps/cli/commands/p2p.ts): headless, so a peer is served
// only if an auto-accept pattern names its device. The "livesync p2p"
// commands (p2p.go) are this CLI's libp2p sync groups, another protocol.

// Environment variables of the LiveSync P2P commands. The room
// passphrase is the plugin's P2P_passphrase; the TURN credential its
// P2P_turnCredential. LIVESYNC_P2P_LOOPBACK_ONLY=1 gathers ICE
// candidates on loopback only, with no STUN: two peers on one machine
// without a network, as the tests run them.
const (
	lsp2pRoomPassphraseEnv = "LIVESYNC_P2P_ROOM_PASSPHRASE"
	lsp2pTURNCredentialEnv = "LIVESYNC_P2P_TURN_CREDENTIAL"
	lsp2pLoopbackEnv       = "LIVESYNC_P2P_LOOPBACK_ONLY"
)

// lsp2pDecisionsFile holds the lasting accept/deny decisions by device
// name, beside the replica (the plugin's "p2p-device-decisions").
const lsp2pDecisionsFile = "livesync-p2p-decisions.json"

// Default waits: p2p-peers listens that long; p2p-sync waits that long
// for its peer to appear.
const (
	lsp2pPeersWait = 10 * time.Second
	lsp2pSyncWait  = 30 * time.Second
)

// livesyncP2PConfig is the configuration's [livesync_p2p] table; each key
// is named after the plugin setting it stands for.
type livesyncP2PConfig struct {
	Group              string          `toml:"group"`                // P2P_roomID
	RoomPassphraseFile string          `toml:"room_passphrase_file"` // P2P_passphrase
	Relays             []string        `toml:"relays"`               // P2P_relays
	AppID              string          `toml:"app_id"`               // P2P_AppID
	DeviceName         string          `toml:"device_name"`          // the device's P2P name (p2p_device_name)
	AutoAccept         string          `toml:"auto_accept"`          // P2P_AutoAcceptingPeers
	AutoDeny           string          `toml:"auto_deny"`            // P2P_AutoDenyingPeers
	Follow             string          `toml:"follow"`               // P2P_AutoWatchPeers: p2p-host pulls when they announce changes
	Broadcast          bool            `toml:"broadcast"`            // P2P_AutoBroadcast: p2p-host announces its changes
	STUN               []string        `toml:"stun"`                 // default: trystero's list; [] for none
	TURN               lsp2pTURNConfig `toml:"turn"`
	RelayOnly          bool            `toml:"relay_only"`      // P2P_connectionPath = "relay"
	PassphraseFile     string          `toml:"passphrase_file"` // the vault's E2EE passphrase
	// PluginSettingsFile is the plugin's settings (data.json, or a
	// Setup URI): the P2P_* keys this table leaves unset come from it.
	PluginSettingsFile string `toml:"plugin_settings_file"`
}

// lsp2pTURNConfig is the [livesync_p2p.turn] table: the TURN servers and
// their one user name and credential, as the plugin has them.
type lsp2pTURNConfig struct {
	URLs           []string `toml:"urls"`            // P2P_turnServers
	Username       string   `toml:"username"`        // P2P_turnUsername
	CredentialFile string   `toml:"credential_file"` // P2P_turnCredential
}

// check validates the table; the error completes "[livesync_p2p] ...".
func (c livesyncP2PConfig) check() error {
	if err := checkRelays(c.Relays); err != nil {
		return fmt.Errorf("relays: %w", err)
	}
	if err := checkPatterns(c.AutoAccept, c.AutoDeny); err != nil {
		return err
	}
	if _, err := livesyncrpc.ParsePatterns(c.Follow); err != nil {
		return fmt.Errorf("follow: %v", err)
	}
	if err := checkICE(c.STUN, "stun:", "stuns:"); err != nil {
		return fmt.Errorf("stun: %w", err)
	}
	if err := checkICE(c.TURN.URLs, "turn:", "turns:", "stun:", "stuns:"); err != nil {
		return fmt.Errorf("turn urls: %w", err)
	}
	return nil
}

// expand resolves the table's file paths against the configuration's
// folder.
func (c *livesyncP2PConfig) expand(e *cliEnv, dir string) {
	c.RoomPassphraseFile = e.expandPath(c.RoomPassphraseFile, dir)
	c.TURN.CredentialFile = e.expandPath(c.TURN.CredentialFile, dir)
	c.PassphraseFile = e.expandPath(c.PassphraseFile, dir)
	c.PluginSettingsFile = e.expandPath(c.PluginSettingsFile, dir)
}

func checkRelays(relays []string) error {
	for _, u := range relays {
		if err := checkNostrURL(u); err != nil {
			return err
		}
	}
	return nil
}

func checkPatterns(accept, deny string) error {
	if _, err := livesyncrpc.ParsePatterns(accept); err != nil {
		return fmt.Errorf("auto_accept: %v", err)
	}
	if _, err := livesyncrpc.ParsePatterns(deny); err != nil {
		return fmt.Errorf("auto_deny: %v", err)
	}
	return nil
}

// checkICE refuses a server URL without one of the schemes.
func checkICE(urls []string, schemes ...string) error {
	for _, u := range urls {
		ok := false
		for _, s := range schemes {
			ok = ok || strings.HasPrefix(strings.ToLower(u), s)
		}
		if !ok {
			return fmt.Errorf("%q is not a %s URL", u, strings.Join(schemes, " or "))
		}
	}
	return nil
}

// commaList is a repeatable flag whose values may also be comma lists,
// as the plugin's settings are.
type commaList []string

func (l *commaList) String() string { return strings.Join(*l, ",") }
func (l *commaList) Set(v string) error {
	*l = append(*l, splitComma(v)...)
	return nil
}

// splitComma splits a comma list, dropping blanks.
func splitComma(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// lsp2pFlags are the flags of p2p-peers, p2p-sync and p2p-host.
type lsp2pFlags struct {
	group, appID, device     string
	autoAccept, autoDeny     string
	relays, stun, turn       commaList
	turnUser, turnCredFile   string
	roomPassFile             string
	pluginSettings           string
	relayOnly                bool
	wait                     time.Duration
	fs                       *flag.FlagSet
	withWait, withAutoAccept bool
}

// addLSP2PFlags adds the flags; wait is the --wait default (0: no
// --wait), accept adds --auto-accept and --auto-deny.
func addLSP2PFlags(fs *flag.FlagSet, f *lsp2pFlags, wait time.Duration, accept bool) {
	f.fs = fs
	fs.StringVar(&f.group, "group", "", "the group id, the plugin's P2P_roomID (default: group in [livesync_p2p])")
	fs.StringVar(&f.roomPassFile, "room-passphrase-file", "", "file holding the room passphrase, the plugin's P2P_passphrase (default: $"+lsp2pRoomPassphraseEnv+", room_passphrase_file, or a prompt)")
	fs.StringVar(&f.pluginSettings, "plugin-settings", "", "the plugin's settings, its data.json or a Setup URI (with $"+lsp2pSetupPassphraseEnv+"), in a file: the P2P_* settings that neither flags nor [livesync_p2p] set come from it")
	fs.Var(&f.relays, "relay", "a Nostr relay for signalling (ws:// or wss://), the plugin's P2P_relays; repeatable or a comma list (default: relays in [livesync_p2p])")
	fs.StringVar(&f.appID, "app-id", "", "the plugin's P2P_AppID (default: app_id, else "+trystero.DefaultAppID+")")
	fs.StringVar(&f.device, "device", "", "this device's name among the peers (default: device_name in [livesync_p2p], else the vault's folder name, as the plugin falls back on its vault's name)")
	fs.Var(&f.stun, "stun", "a STUN server URL, repeatable (default: stun in [livesync_p2p], else trystero's list)")
	fs.Var(&f.turn, "turn", "a TURN server URL (turn: or turns:), the plugin's P2P_turnServers; repeatable or a comma list")
	fs.StringVar(&f.turnUser, "turn-username", "", "the TURN servers' user name, the plugin's P2P_turnUsername")
	fs.StringVar(&f.turnCredFile, "turn-credential-file", "", "file holding the TURN credential, the plugin's P2P_turnCredential (default: $"+lsp2pTURNCredentialEnv+" or credential_file in [livesync_p2p.turn])")
	fs.BoolVar(&f.relayOnly, "relay-only", false, "connect through the TURN servers only (the plugin's P2P_connectionPath \"relay\")")
	if accept {
		f.withAutoAccept = true
		fs.StringVar(&f.autoAccept, "auto-accept", "", "the peers to serve: device names, comma-separated, exact or ~regex, case-insensitive (the plugin's P2P_AutoAcceptingPeers; default: auto_accept)")
		fs.StringVar(&f.autoDeny, "auto-deny", "", "the peers never to serve, in the same form (the plugin's P2P_AutoDenyingPeers; default: auto_deny)")
	}
	if wait > 0 {
		f.withWait = true
		fs.DurationVar(&f.wait, "wait", wait, "how long to wait for the peers")
	}
}

// lsp2pSettings are the resolved settings of one session.
type lsp2pSettings struct {
	room       trysteronet.Config // without Password until roomPassphrase
	device     string             // "" until the replica names it
	autoAccept string
	autoDeny   string
	wait       time.Duration
	dir        string // the replica's folder (decisions)
	cfg        livesyncP2PConfig
	plugin     pluginP2P // the plugin's settings, if given
}

// lsp2pSettings resolves the flags against [livesync_p2p]: a flag the
// command line sets wins.
func (c *command) lsp2pSettings(f *lsp2pFlags) (lsp2pSettings, error) {
	cfg, err := c.config()
	if err != nil {
		return lsp2pSettings{}, err
	}
	t := cfg.LiveSyncP2P
	var plugin pluginP2P
	if path := cmpOr(f.pluginSettings, t.PluginSettingsFile); path != "" {
		if plugin, err = c.loadPluginSettings(path); err != nil {
			return lsp2pSettings{}, err
		}
		t = plugin.under(t)
		if err := t.check(); err != nil {
			return lsp2pSettings{}, usageError{fmt.Sprintf("the plugin's settings in %s: %v", path, err)}
		}
	}
	s := lsp2pSettings{cfg: t, plugin: plugin, wait: f.wait, device: cmpOr(f.device, t.DeviceName),
		autoAccept: t.AutoAccept, autoDeny: t.AutoDeny}
	if flagSet(f.fs, "auto-accept") {
		s.autoAccept = f.autoAccept
	}
	if flagSet(f.fs, "auto-deny") {
		s.autoDeny = f.autoDeny
	}
	r := &s.room
	r.RoomID = cmpOr(f.group, t.Group)
	r.AppID = cmpOr(f.appID, cmpOr(t.AppID, trystero.DefaultAppID))
	r.Relays = pick(f.relays, t.Relays)
	r.STUN = t.STUN
	if len(f.stun) > 0 {
		r.STUN = f.stun
	}
	r.RelayOnly = t.RelayOnly
	if flagSet(f.fs, "relay-only") {
		r.RelayOnly = f.relayOnly
	}
	if err := s.check(f); err != nil {
		return s, err
	}
	if turn := pick(f.turn, t.TURN.URLs); len(turn) > 0 {
		cred, err := c.turnCredential(f, t, plugin)
		if err != nil {
			return s, err
		}
		r.TURN = []trysteronet.ICEServer{{URLs: turn, Username: cmpOr(f.turnUser, t.TURN.Username), Credential: cred}}
	}
	if r.RelayOnly && len(r.TURN) == 0 {
		return s, usageError{"--relay-only (relay_only) connects through TURN servers only: give --turn turn:host:3478 (or urls in [livesync_p2p.turn])"}
	}
	if v := c.getenv(lsp2pLoopbackEnv); v == "1" || v == "true" {
		r.LoopbackOnly, r.STUN = true, []string{}
	}
	r.Logger = c.log
	if s.dir, err = c.replicaDir(); err != nil {
		return s, err
	}
	return s, nil
}

// check refuses settings that cannot join a room.
func (s *lsp2pSettings) check(f *lsp2pFlags) error {
	r := s.room
	switch {
	case r.RoomID == "":
		return usageError{"no group: give --group ID (the plugin's Group ID, P2P_roomID), or set group in the configuration's [livesync_p2p] table"}
	case len(r.Relays) == 0:
		return usageError{"no signalling relay: give --relay wss://relay.example (the plugin's P2P_relays; its default is wss://exp-relay.vrtmrz.net/), or relays in the configuration's [livesync_p2p] table"}
	case f.withWait && s.wait <= 0:
		return usageError{"--wait must be positive"}
	}
	if err := checkRelays(r.Relays); err != nil {
		return usageError{"--relay: " + err.Error()}
	}
	if err := checkICE(r.STUN, "stun:", "stuns:"); err != nil {
		return usageError{"--stun: " + err.Error()}
	}
	if err := checkICE(f.turn, "turn:", "turns:", "stun:", "stuns:"); err != nil {
		return usageError{"--turn: " + err.Error()}
	}
	if err := checkPatterns(s.autoAccept, s.autoDeny); err != nil {
		return usageError{strings.Replace(strings.Replace(err.Error(), "auto_accept", "--auto-accept", 1), "auto_deny", "--auto-deny", 1)}
	}
	return nil
}

// turnCredential reads the TURN credential: --turn-credential-file,
// $LIVESYNC_P2P_TURN_CREDENTIAL, then credential_file in
// [livesync_p2p.turn] ("" if none).
func (c *command) turnCredential(f *lsp2pFlags, t livesyncP2PConfig, plugin pluginP2P) (string, error) {
	p, err := c.secret(secretSource{what: "TURN credential", file: f.turnCredFile, envVar: lsp2pTURNCredentialEnv,
		configFile: t.TURN.CredentialFile})
	return cmpOr(p, plugin.TURNCredential), err
}

// roomPassphrase resolves the room passphrase (the plugin's
// P2P_passphrase): $LIVESYNC_P2P_ROOM_PASSPHRASE,
// --room-passphrase-file, room_passphrase_file, then a prompt. It
// returns trystero's room password made from it.
func (c *command) roomPassword(f *lsp2pFlags, s lsp2pSettings) (string, error) {
	p := c.getenv(lsp2pRoomPassphraseEnv)
	var err error
	if p == "" {
		p, err = c.secret(secretSource{what: "room passphrase", file: f.roomPassFile, configFile: s.cfg.RoomPassphraseFile})
	}
	p = cmpOr(p, s.plugin.Passphrase)
	if p == "" && err == nil {
		p, err = c.secret(secretSource{what: "room passphrase", prompt: "Room passphrase (the plugin's P2P_passphrase): "})
	}
	if err != nil {
		return "", err
	}
	if p == "" {
		return "", usageError{"the room needs its passphrase (the plugin's P2P_passphrase): set $" + lsp2pRoomPassphraseEnv + ", or give --room-passphrase-file (or room_passphrase_file in [livesync_p2p])"}
	}
	return trystero.RoomPassword(p), nil
}

// vaultPassphrase resolves the vault's E2EE passphrase:
// --passphrase-insecure-arg, --passphrase-file, $LIVESYNC_PASSPHRASE,
// passphrase_file in [livesync_p2p], then (if prompt) a prompt. "" if
// none.
func (c *command) vaultPassphrase(s lsp2pSettings, prompt bool) (string, error) {
	p, err := c.secret(secretSource{what: "passphrase", insecureArg: c.cf.passphraseArg, file: c.cf.passphraseFile,
		envVar: "LIVESYNC_PASSPHRASE", configFile: s.cfg.PassphraseFile})
	p = cmpOr(p, s.plugin.VaultPassphrase)
	if p != "" || err != nil || !prompt {
		return p, err
	}
	return c.secret(secretSource{what: "passphrase", prompt: "Vault passphrase: "})
}

// decisionsPath is the decisions file beside the replica.
func (s lsp2pSettings) decisionsPath() string { return filepath.Join(s.dir, lsp2pDecisionsFile) }

// relayHosts names the relays without paths or credentials, for
// messages.
func (s lsp2pSettings) relayHosts() string {
	var hosts []string
	for _, r := range s.room.Relays {
		if u, err := url.Parse(r); err == nil {
			hosts = append(hosts, u.Scheme+"://"+u.Host)
		}
	}
	return strings.Join(hosts, ", ")
}

// errNoVaultToServe is p2p-host's refusal of a replica without a vault.
var errNoVaultToServe = errors.New("holds no vault yet, so there is nothing to serve: put a file, pull from a remote, or p2p-sync from a peer first")
