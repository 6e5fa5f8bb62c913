package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/setupuri"
)

// lsp2pSetupPassphraseEnv holds the passphrase of a Setup URI given as
// the plugin's settings.
const lsp2pSetupPassphraseEnv = "LIVESYNC_SETUP_PASSPHRASE"

// maxPluginSettings bounds the plugin settings file.
const maxPluginSettings = 4 << 20

// pluginP2P are the plugin's P2P settings (commonlib's P2PSyncSetting
// names) and the vault passphrase, read from the plugin's settings: its
// data.json (or the settings file of its command-line client), or a
// Setup URI. The passphrases and the TURN credential are secrets: never
// printed.
type pluginP2P struct {
	RoomID          string `json:"P2P_roomID"`
	Passphrase      string `json:"P2P_passphrase"`
	Relays          string `json:"P2P_relays"`
	AppID           string `json:"P2P_AppID"`
	AutoAccept      string `json:"P2P_AutoAcceptingPeers"`
	AutoDeny        string `json:"P2P_AutoDenyingPeers"`
	Follow          string `json:"P2P_AutoWatchPeers"`
	Broadcast       bool   `json:"P2P_AutoBroadcast"`
	TURNServers     string `json:"P2P_turnServers"`
	TURNUsername    string `json:"P2P_turnUsername"`
	TURNCredential  string `json:"P2P_turnCredential"`
	ConnectionPath  string `json:"P2P_connectionPath"`
	DeviceName      string `json:"P2P_DevicePeerName"`
	VaultPassphrase string `json:"passphrase"`
}

// String hides the secrets.
func (p pluginP2P) String() string {
	return fmt.Sprintf("{room %q, relays %q, app %q, device %q}", p.RoomID, p.Relays, p.AppID, p.DeviceName)
}

// GoString hides the secrets from %#v too.
func (p pluginP2P) GoString() string { return p.String() }

// loadPluginSettings reads the plugin's P2P settings from path: a JSON
// object, or a Setup URI decrypted with $LIVESYNC_SETUP_PASSPHRASE (or a
// passphrase asked on the terminal).
func (c *command) loadPluginSettings(path string) (pluginP2P, error) {
	var p pluginP2P
	b, err := readLimited(path)
	if err != nil {
		return p, usageError{fmt.Sprintf("reading the plugin's settings: %v", err)}
	}
	text := strings.TrimSpace(string(b))
	raw := []byte(text)
	if !strings.HasPrefix(text, "{") {
		pass, err := c.secret(secretSource{what: "setup passphrase", envVar: lsp2pSetupPassphraseEnv, prompt: "Setup URI passphrase: "})
		if err != nil {
			return p, err
		}
		if pass == "" {
			return p, usageError{fmt.Sprintf("%s holds a Setup URI: give its passphrase in $%s", path, lsp2pSetupPassphraseEnv)}
		}
		cfg, err := setupuri.Parse(text, pass)
		switch {
		case errors.Is(err, engine.ErrDecrypt):
			return p, exitError{exitPassphrase, fmt.Sprintf("cannot decrypt the Setup URI in %s: the setup passphrase ($%s) is wrong", path, lsp2pSetupPassphraseEnv)}
		case err != nil:
			return p, usageError{fmt.Sprintf("the Setup URI in %s: %s", path, strings.TrimPrefix(err.Error(), "setupuri: "))}
		}
		raw = cfg.Raw
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return p, usageError{fmt.Sprintf("the plugin's settings in %s: %s is not a %s", path, te.Field, te.Type)}
		}
		return p, usageError{fmt.Sprintf("the plugin's settings in %s are not a JSON object (the plugin's data.json, or a Setup URI)", path)}
	}
	return p, nil
}

// readLimited reads a file of at most maxPluginSettings bytes.
func readLimited(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxPluginSettings {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxPluginSettings)
	}
	return os.ReadFile(path)
}

// under fills the keys t leaves unset with the plugin's: the
// configuration's own keys win.
func (p pluginP2P) under(t livesyncP2PConfig) livesyncP2PConfig {
	t.Group = cmpOr(t.Group, p.RoomID)
	t.AppID = cmpOr(t.AppID, p.AppID)
	t.DeviceName = cmpOr(t.DeviceName, p.DeviceName)
	t.AutoAccept = cmpOr(t.AutoAccept, p.AutoAccept)
	t.AutoDeny = cmpOr(t.AutoDeny, p.AutoDeny)
	t.Follow = cmpOr(t.Follow, p.Follow)
	t.Broadcast = t.Broadcast || p.Broadcast
	if len(t.Relays) == 0 {
		t.Relays = splitComma(p.Relays)
	}
	if len(t.TURN.URLs) == 0 {
		t.TURN.URLs = splitComma(p.TURNServers)
	}
	t.TURN.Username = cmpOr(t.TURN.Username, p.TURNUsername)
	t.RelayOnly = t.RelayOnly || p.ConnectionPath == "relay"
	return t
}
