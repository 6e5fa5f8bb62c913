package tests

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// doctorReport is doctor's --json answer.
type doctorReport struct {
	OK       bool `json:"ok"`
	Findings []struct {
		Check   string   `json:"check"`
		Status  string   `json:"status"`
		Message string   `json:"message"`
		Details []string `json:"details"`
		Advice  string   `json:"advice"`
	} `json:"findings"`
}

// finding returns the text of the finding of check with status, "" if
// there is none.
func (r doctorReport) finding(check, status string) string {
	for _, f := range r.Findings {
		if f.Check == check && f.Status == status {
			return f.Message + " " + strings.Join(f.Details, " ") + " " + f.Advice
		}
	}
	return ""
}

// testCLIDoctor: one case per diagnosis of "livesync doctor", each with
// its exit code, and doctor never writes to the remote.
func testCLIDoctor(t *testing.T, c *cliRunner) {
	d := &doctorRun{c: c, work: t.TempDir()}
	e2ee := readVectorVault(t, "e2ee")
	plain := readVectorVault(t, "plain")

	t.Run("healthy", func(t *testing.T) { d.healthy(t, e2ee) })

	t.Run("unreachable", func(t *testing.T) {
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := l.Addr().String()
		l.Close()
		r, rep := d.doctor(t, nil, "http://admin@"+addr+"/vault")
		d.expect(t, r, rep, 4, "server", "problem", "connection refused", "that the server is running")
	})

	t.Run("wrong password", func(t *testing.T) {
		db := freshDB(t, couchServer, nil)
		r, rep := d.doctor(t, map[string]string{"LIVESYNC_PASSWORD": "wrong"}, c.url(db.Name()))
		d.expect(t, r, rep, 5, "login", "problem", `"admin" is refused`, "password")
	})

	t.Run("no database", func(t *testing.T) {
		r, rep := d.doctor(t, nil, c.url(dbName(t)))
		d.expect(t, r, rep, 7, "database", "problem", "does not exist", "livesync push")
	})

	t.Run("wrong passphrase", func(t *testing.T) {
		db := loadVaultDump(t, couchServer, e2ee.vaultDump)
		r, rep := d.doctor(t, map[string]string{"LIVESYNC_PASSPHRASE": "not it"}, c.url(db.Name()))
		d.expect(t, r, rep, 6, "passphrase", "problem", "passphrase is wrong")
		if rep.finding("chunks", "skipped") == "" {
			t.Error("chunks were checked without readable documents")
		}
	})

	t.Run("salt reset", func(t *testing.T) {
		db := loadVaultDump(t, couchServer, e2ee.vaultDump)
		store := filepath.Join(t.TempDir(), "s.db")
		env := map[string]string{"LIVESYNC_PASSPHRASE": doctorPassphrase}
		c.ok(t, d.work, env, "pull", c.url(db.Name()), "--store", store, "--quiet")
		salt := make([]byte, 32)
		rand.Read(salt)
		p, _ := json.Marshal(negotiate.NewSyncParameters(salt))
		if err := db.PutLocal(ctxT(t), "obsidian_livesync_sync_parameters", p); err != nil {
			t.Fatal(err)
		}
		r, rep := d.doctor(t, env, c.url(db.Name()), "--store", store)
		d.expect(t, r, rep, 6, "passphrase", "problem", "passphrase is right", "sync parameters were reset", "restore")
	})

	t.Run("settings mismatch", func(t *testing.T) {
		db := loadVaultDump(t, couchServer, e2ee.vaultDump)
		store := filepath.Join(t.TempDir(), "s.db")
		c.ok(t, d.work, nil, "put", "x.md", "-", "--store", store) // a plain vault
		r, rep := d.doctor(t, map[string]string{"LIVESYNC_PASSPHRASE": doctorPassphrase}, c.url(db.Name()), "--store", store)
		d.expect(t, r, rep, 7, "settings", "problem", "encrypt: the remote prefers true, this replica has false", "usePathObfuscation", "fresh local replica")
	})

	for _, cleaned := range []bool{false, true} {
		name, word := "locked", "locked: another device rebuilt it"
		if cleaned {
			name, word = "cleaned", "cleaned up by another device"
		}
		t.Run(name, func(t *testing.T) { d.locked(t, cleaned, word) })
	}

	t.Run("missing chunks", func(t *testing.T) {
		db := loadVaultDump(t, couchServer, plain.vaultDump)
		gone := doctorDeleteChunksOf(t, db, "notes/large.md", "tiny.md")
		r, rep := d.doctor(t, nil, c.url(db.Name()))
		d.expect(t, r, rep, 3, "chunks", "problem", fmt.Sprintf("2 of 9 files refer to %d chunks", gone), "notes/large.md", "tiny.md", "push from a device")
	})
}

// doctorPassphrase is the vector vaults' passphrase.
const doctorPassphrase = "vector-passphrase"

// doctorRun runs "livesync doctor" for testCLIDoctor's cases.
type doctorRun struct {
	c    *cliRunner
	work string
}

// doctor runs "livesync doctor --json" with args and returns its result
// and report; no secret may be in its output.
func (d *doctorRun) doctor(t *testing.T, env map[string]string, args ...string) (cliResult, doctorReport) {
	t.Helper()
	r := d.c.run(t, d.work, env, append([]string{"doctor", "--json"}, args...)...)
	d.c.noSecrets(t, r, doctorPassphrase)
	var rep doctorReport
	if r.stdout != "" && json.Unmarshal([]byte(r.stdout), &rep) != nil {
		t.Fatalf("--json: %q", r.stdout)
	}
	return r, rep
}

// expect checks the exit code and that the report has a finding of check
// with status whose text holds every word.
func (d *doctorRun) expect(t *testing.T, r cliResult, rep doctorReport, code int, check, status string, words ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	got := rep.finding(check, status)
	if got == "" {
		t.Fatalf("no %s finding for %q: %s", status, check, r.stdout)
	}
	for _, w := range words {
		if !strings.Contains(got, w) {
			t.Errorf("the %s finding lacks %q: %s", check, w, got)
		}
	}
}

// doctorRemoteState is what doctor must not change.
func doctorRemoteState(t *testing.T, db *couchdb.DB) string {
	ms, _ := db.GetLocal(ctxT(t), "obsydian_livesync_milestone")
	sp, _ := db.GetLocal(ctxT(t), "obsidian_livesync_sync_parameters")
	info, _ := db.Info(ctxT(t))
	return fmt.Sprintf("%s|%s|%s", ms, sp, info.UpdateSeq)
}

// healthy: every check of the plugin's E2EE vault is ok, the test
// server's missing CouchDB settings are a warning, and nothing is
// written.
func (d *doctorRun) healthy(t *testing.T, e2ee vectorVault) {
	db := loadVaultDump(t, couchServer, e2ee.vaultDump)
	before := doctorRemoteState(t, db)
	r, rep := d.doctor(t, map[string]string{"LIVESYNC_PASSPHRASE": doctorPassphrase}, d.c.url(db.Name()), "--store", filepath.Join(t.TempDir(), "none.db"))
	if r.code != 0 || !rep.OK {
		t.Fatalf("exit %d: %s", r.code, r.stdout)
	}
	for _, check := range []string{"server", "login", "database", "version", "salt", "milestone", "passphrase", "chunks"} {
		if rep.finding(check, "ok") == "" {
			t.Errorf("no ok for %q: %s", check, r.stdout)
		}
	}
	// The test server lacks what the plugin needs of CouchDB: said as
	// a warning, not a problem.
	if w := rep.finding("server settings", "warning"); !strings.Contains(w, "max_http_request_size") || !strings.Contains(w, "app://obsidian.md") {
		t.Errorf("server settings: %q", w)
	}
	if after := doctorRemoteState(t, db); after != before {
		t.Errorf("doctor wrote to the remote:\nbefore %s\nafter  %s", before, after)
	}
}

// locked: a remote locked (or cleaned) by device "owner" is a milestone
// problem naming word, the owner and the ways out, and doctor writes
// nothing to it.
func (d *doctorRun) locked(t *testing.T, cleaned bool, word string) {
	db := freshDB(t, couchServer, nil)
	if _, _, err := db.Handshake(ctxT(t), couchdb.HandshakeOptions{NodeID: "owner"}); err != nil {
		t.Fatal(err)
	}
	raw, _ := db.GetLocal(ctxT(t), "obsydian_livesync_milestone")
	m, _ := negotiate.ParseMilestone(raw)
	m.Lock("owner", negotiate.CouchDBChunkRange, cleaned)
	b, _ := json.Marshal(m)
	if err := db.PutLocal(ctxT(t), "obsydian_livesync_milestone", b); err != nil {
		t.Fatal(err)
	}
	before := doctorRemoteState(t, db)
	r, rep := d.doctor(t, nil, d.c.url(db.Name()))
	d.expect(t, r, rep, 7, "milestone", "problem", word, "owner", "livesync pull", "livesync unlock")
	if after := doctorRemoteState(t, db); after != before {
		t.Error("doctor wrote to a locked remote")
	}
}

// doctorDeleteChunksOf deletes on the server the chunks of the two
// metadata documents a and b and returns how many chunks were deleted.
func doctorDeleteChunksOf(t *testing.T, db *couchdb.DB, a, b string) int {
	ctx := ctxT(t)
	page, err := db.Changes(ctx, engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	revs := map[string]string{}
	for _, ch := range page.Results {
		revs[ch.ID] = ch.Revs[0]
	}
	docs, err := db.BulkGet(ctx, []engine.DocRev{{ID: a, Rev: revs[a]}, {ID: b, Rev: revs[b]}})
	if err != nil || len(docs) != 2 {
		t.Fatalf("%d docs, %v", len(docs), err)
	}
	gone := map[string]bool{}
	for _, raw := range docs {
		var m struct{ Children []string }
		json.Unmarshal(raw, &m)
		for _, id := range m.Children {
			gone[id] = true
		}
	}
	var tombs []json.RawMessage
	for id := range gone {
		old := strings.SplitN(revs[id], "-", 2)[1]
		tomb := fmt.Sprintf(`{"_id":%q,"_rev":"2-00000000000000000000000000000001","_deleted":true,"_revisions":{"start":2,"ids":["00000000000000000000000000000001",%q]}}`, id, old)
		tombs = append(tombs, json.RawMessage(tomb))
	}
	if _, err := db.BulkDocs(ctx, tombs); err != nil {
		t.Fatal(err)
	}
	return len(gone)
}
