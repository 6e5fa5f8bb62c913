package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// hostilePaths are the paths a hostile writer to the remote plants as
// plain metadata and chunk documents: a path through a folder that is a
// symbolic link in the export folder, dot-paths in normal documents (an
// Obsidian plugin that would run on the user's machine, a git config),
// and a path holding a terminal title escape, a BEL and a NUL.
var hostilePaths = []string{
	"good.md",
	"escape/planted.md",
	".obsidian/plugins/x/main.js",
	".git/config",
	"evil\x1b]0;pwned\a\x00.md",
}

// loadHostileVault writes hostilePaths into a fresh database as the
// plugin would write any file (a milestone with the default settings,
// then chunks and metadata, new_edits=false), and returns the database.
func loadHostileVault(t *testing.T) *couchdb.DB {
	t.Helper()
	db := freshDB(t, couchServer, nil)
	ctx := ctxT(t)
	settings := livesync.Settings{}
	salt, _, err := db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "hostile", Settings: settings.TweakValues(), CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	codec, err := livesync.New(livesync.Config{Settings: settings, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	var docs []json.RawMessage
	for _, p := range hostilePaths {
		meta, chunks := relayMainNote(t, codec, p, "planted by "+p+"\n")
		docs = append(append(docs, chunks...), meta)
	}
	res, err := db.BulkDocs(ctx, docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error != "" {
			t.Fatalf("plant %q: %s %s", r.ID, r.Error, r.Reason)
		}
	}
	return db
}

// noTerminalBytes fails t if the output holds a byte a terminal acts on
// (ESC, BEL, NUL): remote text must be escaped before it is printed.
func noTerminalBytes(t *testing.T, what string, r cliResult) {
	t.Helper()
	for _, out := range []struct{ name, s string }{{"stdout", r.stdout}, {"stderr", r.stderr}} {
		if strings.ContainsAny(out.s, "\x1b\a\x00") {
			t.Errorf("%s: raw control bytes on %s: %q", what, out.name, out.s)
		}
	}
}

// TestCLIHostileRemote: a remote holding
// hostile plain documents. export writes nothing outside --out (not
// through a folder symlink planted inside it) and no dot-path from a
// normal document, names each refusal, and still writes the other files;
// ls --remote, export, pull and ls print the planted escape and NUL
// escaped, never raw.
func TestCLIHostileRemote(t *testing.T) {
	t.Parallel()
	couchServer(t) // fail (CI) or skip before building
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir(), couch: couchServer(t)}
	db := loadHostileVault(t)
	url := c.url(db.Name())
	const escaped = `evil\x1b]0;pwned\a\x00.md`

	t.Run("ExportRefusesLinksAndDotPaths", func(t *testing.T) {
		work := t.TempDir()
		outside := filepath.Join(work, "outside")
		out := filepath.Join(work, "vault")
		for _, d := range []string{outside, out} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(outside, filepath.Join(out, "escape")); err != nil {
			t.Fatal(err)
		}
		r := c.run(t, work, nil, "export", url, "--out", out, "--quiet")
		noTerminalBytes(t, "export", r)
		if r.code != 1 {
			t.Errorf("exit %d, want 1 (partial: the planted path was not written)\nstderr: %s", r.code, r.stderr)
		}
		for _, want := range []string{
			"skip escape/planted.md: escape is a symbolic link to " + outside + ", outside " + out,
			"refused .obsidian/plugins/x/main.js", "refused .git/config", "refused " + escaped,
		} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
			}
		}
		if !strings.Contains(r.stdout, "exported 1 files") || !strings.Contains(r.stdout, "refused 3 unsafe paths") {
			t.Errorf("stdout: %s", r.stdout)
		}
		if entries, _ := os.ReadDir(outside); len(entries) != 0 {
			t.Errorf("export wrote outside --out, through the symlink: %v", entries)
		}
		link := filepath.Join(out, "escape")
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("the planted symlink was replaced: %v %v", fi, err)
		}
		os.Remove(link)
		checkFolder(t, out, map[string][]byte{"good.md": []byte("planted by good.md\n")}, nil)
	})

	t.Run("LsRemote", func(t *testing.T) {
		r := c.ok(t, t.TempDir(), nil, "ls", "--remote", url)
		noTerminalBytes(t, "ls --remote", r)
		if !strings.Contains(r.stdout, escaped) || !strings.Contains(r.stdout, ".obsidian/plugins/x/main.js") {
			t.Errorf("ls --remote does not list the planted paths, escaped:\n%s", r.stdout)
		}
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		col := strings.Index(lines[0], "PATH")
		for _, l := range lines[1:] {
			if len(l) < col+2 || l[col-2:col] != "  " || l[col] == ' ' {
				t.Errorf("the PATH column does not line up:\n%s", r.stdout)
				break
			}
		}
		// --json is exact: the path as stored, escaped only by JSON.
		r = c.ok(t, t.TempDir(), nil, "ls", "--remote", url, "--json")
		noTerminalBytes(t, "ls --remote --json", r)
		var res struct {
			Files []struct{ Path string } `json:"files"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range res.Files {
			found = found || f.Path == hostilePaths[4]
		}
		if !found {
			t.Errorf("--json does not hold the exact path %q: %s", hostilePaths[4], r.stdout)
		}
	})

	t.Run("PullAndLs", func(t *testing.T) {
		work := t.TempDir()
		st := filepath.Join(work, "replica.db")
		r := c.ok(t, work, nil, "pull", url, "--store", st)
		noTerminalBytes(t, "pull", r)
		r = c.ok(t, work, nil, "ls", "--store", st)
		noTerminalBytes(t, "ls", r)
		if !strings.Contains(r.stdout, escaped) {
			t.Errorf("ls does not list the planted path, escaped:\n%s", r.stdout)
		}
	})
}
