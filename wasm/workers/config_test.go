//go:build !js

// The Worker's own code runs only inside workerd (syumai/workers
// panics at load elsewhere): these tests of its configuration run
// natively, and tests/workers runs the Worker under miniflare.

package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/wasm/workers/d1kv"
)

func envOf(m map[string]string) getenv { return func(k string) string { return m[k] } }

func TestParseSettings(t *testing.T) {
	s, err := parseSettings(envOf(map[string]string{
		"LIVESYNC_USERS":             "alice:pa:ss:word:vault,notes\nroot:rootpw:*",
		"LIVESYNC_CORS_ORIGINS":      "app://obsidian.md, https://example.org",
		"LIVESYNC_CHANGES_TIMEOUT":   "20",
		"LIVESYNC_MAX_REQUEST_BYTES": "1000",
	}))
	if err != nil {
		t.Fatal(err)
	}
	c := s.cfg
	if len(c.Users) != 2 || c.Users[0].Name != "alice" || c.Users[0].Password != "pa:ss:word" ||
		strings.Join(c.Users[0].Databases, ",") != "vault,notes" || c.Users[0].Admin || !c.Users[1].Admin {
		t.Errorf("users = %+v", c.Users)
	}
	if strings.Join(c.CORSOrigins, " ") != "app://obsidian.md https://example.org" {
		t.Errorf("CORS = %q", c.CORSOrigins)
	}
	if c.ChangesTimeout != 20*time.Second || c.MaxRequestBytes != 1000 || c.MaxDocumentBytes != defaultMaxDocumentBytes {
		t.Errorf("limits = %v %d %d", c.ChangesTimeout, c.MaxRequestBytes, c.MaxDocumentBytes)
	}
	// The uuid and cookie secret are stable from request to request.
	again, _ := parseSettings(envOf(map[string]string{"LIVESYNC_USERS": "alice:pa:ss:word:vault,notes\nroot:rootpw:*"}))
	if again.cfg.UUID != c.UUID || string(again.cfg.CookieSecret) != string(c.CookieSecret) || len(c.UUID) != 32 {
		t.Errorf("uuid %q / %q", c.UUID, again.cfg.UUID)
	}
	if strings.Join(again.cfg.CORSOrigins, " ") != defaultCORSOrigins {
		t.Errorf("default CORS = %q", again.cfg.CORSOrigins)
	}
	if err := c.Validate(); err == nil {
		t.Error("Validate without Databases passed")
	}
}

func TestParseSettingsRefuses(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"no users":         {},
		"no databases":     {"LIVESYNC_USERS": "alice:pw:"},
		"no password":      {"LIVESYNC_USERS": "alice:vault"},
		"no name":          {"LIVESYNC_USERS": ":pw:vault"},
		"timeout too long": {"LIVESYNC_USERS": "a:b:c", "LIVESYNC_CHANGES_TIMEOUT": "600"},
		"request too big":  {"LIVESYNC_USERS": "a:b:c", "LIVESYNC_MAX_REQUEST_BYTES": "200000000"},
		"document size":    {"LIVESYNC_USERS": "a:b:c", "LIVESYNC_MAX_DOCUMENT_BYTES": "x"},
	} {
		_, err := parseSettings(envOf(env))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), "pw") {
			t.Errorf("%s: the error shows the password: %v", name, err)
		}
	}
}

// The migration file wrangler applies is d1kv's schema.
func TestMigrationIsSchema(t *testing.T) {
	b, err := os.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	var sql []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if !strings.HasPrefix(l, "--") {
			sql = append(sql, l)
		}
	}
	if got := strings.Join(sql, ""); got != d1kv.Schema {
		t.Errorf("migrations/0001_init.sql is not d1kv.Schema:\n%s\nwant\n%s", got, d1kv.Schema)
	}
}

func TestParseHold(t *testing.T) {
	s, err := parseSettings(envOf(map[string]string{
		"LIVESYNC_USERS":              "a:b:vault",
		"LIVESYNC_PASSPHRASES":        "vault:pass: with spaces:and colons \r\n\n  \nnotes:x\n",
		"LIVESYNC_MAX_HELD_DOCUMENTS": "50",
		"LIVESYNC_MAX_HELD_PER_USER":  "5",
	}))
	if err != nil {
		t.Fatal(err)
	}
	h := s.hold
	if len(h.Passphrases) != 2 || h.Passphrases["vault"] != "pass: with spaces:and colons " || h.Passphrases["notes"] != "x" {
		t.Errorf("passphrases = %d entries", len(h.Passphrases)) // never print them
	}
	hc := h.Holdback
	if hc.MaxHeldDocuments != 50 || hc.MaxHeldPerOwner != 5 || hc.MaxHeldChunkIDs != 1_000_000 ||
		hc.MaxHeldChunkIDsPerOwner != 200_000 || hc.SaveInterval != heldSaveInterval {
		t.Errorf("hold-back config = %+v", hc)
	}
	if !strings.Contains(hc.MaxHeldDocumentsName, "LIVESYNC_MAX_HELD_DOCUMENTS") {
		t.Errorf("the limit's name in refusals = %q", hc.MaxHeldDocumentsName)
	}
	d, _ := parseSettings(envOf(map[string]string{"LIVESYNC_USERS": "a:b:vault"}))
	if len(d.hold.Passphrases) != 0 || d.hold.Holdback.MaxHeldDocuments != 10000 || d.hold.Holdback.MaxHeldPerOwner != 2000 {
		t.Errorf("defaults = %+v", d.hold.Holdback)
	}
}

func TestParseHoldRefuses(t *testing.T) {
	for name, v := range map[string][2]string{
		"no colon":          {"LIVESYNC_PASSPHRASES", "vault secret-one"},
		"no passphrase":     {"LIVESYNC_PASSPHRASES", "vault:"},
		"bad name":          {"LIVESYNC_PASSPHRASES", "Vault:secret-one"},
		"no name":           {"LIVESYNC_PASSPHRASES", ":secret-one"},
		"twice":             {"LIVESYNC_PASSPHRASES", "vault:secret-one\nvault:secret-two"},
		"zero documents":    {"LIVESYNC_MAX_HELD_DOCUMENTS", "0"},
		"negative per user": {"LIVESYNC_MAX_HELD_PER_USER", "-1"},
		"not a number":      {"LIVESYNC_MAX_HELD_CHUNK_IDS", "many"},
	} {
		_, err := parseSettings(envOf(map[string]string{"LIVESYNC_USERS": "a:b:vault", v[0]: v[1]}))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), "secret-") {
			t.Errorf("%s: the error shows a passphrase: %v", name, err)
		}
	}
}
