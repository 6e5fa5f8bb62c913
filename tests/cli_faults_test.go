package tests

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// testCLIFaults: each failure gives one clear line on
// stderr, its own exit code, no secret in the output, and leaves the
// remote as it was.
func testCLIFaults(t *testing.T, c *cliRunner) {
	const pass = "the right passphrase"
	work := t.TempDir()
	// An encrypted vault on the server, written by the CLI.
	vault := dbName(t)
	t.Cleanup(func() { _ = openDB(t, couchServer, vault, false, nil).Destroy(ctxT(t)) })
	good := map[string]string{"LIVESYNC_PASSPHRASE": pass}
	c.ok(t, work, good, "put", "a.md", "-", "--store", filepath.Join(work, "owner.db"), "--encrypt", "--obfuscate-paths")
	c.ok(t, work, good, "push", c.url(vault), "--store", filepath.Join(work, "owner.db"), "--quiet")
	vdb := openDB(t, couchServer, vault, false, nil)
	docCount := func() int64 {
		info, err := vdb.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		return info.DocCount
	}
	before := docCount()

	// A closed port.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := "http://admin@" + l.Addr().String() + "/vault"
	l.Close()

	// A locked remote: another device rebuilt it (the milestone's lock,
	// as upstream's markRemoteLocked writes it).
	plainStore := filepath.Join(work, "plain.db")
	c.ok(t, work, nil, "put", "p.md", "-", "--store", plainStore)
	locked := freshDB(t, couchServer, nil)
	ownerStore := filepath.Join(work, "locked-owner.db")
	c.ok(t, work, nil, "put", "o.md", "-", "--store", ownerStore)
	c.ok(t, work, nil, "push", c.url(locked.Name()), "--store", ownerStore, "--quiet")
	raw, _ := locked.GetLocal(ctxT(t), "obsydian_livesync_milestone")
	m, _ := negotiate.ParseMilestone(raw)
	m.Lock(m.AcceptedNodes[0], negotiate.CouchDBChunkRange, false)
	b, _ := json.Marshal(m)
	if err := locked.PutLocal(ctxT(t), "obsydian_livesync_milestone", b); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"unreachable", nil, []string{"pull", closed}, 4, "connection refused"},
		{"wrong password", map[string]string{"LIVESYNC_PASSWORD": "wrong-password"}, []string{"pull", c.url(vault)}, 5, "user name or password"},
		{"wrong passphrase pull", map[string]string{"LIVESYNC_PASSPHRASE": "wrong"}, []string{"pull", c.url(vault)}, 6, "passphrase is wrong"},
		{"wrong passphrase push", map[string]string{"LIVESYNC_PASSPHRASE": "wrong"}, []string{"push", c.url(vault)}, 6, "passphrase is wrong"},
		{"wrong passphrase export", map[string]string{"LIVESYNC_PASSPHRASE": "wrong"}, []string{"export", c.url(vault), "--out", filepath.Join(work, "out")}, 6, "passphrase is wrong"},
		{"no passphrase", nil, []string{"pull", c.url(vault)}, 2, "LIVESYNC_PASSPHRASE"},
		// A replica that holds documents is refused; an empty one would
		// join (TestCLILockedRemote).
		{"locked remote", nil, []string{"pull", c.url(locked.Name()), "--store", plainStore}, 7, "--rebuild-local"},
		{"settings mismatch", nil, []string{"push", c.url(vault), "--store", plainStore}, 7, "encrypt is true there, false here"},
		{"no database", nil, []string{"pull", c.url(dbName(t))}, 7, "does not exist"},
		{"password in the URL", nil, []string{"pull", strings.Replace(c.url(vault), "@", ":"+c.couch.password+"@", 1)}, 2, "process list"},
		{"store is a full device", good, []string{"pull", c.url(vault), "--store", "/dev/full"}, 8, "no space left"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.args, "--quiet")
			if !strings.Contains(strings.Join(args, " "), "--store") {
				args = append(args, "--store", filepath.Join(t.TempDir(), "s.db"))
			}
			r := c.run(t, work, tc.env, args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 || strings.Contains(r.stderr, "goroutine") {
				t.Errorf("exit %d, stderr %q; want exit %d and one line mentioning %q", r.code, r.stderr, tc.code, tc.want)
			}
			c.noSecrets(t, r, pass)
			if r.stdout != "" {
				t.Errorf("stdout: %q", r.stdout)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(work, "out")); err == nil {
		t.Error("an export with a wrong passphrase created its output folder")
	}
	if after := docCount(); after != before {
		t.Errorf("the failures changed the vault: %d documents, was %d", after, before)
	}

	// --json: the error as an object on stdout too.
	r := c.run(t, work, nil, "pull", closed, "--json", "--store", filepath.Join(work, "j.db"))
	var e struct {
		OK       bool   `json:"ok"`
		ExitCode int    `json:"exit_code"`
		Error    string `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &e); err != nil || e.OK || e.ExitCode != 4 || !strings.Contains(e.Error, "connection refused") {
		t.Errorf("--json error: %q (%v)", r.stdout, err)
	}
}

// testCLIDiskFull: a pull into a replica on a real, tiny filesystem (a
// 96 KiB tmpfs in a private mount namespace, via unshare) stops with exit
// 8 and one line; the replica left behind is consistent and a pull into
// it elsewhere resumes and completes; the files then export byte for
// byte. Skipped where unshare cannot mount (no user namespaces).
func testCLIDiskFull(t *testing.T, c *cliRunner) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1): cannot make a tiny filesystem")
	}
	v := readVectorVault(t, "e2ee")
	db := loadVaultDump(t, couchServer, v.vaultDump)
	work := t.TempDir()
	tiny := filepath.Join(work, "tiny")
	saved := filepath.Join(work, "saved.db")
	os.Mkdir(tiny, 0o755)
	// In the namespace: mount, pull (expected to fail), then copy the
	// replica out before the mount disappears with the namespace.
	script := `mount -t tmpfs -o size=96k tmpfs "$1" || exit 99
"$2" pull "$3" --store "$1/store.db" --quiet; code=$?
cp "$1/store.db" "$4"; exit $code`
	cmd := exec.Command(unshare, "-rm", "sh", "-c", script, "sh", tiny, c.bin, c.url(db.Name()), saved)
	cmd.Env = c.environ(map[string]string{"LIVESYNC_PASSPHRASE": "vector-passphrase"})
	out, err := cmd.CombinedOutput()
	code := cmd.ProcessState.ExitCode()
	if code == 99 || (err != nil && code < 0) {
		t.Skipf("cannot mount a tmpfs in a user namespace here: %s", out)
	}
	if code != 8 || !strings.Contains(string(out), "no space left on the device") || strings.Count(string(out), "\n") != 1 {
		t.Fatalf("pull into a full filesystem: exit %d, output %q; want exit 8 and one line", code, out)
	}
	// The replica left behind opens, and a pull resumes it.
	env := map[string]string{"LIVESYNC_PASSPHRASE": "vector-passphrase"}
	c.ok(t, work, env, "pull", c.url(db.Name()), "--store", saved, "--quiet")
	c.ok(t, work, env, "export", "--out", filepath.Join(work, "vault"), "--store", saved, "--quiet")
	checkFolder(t, filepath.Join(work, "vault"), dumpInputs(t, v.vaultDump), v.times)
}

// testCLIOutput: without a terminal, progress is plain lines on stderr;
// --json prints one object on stdout.
func testCLIOutput(t *testing.T, c *cliRunner) {
	v := readVectorVault(t, "plain")
	db := loadVaultDump(t, couchServer, v.vaultDump)
	work := t.TempDir()
	r := c.ok(t, work, nil, "pull", c.url(db.Name()), "--store", filepath.Join(work, "a.db"))
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "pulled ") || !strings.Contains(lines[len(lines)-1], "docs") {
		t.Errorf("progress lines: %q", r.stderr)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "pulled ") {
			t.Errorf("a progress line that is not plain: %q", l)
		}
	}
	if !strings.HasPrefix(r.stdout, "pulled 30") || !strings.Contains(r.stdout, db.Name()) {
		t.Errorf("summary: %q", r.stdout)
	}
	r = c.ok(t, work, nil, "sync", c.url(db.Name()), "--store", filepath.Join(work, "b.db"), "--json", "--quiet")
	var res map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("--json: %q %v", r.stdout, err)
	}
	for _, k := range []string{"ok", "command", "remote", "store", "elapsed_ms", "pulled", "pushed"} {
		if _, ok := res[k]; !ok {
			t.Errorf("--json lacks %q: %s", k, r.stdout)
		}
	}
	pulled, _ := res["pulled"].(map[string]any)
	for _, k := range []string{"docs_read", "docs_written", "write_failures", "last_seq"} {
		if _, ok := pulled[k]; !ok {
			t.Errorf("pulled lacks %q: %s", k, r.stdout)
		}
	}
	if r.stderr != "" {
		t.Errorf("--quiet printed %q", r.stderr)
	}
}
