package main

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
	"github.com/livesync-go/livesync-go/engine/trystero"
)

// The relay as a peer of LiveSync's own P2P mode: each
// [[databases.livesync_p2p]] table joins one Trystero room (the plugin's
// P2P_roomID) as an always-on device serving the database to the
// plugin's P2P devices, in the plaintext form they keep locally.

const (
	// defaultLSP2PDevice is the device name the relay advertises in a
	// LiveSync P2P room (the name the plugin's devices see, accept and
	// may watch).
	defaultLSP2PDevice = "relay"
	// maxRoomID bounds a room id (P2P_roomID): it is a /status key and a
	// metric label.
	maxRoomID = 256
)

// lsp2pConfig is one [[databases.livesync_p2p]] table: a LiveSync P2P
// room (the plugin's "P2P" settings) the relay joins for the database.
// relay.example.toml documents each key.
type lsp2pConfig struct {
	// Group is the room id, the plugin's P2P_roomID.
	Group string `toml:"group"`
	// RoomPassphraseFile and RoomPassphraseEnv give the plugin's
	// P2P_passphrase (the room's password is derived from it).
	RoomPassphraseFile string `toml:"room_passphrase_file"`
	RoomPassphraseEnv  string `toml:"room_passphrase_env"`
	// AppID is the plugin's P2P_AppID; "" is its default.
	AppID string `toml:"app_id"`
	// Relays are the Nostr relays of the room's signalling (P2P_relays);
	// empty: "self", this relay's own /_nostr.
	Relays []string `toml:"relays"`
	// DeviceName is the advertised name; "" is defaultLSP2PDevice.
	DeviceName string `toml:"device_name"`
	// AutoAccept and AutoDeny are the plugin's device-name pattern lists
	// (P2P_AutoAcceptingPeers, P2P_AutoDenyingPeers): comma-separated,
	// "~re" a regular expression, else an exact name, both ignoring
	// case. The relay asks nobody: a device it does not auto-accept is
	// refused.
	AutoAccept string `toml:"auto_accept"`
	AutoDeny   string `toml:"auto_deny"`
	// STUN lists STUN servers; absent: the plugin's defaults; [] none.
	STUN []string `toml:"stun"`
	// TURN is the plugin's P2P_turnServers, P2P_turnUsername and
	// P2P_turnCredential.
	TURN lsp2pTURN `toml:"turn"`
	// RelayOnly is the plugin's connection path "relay" (TURN only).
	RelayOnly bool `toml:"relay_only"`
	// LoopbackOnly gathers loopback ICE candidates only: every device on
	// the relay's machine (tests, or a relay and a CLI side by side).
	LoopbackOnly bool `toml:"loopback_only"`
	// Broadcast tells the accepted devices present about every change of
	// the database (legacy/onProgress), so devices that watch the relay
	// pull at once; absent: true.
	Broadcast *bool `toml:"broadcast"`
}

// lsp2pTURN is a TURN server list with one credential, as the plugin
// keeps it.
type lsp2pTURN struct {
	URLs           []string `toml:"urls"`
	Username       string   `toml:"username"`
	Credential     string   `toml:"credential"`
	CredentialFile string   `toml:"credential_file"`
	CredentialEnv  string   `toml:"credential_env"`
}

// lsp2pUsesSelf reports whether any room signals on the relay's own
// /_nostr (explicitly or by default).
func (c *fileConfig) lsp2pUsesSelf() bool {
	for _, d := range c.Databases {
		for _, g := range d.LiveSyncP2P {
			if len(g.Relays) == 0 || containsString(g.Relays, selfNostr) {
				return true
			}
		}
	}
	return false
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// forwardEphemeral is [nostr] forward_ephemeral: as given, else on when
// a LiveSync P2P room signals on /_nostr (Trystero's signalling is
// ephemeral events, which /_nostr otherwise refuses).
func (c *fileConfig) forwardEphemeral() bool {
	if c.Nostr.ForwardEphemeral != nil {
		return *c.Nostr.ForwardEphemeral
	}
	return c.lsp2pUsesSelf()
}

// validRoomID reports a room id the relay takes: 1 to maxRoomID bytes of
// UTF-8 without control characters or surrounding spaces.
func validRoomID(s string) bool {
	if s == "" || len(s) > maxRoomID || !utf8.ValidString(s) || strings.TrimSpace(s) != s {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// validateLiveSyncP2P checks every [[databases.livesync_p2p]] table.
func (c *fileConfig) validateLiveSyncP2P(bad func(string, ...any)) {
	for _, d := range c.Databases {
		rooms := map[string]bool{}
		for i, g := range d.LiveSyncP2P {
			where := fmt.Sprintf("databases %q: livesync_p2p[%d]", d.Name, i)
			if !validRoomID(g.Group) {
				bad("%s: group %q: want the plugin's P2P room id (1 to %d characters, no control characters or surrounding spaces)", where, g.Group, maxRoomID)
			} else {
				where = fmt.Sprintf("databases %q: livesync_p2p group %q", d.Name, g.Group)
				key := g.AppID + "\x00" + g.Group
				if rooms[key] {
					bad("%s is listed twice", where)
				}
				rooms[key] = true
			}
			c.validateLSP2PRoom(g, where, bad)
		}
	}
}

// validateLSP2PRoom checks one room's keys.
func (c *fileConfig) validateLSP2PRoom(g lsp2pConfig, where string, bad func(string, ...any)) {
	switch {
	case g.RoomPassphraseFile == "" && g.RoomPassphraseEnv == "":
		bad("%s: give the room's passphrase (the plugin's P2P passphrase) with room_passphrase_file or room_passphrase_env", where)
	case g.RoomPassphraseFile != "" && g.RoomPassphraseEnv != "":
		bad("%s: give room_passphrase_file or room_passphrase_env, not both", where)
	}
	if len(g.DeviceName) > maxDeviceName || strings.ContainsFunc(g.DeviceName, unicode.IsControl) {
		bad("%s: device_name: at most %d bytes, no control characters", where, maxDeviceName)
	}
	if _, err := livesyncrpc.ParsePatterns(g.AutoAccept); err != nil {
		bad("%s: auto_accept: %v", where, err)
	}
	if _, err := livesyncrpc.ParsePatterns(g.AutoDeny); err != nil {
		bad("%s: auto_deny: %v", where, err)
	}
	if strings.TrimSpace(g.AutoAccept) == "" {
		bad("%s: auto_accept is empty: the relay cannot ask anyone, so it would refuse every device; list the plugin devices' names (comma-separated, \"~regex\" for a pattern, e.g. \"laptop, ~^phone\")", where)
	}
	for _, u := range g.Relays {
		if u == selfNostr {
			continue
		}
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "ws" && pu.Scheme != "wss") || pu.Host == "" {
			bad("%s: relays %q: want a ws:// or wss:// Nostr relay URL, or %q for this relay's own %s", where, u, selfNostr, nostrPath)
		}
	}
	if len(g.Relays) == 0 || containsString(g.Relays, selfNostr) {
		switch {
		case c.Nostr.Enabled != nil && !*c.Nostr.Enabled:
			bad("%s: the room signals on this relay's own %s (relays absent or %q) but [nostr] enabled = false: enable it, or list other Nostr relays in relays", where, nostrPath, selfNostr)
		case c.Nostr.ForwardEphemeral != nil && !*c.Nostr.ForwardEphemeral:
			bad("%s: the room signals on this relay's own %s (relays absent or %q) but [nostr] forward_ephemeral = false: the plugin's P2P signalling is ephemeral events; remove the line or set it to true", where, nostrPath, selfNostr)
		case c.TLS.on():
			bad("%s: relays: %q connects over loopback, which the TLS certificate does not name: list the relay's public wss:// URL (e.g. wss://relay.example.com:5984%s) instead", where, selfNostr, nostrPath)
		}
	}
	for _, s := range g.STUN {
		if l := strings.ToLower(s); !strings.HasPrefix(l, "stun:") && !strings.HasPrefix(l, "stuns:") {
			bad("%s: stun %q: want a stun: or stuns: URL (e.g. stun:stun.l.google.com:19302)", where, s)
		}
	}
	validateLSP2PTURN(g, where, bad)
}

func validateLSP2PTURN(g lsp2pConfig, where string, bad func(string, ...any)) {
	t := g.TURN
	for _, u := range t.URLs {
		if l := strings.ToLower(u); !strings.HasPrefix(l, "turn:") && !strings.HasPrefix(l, "turns:") {
			bad("%s: turn.urls %q: want a turn: or turns: URL (e.g. turn:turn.example.com:3478)", where, u)
		}
	}
	n := 0
	for _, s := range []string{t.Credential, t.CredentialFile, t.CredentialEnv} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		bad("%s: turn: give one of credential, credential_file and credential_env", where)
	}
	if (t.Username != "" || n > 0) && len(t.URLs) == 0 {
		bad("%s: turn: a username or credential without urls", where)
	}
	if g.RelayOnly && len(t.URLs) == 0 {
		bad("%s: relay_only = true needs a TURN server (turn.urls): every connection goes through one", where)
	}
	if g.RelayOnly && g.LoopbackOnly {
		bad("%s: relay_only and loopback_only exclude each other", where)
	}
}

// lsp2pSpec is one room to join, secrets read. roomPassword is secret:
// never logged or shown.
type lsp2pSpec struct {
	db, group    string
	roomPassword string // trystero.RoomPassword(P2P passphrase)
	appID        string
	relays       []string // may hold selfNostr
	device       string
	autoAccept   string
	autoDeny     string
	stun         []string // nil: the plugin's defaults
	turnURLs     []string
	turnUser     string
	turnCred     string
	relayOnly    bool
	loopbackOnly bool
	broadcast    bool
}

// resolveLiveSyncP2P reads the rooms' secrets; the configuration was
// validated.
func resolveLiveSyncP2P(fc *fileConfig, getenv func(string) string) ([]lsp2pSpec, error) {
	var out []lsp2pSpec
	for _, d := range fc.Databases {
		for _, g := range d.LiveSyncP2P {
			fail := func(err error) ([]lsp2pSpec, error) {
				return nil, usageError{fmt.Sprintf("database %q: livesync_p2p group %q: %v", d.Name, g.Group, err)}
			}
			pass, err := secretFrom(fc.resolvePath(g.RoomPassphraseFile), g.RoomPassphraseEnv, getenv, "room passphrase")
			if err != nil {
				return fail(err)
			}
			sp := lsp2pSpec{db: d.Name, group: g.Group, roomPassword: trystero.RoomPassword(pass), appID: g.AppID,
				relays: g.Relays, device: g.DeviceName, autoAccept: g.AutoAccept, autoDeny: g.AutoDeny, stun: g.STUN,
				turnURLs: g.TURN.URLs, turnUser: g.TURN.Username, turnCred: g.TURN.Credential,
				relayOnly: g.RelayOnly, loopbackOnly: g.LoopbackOnly, broadcast: g.Broadcast == nil || *g.Broadcast}
			if g.TURN.CredentialFile != "" || g.TURN.CredentialEnv != "" {
				if sp.turnCred, err = secretFrom(fc.resolvePath(g.TURN.CredentialFile), g.TURN.CredentialEnv, getenv, "TURN credential"); err != nil {
					return fail(err)
				}
			}
			if len(sp.relays) == 0 {
				sp.relays = []string{selfNostr}
			}
			if sp.device == "" {
				sp.device = defaultLSP2PDevice
			}
			if sp.appID == "" {
				sp.appID = trystero.DefaultAppID
			}
			out = append(out, sp)
		}
	}
	return out, nil
}
