package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testCLISyncRoundTrip: put files into replica A and push them (E2EE,
// obfuscated) to database 1; replica B pulls database 1 and pushes into
// database 2 (a new database: a new salt, so B re-encrypts); replica C
// pulls database 2 and reads every file back. Then C edits, adds and
// deletes files and syncs; B syncs and sees exactly that, with the
// deletion a LiveSync soft deletion (deleted: true) on the server.
func testCLISyncRoundTrip(t *testing.T, c *cliRunner) {
	const pass = "round trip passphrase"
	env := map[string]string{"LIVESYNC_PASSPHRASE": pass}
	v := readVectorVault(t, "e2ee")
	inputs := dumpInputs(t, v.vaultDump)
	work := t.TempDir()
	src := writeInputs(t, v)
	storeA, storeB, storeC := filepath.Join(work, "a.db"), filepath.Join(work, "b.db"), filepath.Join(work, "c.db")
	db1, db2 := dbName(t), dbName(t)
	for _, name := range []string{db1, db2} {
		db := openDB(t, couchServer, name, false, nil)
		t.Cleanup(func() { _ = db.Destroy(ctxT(t)) })
	}

	for p := range inputs {
		c.ok(t, work, env, "put", p, filepath.Join(src, filepath.FromSlash(p)), "--store", storeA, "--encrypt", "--obfuscate-paths")
	}
	r := c.ok(t, work, env, "push", c.url(db1), "--store", storeA, "--quiet")
	c.noSecrets(t, r, pass)
	c.ok(t, work, env, "pull", c.url(db1), "--store", storeB, "--quiet")
	c.ok(t, work, env, "push", c.url(db2), "--store", storeB, "--quiet")
	c.ok(t, work, env, "pull", c.url(db2), "--store", storeC, "--quiet")
	for p, want := range inputs {
		if got := c.ok(t, work, env, "cat", p, "--store", storeC).stdout; got != string(want) {
			t.Errorf("cat %s from C: %d bytes, want %d", p, len(got), len(want))
		}
	}
	// The two databases hold the vault under different salts.
	s1 := remoteCodec(t, openDB(t, couchServer, db1, false, nil), pass)
	s2 := remoteCodec(t, openDB(t, couchServer, db2, false, nil), pass)
	f1, _ := decodeDocs(t, dbDocs(t, openDB(t, couchServer, db1, false, nil)), s1)
	f2, _ := decodeDocs(t, dbDocs(t, openDB(t, couchServer, db2, false, nil)), s2)
	sameFiles(t, f1, inputs)
	sameFiles(t, f2, inputs)

	// C changes things and syncs; B syncs and sees them.
	c.ok(t, work, env, "put", "notes/new.md", "-", "--store", storeC) // empty stdin: an empty file
	changed := filepath.Join(work, "changed.md")
	os.WriteFile(changed, []byte("changed\n"), 0o644)
	c.ok(t, work, env, "put", "tiny.md", changed, "--store", storeC)
	c.ok(t, work, env, "rm", "data/data.json", "--store", storeC)
	r = c.ok(t, work, env, "sync", c.url(db2), "--store", storeC, "--quiet")
	if !strings.Contains(r.stdout, "pushed 4 docs") { // new.md, tiny.md + its chunk, data.json's deletion
		t.Errorf("sync from C: %s", r.stdout)
	}
	c.ok(t, work, env, "sync", c.url(db2), "--store", storeB, "--quiet")
	ls := c.ok(t, work, env, "ls", "--store", storeB, "--json").stdout
	var listing struct {
		Files []struct {
			Path    string `json:"path"`
			Size    int64  `json:"size"`
			Deleted bool   `json:"deleted"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(ls), &listing); err != nil {
		t.Fatal(err)
	}
	paths := map[string]int64{}
	for _, f := range listing.Files {
		paths[f.Path] = f.Size
	}
	if _, ok := paths["data/data.json"]; ok || paths["tiny.md"] != 8 || len(paths) != len(inputs) {
		t.Errorf("B after sync: %v", paths)
	}
	if got := c.ok(t, work, env, "cat", "tiny.md", "--store", storeB).stdout; got != "changed\n" {
		t.Errorf("B's tiny.md: %q", got)
	}
	// On the server the deletion is the plugin's soft deletion.
	rem := c.ok(t, work, env, "ls", "--remote", c.url(db2), "--deleted", "--json", "--store", storeB).stdout
	if !strings.Contains(rem, `"deleted":true`) || !strings.Contains(rem, `"path":"data/data.json"`) {
		t.Errorf("ls --remote --deleted: %s", rem)
	}
	st := c.ok(t, work, env, "status", "--store", storeB).stdout
	if !strings.Contains(st, c.couch.url+"/"+db1) || !strings.Contains(st, c.couch.url+"/"+db2) {
		t.Errorf("status does not list both remotes:\n%s", st)
	}
}

// testCLIMetadataOnly: a metadata-only pull (readChunksOnline) leaves
// the files held; cat --remote fetches a file's chunks on demand through
// engine/fetch and keeps them, and status counts what is still held.
func testCLIMetadataOnly(t *testing.T, c *cliRunner) {
	v := readVectorVault(t, "plain")
	db := loadVaultDump(t, couchServer, v.vaultDump)
	inputs := dumpInputs(t, v.vaultDump)
	work := t.TempDir()
	store := filepath.Join(work, "s.db")
	c.ok(t, work, nil, "pull", c.url(db.Name()), "--metadata-only", "--store", store, "--quiet")
	type status struct {
		Files     int `json:"files"`
		HeldFiles int `json:"held_files"`
	}
	var st status
	json.Unmarshal([]byte(c.ok(t, work, nil, "status", "--json", "--store", store).stdout), &st)
	if st.Files != len(inputs) || st.HeldFiles != len(inputs)-1 { // empty.md has no chunks
		t.Fatalf("after a metadata-only pull: %+v", st)
	}
	if r := c.run(t, work, nil, "cat", "notes/large.md", "--store", store); r.code != 3 || !strings.Contains(r.stderr, "--remote") {
		t.Errorf("cat without --remote: exit %d %q", r.code, r.stderr)
	}
	got := c.ok(t, work, nil, "cat", "notes/large.md", "--remote", c.url(db.Name()), "--store", store).stdout
	if got != string(inputs["notes/large.md"]) {
		t.Errorf("cat --remote: %d bytes, want %d", len(got), len(inputs["notes/large.md"]))
	}
	json.Unmarshal([]byte(c.ok(t, work, nil, "status", "--json", "--store", store).stdout), &st)
	if st.HeldFiles != len(inputs)-2 {
		t.Errorf("after cat --remote: %+v, want one file fewer held", st)
	}
	// The fetched chunks stayed: cat works without the remote now.
	if got := c.ok(t, work, nil, "cat", "notes/large.md", "--store", store).stdout; got != string(inputs["notes/large.md"]) {
		t.Error("the fetched chunks were not kept")
	}
}

// testCLIWatch: "pull --watch" follows the remote until Ctrl-C,
// reconnecting after the server goes away and comes back; Ctrl-C ends it
// with exit 0 and the pulled files are in the replica.
func testCLIWatch(t *testing.T, c *cliRunner) {
	db := freshDB(t, couchServer, nil)
	proxy := startProxy(t, couchServer)
	work := t.TempDir()
	watchStore, writerStore := filepath.Join(work, "w.db"), filepath.Join(work, "x.db")
	viaProxy := strings.Replace(proxy.URL(), "://", "://"+c.couch.user+"@", 1) + "/" + db.Name()
	os.WriteFile(filepath.Join(work, "first"), []byte("first\n"), 0o644)
	c.ok(t, work, nil, "put", "first.md", filepath.Join(work, "first"), "--store", writerStore)
	c.ok(t, work, nil, "push", c.url(db.Name()), "--store", writerStore, "--quiet")

	cmd := exec.Command(c.bin, "pull", viaProxy, "--watch", "--verbose", "--store", watchStore)
	cmd.Dir = work
	cmd.Env = c.environ(nil)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var seen []string
	pulled := 0 // documents the watch said it pulled so far
	// waitFor reads stderr until a line contains want, or, with want "",
	// until the watch has pulled total documents.
	waitFor := func(want string, total int) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the watch ended early; stderr: %q", seen)
				}
				seen = append(seen, l)
				var n int
				var unit string
				if _, err := fmt.Sscanf(l, "pulled %d %s", &n, &unit); err == nil {
					pulled += n
				}
				if (want != "" && strings.Contains(l, want)) || (want == "" && pulled >= total) {
					return
				}
			case <-deadline:
				cmd.Process.Signal(syscall.SIGQUIT)
				for l := range lines {
					seen = append(seen, l)
				}
				t.Fatalf("no %q (or %d documents pulled) within 30 s; stderr so far: %q", want, total, seen)
			}
		}
	}
	waitFor("watching", 0)
	waitFor("", 3) // the version document, first.md and its chunk

	// A new file on the server arrives.
	os.WriteFile(filepath.Join(work, "second"), []byte("second\n"), 0o644)
	c.ok(t, work, nil, "put", "second.md", filepath.Join(work, "second"), "--store", writerStore)
	c.ok(t, work, nil, "push", c.url(db.Name()), "--store", writerStore, "--quiet")
	waitFor("", 5)

	// The server goes away and comes back: the watch reconnects and
	// gets what was written meanwhile.
	proxy.Cut()
	os.WriteFile(filepath.Join(work, "third"), []byte("third\n"), 0o644)
	c.ok(t, work, nil, "put", "third.md", filepath.Join(work, "third"), "--store", writerStore)
	c.ok(t, work, nil, "push", c.url(db.Name()), "--store", writerStore, "--quiet")
	proxy.Reopen()
	waitFor("", 7)

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitFor("stopped", 0)
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the watch ended with %v after Ctrl-C, want exit 0", err)
	}
	for p, want := range map[string]string{"first.md": "first\n", "second.md": "second\n", "third.md": "third\n"} {
		if got := c.ok(t, work, nil, "cat", p, "--store", watchStore).stdout; got != want {
			t.Errorf("%s: %q, want %q", p, got, want)
		}
	}
}

// testCLIConfigFile: remotes by name from the configuration file
// ($LIVESYNC_CONFIG), with the password and passphrase in files it names
// and the store it names; no secret in the environment or on the
// command line.
func testCLIConfigFile(t *testing.T, c *cliRunner) {
	const pass = "config file passphrase"
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pw"), []byte(c.couch.password+"\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "pass"), []byte(pass+"\n"), 0o600)
	name := dbName(t)
	t.Cleanup(func() { _ = openDB(t, couchServer, name, false, nil).Destroy(ctxT(t)) })
	cfg := fmt.Sprintf(`store = "replica/store.db"
default_remote = "home"
device_name = "cli-test"

[remote.home]
url = %q
password_file = "pw"
passphrase_file = "pass"
e2ee = true
obfuscate_paths = true
`, c.url(name))
	os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600)
	env := map[string]string{"LIVESYNC_CONFIG": filepath.Join(dir, "config.toml"), "LIVESYNC_PASSWORD": ""}
	work := t.TempDir()
	c.ok(t, work, env, "put", "a.md", filepath.Join(dir, "pass"))
	r := c.ok(t, work, env, "push", "--quiet")
	c.noSecrets(t, r, pass)
	if !strings.Contains(r.stdout, "pushed 2 docs") { // a.md and its chunk
		t.Errorf("push to the default remote: %q", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "replica", "store.db")); err != nil {
		t.Errorf("the configuration's store was not used: %v", err)
	}
	// Another replica pulls the remote by name and reads the file.
	c.ok(t, work, env, "pull", "home", "--store", filepath.Join(work, "b.db"), "--quiet")
	if got := c.ok(t, work, env, "cat", "a.md", "--store", filepath.Join(work, "b.db")).stdout; got != pass+"\n" {
		t.Errorf("cat: %q", got)
	}
	// The vault is encrypted as the configuration says.
	codec := remoteCodec(t, openDB(t, couchServer, name, false, nil), pass)
	if !codec.Settings().Encrypt || !codec.Settings().PathObfuscation {
		t.Errorf("settings on the server: %+v", codec.Settings())
	}
	// The milestone names the device as configured.
	raw, _ := openDB(t, couchServer, name, false, nil).GetLocal(ctxT(t), "obsydian_livesync_milestone")
	if !strings.Contains(string(raw), `"device_name":"cli-test"`) {
		t.Errorf("milestone: %s", raw)
	}
}
