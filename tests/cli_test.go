package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// TestCLI runs the livesync command (cmd/livesync, built once into a
// temporary folder) as a user would, against the test server: every
// subtest is a separate process per command, with secrets passed only
// through the environment. Run one with -run 'TestCLI/Export'.
func TestCLI(t *testing.T) {
	t.Parallel()
	couchServer(t) // fail (CI) or skip before building
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir(), couch: couchServer(t)}
	t.Run("ExportVaultDumps", func(t *testing.T) { testCLIExportVaultDumps(t, c) })
	t.Run("ImportPouchDB", func(t *testing.T) { testCLIImportPouchDB(t, c) })
	t.Run("SyncRoundTrip", func(t *testing.T) { testCLISyncRoundTrip(t, c) })
	t.Run("MetadataOnlyCatRemote", func(t *testing.T) { testCLIMetadataOnly(t, c) })
	t.Run("Watch", func(t *testing.T) { testCLIWatch(t, c) })
	t.Run("ConfigFile", func(t *testing.T) { testCLIConfigFile(t, c) })
	t.Run("Doctor", func(t *testing.T) { testCLIDoctor(t, c) })
	t.Run("Faults", func(t *testing.T) { testCLIFaults(t, c) })
	t.Run("DiskFull", func(t *testing.T) { testCLIDiskFull(t, c) })
	t.Run("Output", func(t *testing.T) { testCLIOutput(t, c) })
}

// buildCLI builds cmd/livesync once per test binary (goBuildOnce).
func buildCLI(t *testing.T) string {
	t.Helper()
	return goBuildOnce(t, "../cmd/livesync")
}

// cliRunner runs the built command.
type cliRunner struct {
	bin   string
	home  string // $HOME of the command: no configuration file there
	couch couchEnv
}

// cliResult is one run's outcome.
type cliResult struct {
	code           int
	stdout, stderr string
}

// run runs the command with the server password in $LIVESYNC_PASSWORD
// and env added to a minimal environment.
func (c *cliRunner) run(t *testing.T, dir string, env map[string]string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir = dir
	cmd.Env = c.environ(env)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("livesync %v: %v", args, err)
	}
	return cliResult{code, out.String(), errb.String()}
}

func (c *cliRunner) environ(env map[string]string) []string {
	vars := []string{"HOME=" + c.home, "TMPDIR=" + os.TempDir(), "LIVESYNC_PASSWORD=" + c.couch.password}
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	return vars
}

// ok runs a command that must exit 0.
func (c *cliRunner) ok(t *testing.T, dir string, env map[string]string, args ...string) cliResult {
	t.Helper()
	r := c.run(t, dir, env, args...)
	if r.code != 0 {
		t.Fatalf("livesync %v: exit %d\nstderr: %s", args, r.code, r.stderr)
	}
	return r
}

// url is the URL of database name with the user (never the password).
func (c *cliRunner) url(name string) string {
	return strings.Replace(c.couch.url, "://", "://"+c.couch.user+"@", 1) + "/" + name
}

// noSecrets fails t if any output holds one of the secrets.
func (c *cliRunner) noSecrets(t *testing.T, r cliResult, secrets ...string) {
	t.Helper()
	for _, s := range append(secrets, c.couch.password) {
		if s != "" && (strings.Contains(r.stdout, s) || strings.Contains(r.stderr, s)) {
			t.Errorf("the output shows a secret:\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
		}
	}
}

// vectorVault is a vault dump of the vectors with the files' times.
type vectorVault struct {
	vaultDump
	times map[string][2]int64 // path -> ctime, mtime
}

// readVectorVault reads engine/testdata/vectors/vault-dump-<kind>.json.
func readVectorVault(t *testing.T, kind string) vectorVault {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectors, "vault-dump-"+kind+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var v vectorVault
	if err := json.Unmarshal(b, &v.vaultDump); err != nil {
		t.Fatal(err)
	}
	var times struct {
		Files []struct {
			VaultPath    string `json:"vaultPath"`
			CTime, MTime int64
		} `json:"files"`
	}
	if err := json.Unmarshal(b, &times); err != nil {
		t.Fatal(err)
	}
	v.times = map[string][2]int64{}
	for _, f := range times.Files {
		v.times[f.VaultPath] = [2]int64{f.CTime, f.MTime}
	}
	return v
}

// writeInputs writes the vault's input files into a new folder with their
// mtimes and returns it.
func writeInputs(t *testing.T, v vectorVault) string {
	t.Helper()
	dir := t.TempDir()
	for p, data := range dumpInputs(t, v.vaultDump) {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
		mt := time.UnixMilli(v.times[p][1])
		if err := os.Chtimes(full, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// checkFolder fails t unless dir holds exactly want (path -> bytes), byte
// for byte, with the mtimes of times when given.
func checkFolder(t *testing.T, dir string, want map[string][]byte, times map[string][2]int64) {
	t.Helper()
	got := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		got[filepath.ToSlash(rel)] = b
		if tm, ok := times[filepath.ToSlash(rel)]; ok {
			st, _ := os.Stat(p)
			if !st.ModTime().Equal(time.UnixMilli(tm[1])) {
				t.Errorf("%s: mtime %v, want %v", rel, st.ModTime(), time.UnixMilli(tm[1]))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sameFiles(t, got, want)
}

// remoteCodec returns a reader's codec for db: the handshake's salt and
// the milestone's preferred settings with passphrase.
func remoteCodec(t *testing.T, db *couchdb.DB, passphrase string) *livesync.Codec {
	t.Helper()
	ctx := ctxT(t)
	raw, err := db.GetLocal(ctx, strings.TrimPrefix(negotiate.MilestoneDocID, "_local/"))
	if err != nil {
		t.Fatalf("milestone: %v", err)
	}
	m, err := negotiate.ParseMilestone(raw)
	if err != nil {
		t.Fatal(err)
	}
	settings, err := livesync.FromTweakValues(livesync.Settings{Passphrase: passphrase}, m.TweakValues[negotiate.PreferredNode])
	if err != nil {
		t.Fatal(err)
	}
	return handshakeCodec(t, db, "go-test-reader", settings)
}

// decodeDocs decodes a database's documents (remote form) with codec and
// reassembles the files: path -> bytes, and path -> metadata.
func decodeDocs(t *testing.T, docs []json.RawMessage, codec *livesync.Codec) (map[string][]byte, map[string]livesync.Meta) {
	t.Helper()
	chunks := map[string]string{}
	var metas []livesync.Meta
	for _, raw := range docs {
		doc, err := livesync.ParseDoc(raw)
		if err != nil {
			t.Fatal(err)
		}
		if doc, err = codec.DecodeRemote(doc); err != nil {
			t.Fatalf("decode %s: %v", doc.ID(), err)
		}
		if strings.HasPrefix(doc.ID(), "h:") {
			c, err := livesync.ParseChunk(doc)
			if err != nil {
				t.Fatal(err)
			}
			chunks[c.ID] = c.Data
			continue
		}
		if !doc.IsFileDoc() {
			continue
		}
		m, err := livesync.ParseMeta(doc)
		if err != nil {
			t.Fatal(err)
		}
		if !m.Deleted {
			metas = append(metas, m)
		}
	}
	files := map[string][]byte{}
	byPath := map[string]livesync.Meta{}
	for _, m := range metas {
		data, err := livesync.ReadFile(m, func(id string) (string, error) {
			s, ok := chunks[id]
			if !ok {
				return "", engine.ErrNotFound
			}
			return s, nil
		})
		if err != nil {
			t.Fatalf("%s: %v", m.Path, err)
		}
		files[m.Path] = data
		byPath[m.Path] = m
	}
	return files, byPath
}

// dbDocs returns every document of db (winning revisions) in the order of
// its changes feed.
func dbDocs(t *testing.T, db *couchdb.DB) []json.RawMessage {
	t.Helper()
	ctx := ctxT(t)
	page, err := db.Changes(ctx, engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var refs []engine.DocRev
	for _, c := range page.Results {
		refs = append(refs, engine.DocRev{ID: c.ID, Rev: c.Revs[0]})
	}
	docs, err := db.BulkGet(ctx, refs)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}
