package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// "secrets never appear in logs (capture slog output and grep for the
// password)": every secret the relay is given, and every wrong password a
// client tries, stays out of its output at debug level, in both log
// formats.
func TestSecretsNeverLogged(t *testing.T) {
	const (
		adminPW    = "admin-pw-7f3a9c"
		alicePW    = "alice-pw-1b2d4e"
		bobPW      = "bob-pw-env-5c6d"
		passphrase = "vault-passphrase-8e9f0a"
		wrongPW    = "wrong-pw-guess-2a3b"
	)
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "alice.pw"), []byte(alicePW+"\n"), 0o600)
			os.WriteFile(filepath.Join(dir, "notes.pp"), []byte(passphrase+"\n"), 0o600)
			cfg := filepath.Join(dir, "relay.toml")
			os.WriteFile(cfg, []byte(`
[[users]]
name = "alice"
password_file = "alice.pw"
databases = ["notes"]

[[users]]
name = "bob"
password_env = "TEST_BOB_PW"
databases = ["notes"]

[[databases]]
name = "notes"
passphrase_file = "notes.pp"
`), 0o600)
			env := map[string]string{envAdminPassword: adminPW, "TEST_BOB_PW": bobPW}
			rn := start(t, []string{"--config", cfg, "--data-dir", filepath.Join(dir, "data"), "--log-level", "debug", "--log-format", format}, env)
			rn.user, rn.pass = "admin", adminPW

			// Work that makes the relay log: logins right and wrong, a
			// vault whose salt appears (the codec is built), pushes.
			rn.do("GET", "/notes", "alice", alicePW, nil)
			rn.do("GET", "/notes", "bob", bobPW, nil)
			rn.do("GET", "/notes", "alice", wrongPW, nil)
			rn.do("GET", "/status", "bob", wrongPW, nil)
			rn.do("POST", "/_session", "", "", map[string]string{"name": "alice", "password": wrongPW})
			salt := make([]byte, 32)
			params, _ := json.Marshal(negotiate.NewSyncParameters(salt))
			rn.admin("PUT", "/notes/_local/obsidian_livesync_sync_parameters", string(params), 201)
			codec, err := livesync.New(livesync.Config{Settings: livesync.Settings{Encrypt: true, PathObfuscation: true, Passphrase: passphrase}, Salt: salt})
			if err != nil {
				t.Fatal(err)
			}
			meta, chunks := note(t, codec, "Private.md", "private\n")
			rn.pushDocs("notes", meta)
			rn.pushDocs("notes", chunks...)
			rn.status()
			rn.admin("GET", "/metrics", nil, 200)
			rn.stop()

			out := rn.out.String()
			if !strings.Contains(out, "login failed") && !strings.Contains(out, "authentication failed") {
				t.Fatalf("the failed logins were not logged, so this test checks nothing:\n%s", out)
			}
			for name, secret := range map[string]string{"admin password": adminPW, "alice's password": alicePW,
				"bob's password": bobPW, "passphrase": passphrase, "a tried password": wrongPW} {
				if strings.Contains(out, secret) {
					t.Errorf("the %s is in the output:\n%s", name, out)
				}
			}
		})
	}
}
