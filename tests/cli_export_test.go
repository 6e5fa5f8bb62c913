package tests

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// testCLIExportVaultDumps: the plugin's vault dumps
// (plain, and E2EE with obfuscated paths) loaded into the test server;
// "livesync export URL --out DIR" reproduces the input files byte for
// byte, with the vault's mtimes. The CLI takes the vault's settings from
// the plugin's milestone and is accepted by its handshake.
func testCLIExportVaultDumps(t *testing.T, c *cliRunner) {
	for _, tc := range []struct {
		kind, passphrase string
	}{{"plain", ""}, {"e2ee", "vector-passphrase"}} {
		t.Run(tc.kind, func(t *testing.T) {
			v := readVectorVault(t, tc.kind)
			db := loadVaultDump(t, couchServer, v.vaultDump)
			env := map[string]string{}
			if tc.passphrase != "" {
				env["LIVESYNC_PASSPHRASE"] = tc.passphrase
			}
			work := t.TempDir()
			out := filepath.Join(work, "vault")
			r := c.ok(t, work, env, "export", c.url(db.Name()), "--out", out, "--json", "--quiet")
			c.noSecrets(t, r, tc.passphrase)
			checkFolder(t, out, dumpInputs(t, v.vaultDump), v.times)

			var res struct {
				OK     bool   `json:"ok"`
				Files  int    `json:"files"`
				Bytes  int64  `json:"bytes"`
				Remote string `json:"remote"`
				Pulled struct {
					DocsWritten int `json:"docs_written"`
				} `json:"pulled"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
				t.Fatalf("--json: %v: %q", err, r.stdout)
			}
			if !res.OK || res.Files != len(v.Files) || res.Remote != c.couch.url+"/"+db.Name() || res.Pulled.DocsWritten < len(v.Remote.AllDocs) {
				t.Errorf("--json: %+v", res)
			}
			// The temporary replica was removed; nothing but the export
			// in the working folder.
			if entries, _ := filepath.Glob(filepath.Join(work, "*")); len(entries) != 1 {
				t.Errorf("the working folder holds %v", entries)
			}
		})
	}
}
