package tests

import (
	"encoding/base64"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// TestCLIPushRebuild: "livesync push --rebuild" does the plugin's
// "Rebuild everything" from a replica, and a real PouchDB 9 client configured as LiveSync (a device of the vault
// before the rebuild) then sees a locked, rebuilt remote: a new salt,
// only the rebuilding device accepted, its own node refused
// (NODE_LOCKED), and every file readable with the new salt. Unconfirmed
// and unreadable rebuilds change nothing. The same on a bucket.
func TestCLIPushRebuild(t *testing.T) {
	t.Parallel()
	couchServer(t) // fail (CI) or skip before building
	s3Server(t)
	bin := buildCLI(t)
	v := readVectorVault(t, "e2ee")
	inputs := dumpInputs(t, v.vaultDump)

	t.Run("CouchDB", func(t *testing.T) { testCLIPushRebuildCouchDB(t, bin, v, inputs) })
	t.Run("Bucket", func(t *testing.T) { testCLIPushRebuildBucket(t, bin, v, inputs) })
}

// rebuildPassphrase is the vector vault's passphrase.
const rebuildPassphrase = "vector-passphrase"

// testCLIPushRebuildCouchDB: a plugin device of the vault as it was
// sees the CouchDB remote locked and rebuilt by "livesync push
// --rebuild", and a new device reads every file with the new salt.
func testCLIPushRebuildCouchDB(t *testing.T, bin string, v vectorVault, inputs map[string][]byte) {
	const pass = rebuildPassphrase
	e := couchServer(t)
	c := &cliRunner{bin: bin, home: t.TempDir(), couch: e}
	work := t.TempDir()
	db := loadVaultDump(t, couchServer, v.vaultDump)
	url := c.url(db.Name())
	env := map[string]string{"LIVESYNC_PASSPHRASE": pass}

	// A plugin device of the vault as it was.
	dev := startDevice(t, e, db.Name(), "plugin")
	dev.sync()
	var before struct {
		Salt    string `json:"salt"`
		Verdict string `json:"verdict"`
	}
	dev.do(map[string]any{"op": "handshake", "node": pluginNode}, &before)
	if before.Verdict != "OK" {
		t.Fatalf("before the rebuild the plugin's device is %s", before.Verdict)
	}

	store := filepath.Join(work, "replica.db")
	c.ok(t, work, env, "pull", url, "--store", store, "--quiet")

	rebuildRefusedChangesNothing(t, c, work, env, db, store)

	r := c.ok(t, work, env, "push", url, "--store", store, "--rebuild", "--yes")
	if !strings.Contains(r.stderr, "rebuilt") || !strings.Contains(r.stderr, "--rebuild-local") {
		t.Errorf("push --rebuild: %s", r.stderr)
	}
	m, err := db.ReadMilestone(ctxT(t))
	if err != nil || m == nil {
		t.Fatalf("milestone after the rebuild: %v", err)
	}
	me := m.AcceptedNodes[0]
	if !m.Locked || len(m.AcceptedNodes) != 1 || me == pluginNode {
		t.Errorf("after the rebuild: locked %v, accepted %v", m.Locked, m.AcceptedNodes)
	}
	if _, ok := m.NodeInfo[pluginNode]; ok {
		t.Error("the rebuilt remote still lists the plugin's device: it was not reset")
	}

	// The plugin's device sees a locked, rebuilt remote.
	var after struct {
		Salt     string   `json:"salt"`
		Locked   bool     `json:"locked"`
		Accepted []string `json:"accepted_nodes"`
		Verdict  string   `json:"verdict"`
	}
	dev.do(map[string]any{"op": "handshake", "node": pluginNode}, &after)
	if after.Verdict != "NODE_LOCKED" || !after.Locked || !slices.Equal(after.Accepted, []string{me}) || after.Salt == before.Salt || after.Salt == "" {
		t.Errorf("the plugin's device sees %+v (salt before %q)", after, before.Salt)
	}
	// A new device fetching the rebuilt remote reads every file with
	// the new salt.
	fresh := startDevice(t, e, db.Name(), "fresh")
	fresh.sync()
	salt, err := base64.StdEncoding.DecodeString(after.Salt)
	if err != nil {
		t.Fatal(err)
	}
	settings := dumpSettings(t, v.vaultDump, pass)
	codec, err := livesync.New(livesync.Config{Settings: settings, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	fresh.fetchChunks(codec)
	metas := decodeMetas(t, fresh.docs(), codec)
	if len(metas) != len(inputs) {
		t.Errorf("the fresh device decodes %d files, want %d", len(metas), len(inputs))
	}
	out := filepath.Join(work, "out")
	c.ok(t, work, env, "export", url, "--out", out, "--quiet")
	checkFolder(t, out, inputs, nil)
}

// rebuildRefusedChangesNothing: a rebuild not confirmed (no terminal, no
// --yes), or with a wrong passphrase, changes nothing on the remote.
func rebuildRefusedChangesNothing(t *testing.T, c *cliRunner, work string, env map[string]string, db *couchdb.DB, store string) {
	url := c.url(db.Name())
	info, _ := db.Info(ctxT(t))
	if r := c.run(t, work, env, "push", url, "--store", store, "--rebuild"); r.code != 2 || !strings.Contains(r.stderr, "--yes") {
		t.Errorf("an unconfirmed rebuild: exit %d, want 2: %s", r.code, r.stderr)
	}
	wrong := map[string]string{"LIVESYNC_PASSPHRASE": "not it"}
	if r := c.run(t, work, wrong, "push", url, "--store", store, "--rebuild", "--yes"); r.code != 6 {
		t.Errorf("a rebuild with a wrong passphrase: exit %d: %s", r.code, r.stderr)
	}
	if after, _ := db.Info(ctxT(t)); after.UpdateSeq != info.UpdateSeq {
		t.Errorf("a refused rebuild changed the database: update_seq %s, was %s", after.UpdateSeq, info.UpdateSeq)
	}
	if m, _ := db.ReadMilestone(ctxT(t)); m.Locked {
		t.Error("a refused rebuild locked the remote")
	}
}

// testCLIPushRebuildBucket: "livesync push --rebuild" on a bucket gives
// it a new salt, removes every old pack, locks it for the rebuilding
// device only, and an export reads every file.
func testCLIPushRebuildBucket(t *testing.T, bin string, v vectorVault, inputs map[string][]byte) {
	const pass = rebuildPassphrase
	b, e := freshBucket(t)
	c := &cliRunner{bin: bin, home: t.TempDir()}
	work := t.TempDir()
	env := s3CLIEnv(e, pass)
	url := bucketURL(e, b)
	src := writeInputs(t, v)
	store := filepath.Join(work, "replica.db")
	c.ok(t, work, env, "import", src, url, "--store", store, "--encrypt", "--obfuscate-paths", "--quiet")
	p0, err := b.GetSyncParameters(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	packs0 := packKeys(t, b)

	if r := c.ok(t, work, env, "push", url, "--store", store, "--rebuild", "--yes"); !strings.Contains(r.stderr, "rebuilt") {
		t.Errorf("push --rebuild: %s", r.stderr)
	}
	p1, err := b.GetSyncParameters(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if p1.PBKDF2Salt == p0.PBKDF2Salt {
		t.Error("the rebuilt bucket kept its salt")
	}
	for _, k := range packKeys(t, b) {
		if slices.Contains(packs0, k) {
			t.Errorf("pack %s survived the rebuild", k)
		}
	}
	m, err := b.ReadMilestone(ctxT(t))
	if err != nil || m == nil || !m.Locked || len(m.AcceptedNodes) != 1 {
		t.Fatalf("milestone after the rebuild: %+v %v", m, err)
	}
	if v := negotiate.Check(m, pluginNode, negotiate.JournalChunkRange, m.TweakValues[negotiate.PreferredNode], negotiate.CheckOptions{}); v.Kind != negotiate.VerdictNodeLocked {
		t.Errorf("another device's verdict: %v", v.Kind)
	}
	out := filepath.Join(work, "out")
	c.ok(t, work, env, "export", url, "--out", out, "--quiet")
	checkFolder(t, out, inputs, nil)
}
