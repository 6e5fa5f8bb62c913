package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine/setupuri"
	"github.com/livesync-go/livesync-go/engine/trystero"
)

// lsp2pResolve resolves the LiveSync P2P settings of p2p-sync's command
// line against vars (the environment, with LIVESYNC_CONFIG).
func lsp2pResolve(t *testing.T, vars map[string]string, args ...string) (lsp2pSettings, *command, *lsp2pFlags, error) {
	t.Helper()
	c := testEnv(vars).newCommand("p2p-sync", "p2p-sync PEER")
	f := &lsp2pFlags{}
	addLSP2PFlags(c.fs, f, lsp2pSyncWait, true)
	if err := c.parse(args); err != nil {
		t.Fatal(err)
	}
	s, err := c.lsp2pSettings(f)
	return s, c, f, err
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// [livesync_p2p] resolves with its defaults, flags override it, and the
// secrets come from files and the environment.
func TestLiveSyncP2PSettings(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "room.pass", "room secret\n")
	writeFile(t, dir, "turn.cred", "turn secret\n")
	cfg := writeFile(t, dir, "config.toml", `
[livesync_p2p]
group = "g1"
room_passphrase_file = "room.pass"
relays = ["wss://relay.one/", "ws://127.0.0.1:7777/_nostr"]
device_name = "server"
auto_accept = "laptop, ~^phone-"
auto_deny = "phone-old"
follow = "laptop"
broadcast = true
stun = []
relay_only = true
[livesync_p2p.turn]
urls = ["turn:turn.example:3478"]
username = "me"
credential_file = "turn.cred"
`)
	vars := map[string]string{"LIVESYNC_CONFIG": cfg, "HOME": dir}
	s, c, f, err := lsp2pResolve(t, vars)
	if err != nil {
		t.Fatal(err)
	}
	r := s.room
	if r.RoomID != "g1" || r.AppID != trystero.DefaultAppID || len(r.Relays) != 2 || r.STUN == nil || len(r.STUN) != 0 ||
		!r.RelayOnly || r.LoopbackOnly || len(r.TURN) != 1 || r.TURN[0].Username != "me" || r.TURN[0].Credential != "turn secret" ||
		s.device != "server" || s.autoAccept != "laptop, ~^phone-" || s.autoDeny != "phone-old" || s.wait != lsp2pSyncWait ||
		s.cfg.Follow != "laptop" || !s.cfg.Broadcast {
		t.Errorf("settings from the configuration: %+v", s)
	}
	if pw, err := c.roomPassword(f, s); err != nil || pw != trystero.RoomPassword("room secret") {
		t.Errorf("room password %q, %v", pw, err)
	}
	vars[lsp2pRoomPassphraseEnv] = "from the environment"
	vars[lsp2pLoopbackEnv] = "1"
	vars[lsp2pTURNCredentialEnv] = "turn from env"
	s, c, f, err = lsp2pResolve(t, vars, "--group", "g2", "--relay", "wss://a.example,wss://b.example", "--relay", "wss://c.example",
		"--device", "d2", "--auto-accept", "", "--app-id", "app2", "--relay-only=false", "--wait", "5s", "--turn", "turns:t.example")
	if err != nil {
		t.Fatal(err)
	}
	r = s.room
	if r.RoomID != "g2" || r.AppID != "app2" || !slices.Equal(r.Relays, []string{"wss://a.example", "wss://b.example", "wss://c.example"}) ||
		r.RelayOnly || !r.LoopbackOnly || r.TURN[0].URLs[0] != "turns:t.example" || r.TURN[0].Credential != "turn from env" ||
		s.device != "d2" || s.autoAccept != "" || s.wait != 5*time.Second {
		t.Errorf("settings with flags: %+v", s)
	}
	if pw, err := c.roomPassword(f, s); err != nil || pw != trystero.RoomPassword("from the environment") {
		t.Errorf("room password from the environment %q, %v", pw, err)
	}
}

// What cannot join a room is a usage error that says what to set, and
// never shows a secret.
func TestLiveSyncP2PSettingsErrors(t *testing.T) {
	dir := t.TempDir()
	base := "[livesync_p2p]\ngroup = \"g\"\nrelays = [\"wss://r.example\"]\n"
	for name, tc := range map[string]struct {
		config string
		args   []string
		want   string
	}{
		"no group":       {config: "[livesync_p2p]\nrelays = [\"wss://r.example\"]\n", want: "no group: give --group"},
		"no relay":       {config: "[livesync_p2p]\ngroup = \"g\"\n", want: "wss://exp-relay.vrtmrz.net/"},
		"http relay":     {config: base, args: []string{"--relay", "https://r.example"}, want: "--relay"},
		"bad pattern":    {config: base, args: []string{"--auto-accept", "~("}, want: "--auto-accept"},
		"relay only":     {config: base, args: []string{"--relay-only"}, want: "--turn turn:host:3478"},
		"bad turn":       {config: base, args: []string{"--turn", "http://t"}, want: "--turn"},
		"zero wait":      {config: base, args: []string{"--wait", "0s"}, want: "--wait must be positive"},
		"config pattern": {config: base + "auto_deny = \"~[\"\n", want: "auto_deny"},
		"config relay":   {config: "[livesync_p2p]\nrelays = [\"relay.example\"]\n", want: "relays"},
		"config follow":  {config: base + "follow = \"~(\"\n", want: "follow"},
		"unknown key":    {config: base + "passphrase = \"x\"\n", want: "unknown keys livesync_p2p.passphrase"},
	} {
		cfg := writeFile(t, dir, strings.ReplaceAll(name, " ", "-")+".toml", tc.config)
		_, _, _, err := lsp2pResolve(t, map[string]string{"LIVESYNC_CONFIG": cfg, "HOME": dir}, tc.args...)
		if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a usage error with %q", name, err, tc.want)
		}
	}
	cfg := writeFile(t, dir, "ok.toml", base)
	s, c, f, err := lsp2pResolve(t, map[string]string{"LIVESYNC_CONFIG": cfg, "HOME": dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.roomPassword(f, s); !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), "$"+lsp2pRoomPassphraseEnv) {
		t.Errorf("no room passphrase: %v", err)
	}
}

// The plugin's settings (its data.json, or a Setup URI) fill in what the
// configuration leaves unset, secrets included.
func TestLiveSyncP2PPluginSettings(t *testing.T) {
	dir := t.TempDir()
	plugin := `{"P2P_Enabled": true, "P2P_roomID": "plugin-room", "P2P_passphrase": "plugin room secret",
		"P2P_relays": "wss://exp-relay.vrtmrz.net/, ws://127.0.0.1:9/_nostr", "P2P_AppID": "self-hosted-livesync",
		"P2P_AutoAcceptingPeers": "~^laptop", "P2P_AutoDenyingPeers": "", "P2P_turnServers": "turn:turn.example:3478",
		"P2P_turnUsername": "u", "P2P_turnCredential": "turn secret", "P2P_connectionPath": "relay",
		"P2P_DevicePeerName": "plugin-device", "passphrase": "vault secret", "encrypt": true}`
	writeFile(t, dir, "data.json", plugin)
	cfg := writeFile(t, dir, "config.toml", "[livesync_p2p]\ndevice_name = \"mine\"\nplugin_settings_file = \"data.json\"\n")
	vars := map[string]string{"LIVESYNC_CONFIG": cfg, "HOME": dir}
	check := func(s lsp2pSettings, c *command, f *lsp2pFlags) {
		t.Helper()
		r := s.room
		if r.RoomID != "plugin-room" || len(r.Relays) != 2 || !r.RelayOnly || r.TURN[0].Credential != "turn secret" ||
			s.device != "mine" || s.autoAccept != "~^laptop" {
			t.Errorf("settings: %+v", s)
		}
		if pw, err := c.roomPassword(f, s); err != nil || pw != trystero.RoomPassword("plugin room secret") {
			t.Errorf("room password %q, %v", pw, err)
		}
		if p, err := c.vaultPassphrase(s, false); err != nil || p != "vault secret" {
			t.Errorf("vault passphrase %q, %v", p, err)
		}
		for _, secret := range []string{"plugin room secret", "vault secret", "turn secret"} {
			if strings.Contains(s.plugin.String(), secret) {
				t.Errorf("the plugin's settings print %q", secret)
			}
		}
	}
	s, c, f, err := lsp2pResolve(t, vars)
	if err != nil {
		t.Fatal(err)
	}
	check(s, c, f)

	// The same settings as a Setup URI, with its passphrase.
	conf, err := setupuri.FromJSON([]byte(plugin))
	if err != nil {
		t.Fatal(err)
	}
	uri, err := setupuri.Encode(conf, "setup secret", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	uriFile := writeFile(t, dir, "setup.uri", uri+"\n")
	vars[lsp2pSetupPassphraseEnv] = "setup secret"
	s, c, f, err = lsp2pResolve(t, vars, "--plugin-settings", uriFile)
	if err != nil {
		t.Fatal(err)
	}
	check(s, c, f)
	vars[lsp2pSetupPassphraseEnv] = "not it"
	var xe exitError
	if _, _, _, err := lsp2pResolve(t, vars, "--plugin-settings", uriFile); !errors.As(err, &xe) || xe.code != exitPassphrase || strings.Contains(err.Error(), "not it") {
		t.Errorf("wrong setup passphrase: %v", err)
	}
	delete(vars, lsp2pSetupPassphraseEnv)
	if _, _, _, err := lsp2pResolve(t, vars, "--plugin-settings", uriFile); !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), lsp2pSetupPassphraseEnv) {
		t.Errorf("no setup passphrase: %v", err)
	}
	bad := writeFile(t, dir, "bad.json", `{"P2P_roomID": 5, "P2P_passphrase": "x-secret"}`)
	if _, _, _, err := lsp2pResolve(t, vars, "--plugin-settings", bad); !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), "P2P_roomID") || strings.Contains(err.Error(), "x-secret") {
		t.Errorf("wrongly typed setting: %v", err)
	}
}

// The commands refuse a wrong command line, and p2p-host a replica that
// holds no vault, before joining any room.
func TestLiveSyncP2PCommandLine(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.toml", "[livesync_p2p]\ngroup = \"g\"\nrelays = [\"ws://127.0.0.1:9\"]\n")
	env := func(k string) string {
		return map[string]string{"LIVESYNC_CONFIG": cfg, "HOME": dir, lsp2pRoomPassphraseEnv: "room secret"}[k]
	}
	store := filepath.Join(dir, "r", "store.db")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"p2p-sync"}, exitUsage, "p2p-sync takes one peer"},
		{[]string{"p2p-sync", "a", "b"}, exitUsage, "p2p-sync takes one peer"},
		{[]string{"p2p-peers", "x"}, exitUsage, "p2p-peers takes no arguments"},
		{[]string{"p2p-host", "x"}, exitUsage, "p2p-host takes no arguments"},
		{[]string{"p2p-host", "--store", store}, exitFailed, "no local replica"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errb, env)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) || strings.Contains(errb.String(), "room secret") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
	rep, err := testEnv(nil).openReplica(store, true)
	if err != nil {
		t.Fatal(err)
	}
	rep.Close()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"p2p-host", "--store", store}, &out, &errb, env); code != exitFailed || !strings.Contains(errb.String(), "holds no vault yet") {
		t.Errorf("p2p-host of a replica without a vault: exit %d, stderr %q", code, errb.String())
	}
}
