package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// TestCLIS3 runs the livesync command against journal buckets on the S3
// test server (and the CouchDB one for the bridge): every subtest is a
// separate process per command, secrets only in the environment. Run
// one with -run 'TestCLIS3/Vectors'.
func TestCLIS3(t *testing.T) {
	t.Parallel()
	couchServer(t) // fail (CI) or skip before building
	s3Server(t)
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir(), couch: couchServer(t)}
	t.Run("ImportExport", func(t *testing.T) { testCLIS3ImportExport(t, c) })
	t.Run("JournalVectors", func(t *testing.T) { testCLIS3JournalVectors(t, c) })
	t.Run("CouchToBucket", func(t *testing.T) { testCLIS3CouchToBucket(t, c) })
	t.Run("Failures", func(t *testing.T) { testCLIS3Failures(t, c) })
	t.Run("CorruptPack", func(t *testing.T) { testCLIS3CorruptPack(t, c) })
	t.Run("Watch", func(t *testing.T) { testCLIS3Watch(t, c) })
	t.Run("ConfigAndDoctor", func(t *testing.T) { testCLIS3ConfigDoctor(t, c) })
}

// bucketURL is the s3:// URL of b for the CLI: the access key, never the
// secret, with the server's region and TLS settings.
func bucketURL(e s3Env, b *minio.Bucket) string {
	return bucketURLAt(e, e.hostPort(), b.Name(), b.Prefix())
}

func bucketURLAt(e s3Env, hostPort, bucket, prefix string) string {
	q := url.Values{}
	if e.region != "" {
		q.Set("region", e.region)
	}
	if e.secure {
		q.Set("tls", "1")
	}
	if f := os.Getenv("LIVESYNC_TEST_S3_CA_FILE"); f != "" {
		q.Set("ca-file", f)
	}
	u := "s3://" + e.access + "@" + hostPort + "/" + bucket + "/" + prefix
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// s3Env returns the environment of a CLI run against e with passphrase
// (empty: none).
func s3CLIEnv(e s3Env, passphrase string) map[string]string {
	env := map[string]string{"LIVESYNC_S3_SECRET_KEY": e.secret}
	if passphrase != "" {
		env["LIVESYNC_PASSPHRASE"] = passphrase
	}
	return env
}

// testCLIS3ImportExport: a folder imported into a new bucket (E2EE on)
// comes back byte for byte, with its mtimes, through an export with a
// fresh replica; the packs hold no plaintext.
func testCLIS3ImportExport(t *testing.T, c *cliRunner) {
	const pass = "bucket import passphrase"
	b, e := freshBucket(t)
	env := s3CLIEnv(e, pass)
	v := readVectorVault(t, "e2ee")
	inputs := dumpInputs(t, v.vaultDump)
	src := writeInputs(t, v)
	work := t.TempDir()
	r := c.ok(t, work, env, "import", src, bucketURL(e, b), "--encrypt", "--quiet")
	c.noSecrets(t, r, pass, e.secret)
	keys, err := b.List(ctxT(t), "")
	if err != nil || len(keys) != 2 { // 301 records: packs of 251 at most, as upstream's
		t.Fatalf("packs after the import: %v %v", keys, err)
	}
	if !strings.Contains(r.stdout, "imported 9 files") || !strings.Contains(r.stdout, "sent 2 packs (301 records)") {
		t.Fatalf("import: %q", r.stdout)
	}
	body, err := b.Get(ctxT(t), keys[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := journal.Open(keys[0], body, nil, 0); err == nil {
		t.Error("the pack opens without the passphrase: it is not encrypted")
	}
	if _, err := b.GetSyncParameters(ctxT(t)); err != nil {
		t.Errorf("no sync parameters (salt) on the bucket: %v", err)
	}

	out := filepath.Join(work, "out")
	r = c.ok(t, work, env, "export", bucketURL(e, b), "--out", out)
	if !strings.Contains(r.stdout, "exported 9 files") || !strings.Contains(r.stderr, "received 2/2 packs") {
		t.Errorf("export: stdout %q stderr %q", r.stdout, r.stderr)
	}
	checkFolder(t, out, inputs, v.times)

	// ls --remote reads the packs directly.
	var ls struct {
		Files []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(c.ok(t, work, env, "ls", "--remote", bucketURL(e, b), "--json").stdout), &ls); err != nil || len(ls.Files) != len(inputs) {
		t.Errorf("ls --remote: %+v %v", ls, err)
	}
}

// testCLIS3JournalVectors: the journal objects the real plugin uploaded
// (plain, and E2EE with path obfuscation) are put in a bucket as they
// are; "livesync export s3://…" reproduces the vault's input files byte
// for byte.
func testCLIS3JournalVectors(t *testing.T, c *cliRunner) {
	v := readVectorVault(t, "plain")
	inputs := dumpInputs(t, v.vaultDump)
	for _, kind := range []string{"plain", "e2ee"} {
		t.Run(kind, func(t *testing.T) {
			b, e := freshBucket(t)
			dir := filepath.Join(vectorsDir, "journal", kind)
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, en := range entries {
				if en.IsDir() || en.Name() == "manifest.json" {
					continue
				}
				body, err := os.ReadFile(filepath.Join(dir, en.Name()))
				if err != nil {
					t.Fatal(err)
				}
				if err := b.PutObject(ctxT(t), en.Name(), body); err != nil {
					t.Fatal(err)
				}
			}
			pass := ""
			if kind == "e2ee" {
				pass = "vector-passphrase"
			}
			work := t.TempDir()
			out := filepath.Join(work, "out")
			r := c.ok(t, work, s3CLIEnv(e, pass), "export", bucketURL(e, b), "--out", out, "--quiet")
			c.noSecrets(t, r, e.secret)
			if !strings.Contains(r.stdout, "exported 9 files") {
				t.Errorf("export: %q", r.stdout)
			}
			checkFolder(t, out, inputs, nil)
		})
	}
}

// testCLIS3CouchToBucket: pull a vault from CouchDB into a replica, push
// the replica to a new bucket, export the bucket with a fresh replica:
// the same files. Then a change made on the bucket side reaches CouchDB
// through the same replica (sync both ways).
func testCLIS3CouchToBucket(t *testing.T, c *cliRunner) {
	v := readVectorVault(t, "e2ee")
	db := loadVaultDump(t, couchServer, v.vaultDump)
	inputs := dumpInputs(t, v.vaultDump)
	b, e := freshBucket(t)
	env := s3CLIEnv(e, "vector-passphrase")
	work := t.TempDir()
	bridge := filepath.Join(work, "bridge.db")
	c.ok(t, work, env, "pull", c.url(db.Name()), "--store", bridge, "--quiet")
	r := c.ok(t, work, env, "push", bucketURL(e, b), "--store", bridge)
	if !strings.Contains(r.stdout, "sent 2 packs (302 records) to s3://") || !strings.Contains(r.stderr, "sent 1 pack (251 records)") {
		t.Errorf("push to the bucket: stdout %q stderr %q", r.stdout, r.stderr)
	}
	// The bucket adopted the vault's settings (E2EE, obfuscation).
	raw, err := b.GetMilestone(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := negotiate.ParseMilestone(raw)
	pref := m.TweakValues[negotiate.PreferredNode]
	if !bytes.Contains(mustMarshal(t, pref), []byte(`"encrypt":true`)) || !bytes.Contains(mustMarshal(t, pref), []byte(`"usePathObfuscation":true`)) {
		t.Errorf("the bucket's preferred settings: %s", mustMarshal(t, pref))
	}
	out := filepath.Join(work, "out")
	c.ok(t, work, env, "export", bucketURL(e, b), "--out", out, "--quiet")
	checkFolder(t, out, inputs, v.times)

	// A device of the bucket changes a file; the bridge brings it to
	// CouchDB.
	dev := filepath.Join(work, "dev.db")
	c.ok(t, work, env, "pull", bucketURL(e, b), "--store", dev, "--quiet")
	os.WriteFile(filepath.Join(work, "new"), []byte("from the bucket side\n"), 0o644)
	c.ok(t, work, env, "put", "tiny.md", filepath.Join(work, "new"), "--store", dev)
	r = c.ok(t, work, env, "sync", bucketURL(e, b), "--store", dev, "--quiet")
	if !strings.Contains(r.stdout, "sent 1 pack (2 records)") { // tiny.md and its chunk
		t.Errorf("sync from the device: %q", r.stdout)
	}
	c.ok(t, work, env, "pull", bucketURL(e, b), "--store", bridge, "--quiet")
	c.ok(t, work, env, "push", c.url(db.Name()), "--store", bridge, "--quiet")
	check := filepath.Join(work, "check.db")
	c.ok(t, work, env, "pull", c.url(db.Name()), "--store", check, "--quiet")
	if got := c.ok(t, work, env, "cat", "tiny.md", "--store", check).stdout; got != "from the bucket side\n" {
		t.Errorf("tiny.md on CouchDB: %q", got)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testCLIS3Failures: each failure class of a bucket gives its exit code
// and one line on stderr without a secret.
func testCLIS3Failures(t *testing.T, c *cliRunner) {
	const pass = "the right passphrase"
	b, e := freshBucket(t)
	work := t.TempDir()
	good := s3CLIEnv(e, pass)
	c.ok(t, work, good, "put", "a.md", "-", "--store", filepath.Join(work, "owner.db"), "--encrypt")
	c.ok(t, work, good, "push", bucketURL(e, b), "--store", filepath.Join(work, "owner.db"), "--quiet")
	before := allObjects(t, b)

	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := l.Addr().String()
	l.Close()
	wrongSecret := s3CLIEnv(e, pass)
	wrongSecret["LIVESYNC_S3_SECRET_KEY"] = "not-the-secret-key"
	wrongPass := s3CLIEnv(e, "not the passphrase")
	for _, tc := range []struct {
		name   string
		env    map[string]string
		args   []string
		code   int
		inLine string
	}{
		{"wrong secret", wrongSecret, []string{"pull", bucketURL(e, b)}, 5, "refused the credentials"},
		{"missing bucket", good, []string{"pull", bucketURLAt(e, e.hostPort(), newBucketName(e), "x/")}, 7, "does not exist"},
		{"wrong passphrase (pull)", wrongPass, []string{"pull", bucketURL(e, b)}, 6, "passphrase is wrong"},
		{"wrong passphrase (push)", wrongPass, []string{"push", bucketURL(e, b)}, 6, "passphrase is wrong"},
		{"closed port", good, []string{"pull", bucketURLAt(e, closed, b.Name(), b.Prefix())}, 4, "connection refused"},
		{"secret in the URL", good, []string{"pull", strings.Replace(bucketURL(e, b), "@", ":"+e.secret+"@", 1)}, 2, "process list"},
		{"metadata-only", good, []string{"pull", bucketURL(e, b), "--metadata-only"}, 2, "CouchDB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.args, "--store", filepath.Join(t.TempDir(), "s.db"), "--quiet")
			r := c.run(t, work, tc.env, args...)
			c.noSecrets(t, r, pass, e.secret)
			if r.code != tc.code || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tc.inLine) {
				t.Errorf("exit %d (want %d); stderr: %q (want one line with %q)", r.code, tc.code, r.stderr, tc.inLine)
			}
		})
	}
	// Nothing was written to the bucket by the failed runs.
	if after := allObjects(t, b); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("objects before %v, after %v", before, after)
	}
}

// testCLIS3CorruptPack: of three packs the middle one is damaged; a pull
// warns about it (key and stage), exits 1 and brings the other files;
// status lists it; --retry-quarantined tries it again, and once the pack
// is whole again it arrives.
func testCLIS3CorruptPack(t *testing.T, c *cliRunner) {
	const pass = "corrupt pack passphrase"
	b, e := freshBucket(t)
	env := s3CLIEnv(e, pass)
	work := t.TempDir()
	writer := filepath.Join(work, "writer.db")
	for i, name := range []string{"one.md", "two.md", "three.md"} {
		os.WriteFile(filepath.Join(work, name), []byte(strings.Repeat(name+"\n", i+1)), 0o644)
		c.ok(t, work, env, "put", name, filepath.Join(work, name), "--store", writer, "--encrypt")
		c.ok(t, work, env, "push", bucketURL(e, b), "--store", writer, "--quiet")
	}
	keys, err := b.List(ctxT(t), "")
	if err != nil || len(keys) != 3 {
		t.Fatalf("packs: %v %v", keys, err)
	}
	good, err := b.Get(ctxT(t), keys[1])
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 0xff
	if err := b.PutObject(ctxT(t), strings.TrimPrefix(keys[1], b.Prefix()), bad); err != nil {
		t.Fatal(err)
	}

	reader := filepath.Join(work, "reader.db")
	r := c.run(t, work, env, "pull", bucketURL(e, b), "--store", reader, "--quiet")
	if r.code != 1 || !strings.Contains(r.stderr, "warning: ") || !strings.Contains(r.stderr, keys[1]) ||
		!strings.Contains(r.stderr, "stage decrypt") || !strings.Contains(r.stderr, "--retry-quarantined") {
		t.Fatalf("pull with a damaged pack: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, name := range []string{"one.md", "three.md"} {
		c.ok(t, work, env, "cat", name, "--store", reader)
	}
	if r := c.run(t, work, env, "cat", "two.md", "--store", reader); r.code != 3 {
		t.Errorf("two.md arrived from a damaged pack: exit %d", r.code)
	}
	st := c.ok(t, work, env, "status", "--store", reader).stdout
	if !strings.Contains(st, "quarantined") || !strings.Contains(st, keys[1]) {
		t.Errorf("status does not list the quarantined pack:\n%s", st)
	}
	// A second pull still says so (exit 1), without downloading it again.
	if r := c.run(t, work, env, "pull", bucketURL(e, b), "--store", reader, "--quiet"); r.code != 1 || !strings.Contains(r.stderr, "still quarantined") {
		t.Errorf("second pull: exit %d, stderr %q", r.code, r.stderr)
	}
	// Retrying a pack that is still damaged sets it aside again.
	if r := c.run(t, work, env, "pull", bucketURL(e, b), "--store", reader, "--retry-quarantined", "--quiet"); r.code != 1 || !strings.Contains(r.stderr, "set aside") {
		t.Errorf("retry of a damaged pack: exit %d, stderr %q", r.code, r.stderr)
	}
	// Repaired, the retry brings it.
	if err := b.PutObject(ctxT(t), strings.TrimPrefix(keys[1], b.Prefix()), good); err != nil {
		t.Fatal(err)
	}
	c.ok(t, work, env, "pull", bucketURL(e, b), "--store", reader, "--retry-quarantined", "--quiet")
	if got := c.ok(t, work, env, "cat", "two.md", "--store", reader).stdout; got != "two.md\ntwo.md\n" {
		t.Errorf("two.md after the repair: %q", got)
	}
	var js struct {
		Remotes map[string]struct {
			Quarantined []any `json:"quarantined"`
		} `json:"remotes"`
	}
	json.Unmarshal([]byte(c.ok(t, work, env, "status", "--json", "--store", reader).stdout), &js)
	for id, rs := range js.Remotes {
		if len(rs.Quarantined) != 0 {
			t.Errorf("%s still has quarantined packs: %v", id, rs.Quarantined)
		}
	}
}

// testCLIS3Watch: "pull --watch" polls the bucket, goes on through a
// server cut (retrying with backoff) and stops on Ctrl-C with exit 0.
func testCLIS3Watch(t *testing.T, c *cliRunner) {
	b, e := freshBucket(t)
	env := s3CLIEnv(e, "")
	proxy := &tcpProxy{t: t, target: e.hostPort(), conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxy.addr = ln.Addr().String()
	proxy.serve(ln)
	t.Cleanup(func() { proxy.Cut(); proxy.wg.Wait() })

	work := t.TempDir()
	writer, watcher := filepath.Join(work, "w.db"), filepath.Join(work, "watch.db")
	put := func(name string) {
		os.WriteFile(filepath.Join(work, name), []byte(name+"\n"), 0o644)
		c.ok(t, work, env, "put", name, filepath.Join(work, name), "--store", writer)
		c.ok(t, work, env, "push", bucketURL(e, b), "--store", writer, "--quiet")
	}
	put("first.md")
	w := startWatch(t, c, work, env, "pull", bucketURLAt(e, proxy.addr, b.Name(), b.Prefix()), "--watch", "--interval", "1s", "--store", watcher)
	w.waitFor("watching")
	w.waitFor("received 1 pack (1 docs, 1 chunks)")
	put("second.md")
	w.waitFor("received 1 pack (1 docs, 1 chunks)")
	proxy.Cut()
	w.waitFor("retrying in 2s")
	put("third.md")
	proxy.Reopen()
	w.waitFor("received 1 pack (1 docs, 1 chunks)")
	w.stop()
	for _, name := range []string{"first.md", "second.md", "third.md"} {
		if got := c.ok(t, work, env, "cat", name, "--store", watcher).stdout; got != name+"\n" {
			t.Errorf("%s: %q", name, got)
		}
	}
}

// testCLIS3ConfigDoctor: a bucket named in the configuration file (kind =
// "s3", secret key and passphrase in files), and doctor's report on it
// and on a missing bucket.
func testCLIS3ConfigDoctor(t *testing.T, c *cliRunner) {
	const pass = "doctor passphrase"
	b, e := freshBucket(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "secret"), []byte(e.secret+"\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "pass"), []byte(pass+"\n"), 0o600)
	tlsLine := ""
	if e.secure {
		tlsLine = "tls = true\nca_file = " + jsonString(os.Getenv("LIVESYNC_TEST_S3_CA_FILE")) + "\n"
	}
	cfg := "default_remote = \"bucket\"\n\n[remote.bucket]\nkind = \"s3\"\n" +
		"endpoint = " + jsonString(e.hostPort()) + "\n" + tlsLine +
		"bucket = " + jsonString(b.Name()) + "\nprefix = " + jsonString(b.Prefix()) + "\nregion = " + jsonString(e.region) + "\n" +
		"access_key = " + jsonString(e.access) + "\nsecret_key_file = \"secret\"\npassphrase_file = \"pass\"\n" +
		"e2ee = true\ndirect_fetch = true\n\n" +
		"[remote.missing]\nkind = \"s3\"\nendpoint = " + jsonString(e.hostPort()) + "\n" + tlsLine +
		"bucket = " + jsonString(newBucketName(e)) + "\nregion = " + jsonString(e.region) + "\n" +
		"access_key = " + jsonString(e.access) + "\nsecret_key_file = \"secret\"\n"
	os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600)
	env := map[string]string{"LIVESYNC_CONFIG": filepath.Join(dir, "config.toml"), "LIVESYNC_PASSWORD": ""}
	work := t.TempDir()
	st := filepath.Join(work, "s.db")
	c.ok(t, work, env, "put", "a.md", filepath.Join(dir, "pass"), "--store", st)
	r := c.ok(t, work, env, "sync", "--store", st, "--quiet")
	c.noSecrets(t, r, pass, e.secret)
	if !strings.Contains(r.stdout, "sent 1 pack (2 records)") {
		t.Errorf("sync with the configured bucket: %q", r.stdout)
	}
	var rep doctorReport
	r = c.run(t, work, env, "doctor", "--json", "--store", st)
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("doctor: exit %d %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	for _, check := range []string{"server", "credentials", "bucket", "packs", "salt", "milestone", "passphrase", "quarantine"} {
		if rep.finding(check, "ok") == "" {
			t.Errorf("doctor: no ok %s finding: %s", check, r.stdout)
		}
	}
	if msg := rep.finding("packs", "ok"); !strings.Contains(msg, "1 journal pack") || !strings.Contains(msg, "newest was written") {
		t.Errorf("packs: %q", msg)
	}
	r = c.run(t, work, env, "doctor", "missing", "--store", st)
	if r.code != 7 || !strings.Contains(r.stdout, "does not exist") {
		t.Errorf("doctor on a missing bucket: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wrong := map[string]string{"LIVESYNC_CONFIG": env["LIVESYNC_CONFIG"], "LIVESYNC_PASSWORD": "", "LIVESYNC_PASSPHRASE": "wrong"}
	if r := c.run(t, work, wrong, "doctor", "--store", st); r.code != 6 || !strings.Contains(r.stdout, "PROBLEM  passphrase") {
		t.Errorf("doctor with a wrong passphrase: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// watchRun is a "--watch" command running in the background, its stderr
// read line by line.
type watchRun struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string
	seen  []string
}

func startWatch(t *testing.T, c *cliRunner, dir string, env map[string]string, args ...string) *watchRun {
	t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Dir = dir
	cmd.Env = c.environ(env)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &watchRun{t: t, cmd: cmd, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return w
}

// waitFor reads stderr until a line contains want (60 s at most).
func (w *watchRun) waitFor(want string) {
	w.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-w.lines:
			if !ok {
				w.t.Fatalf("the watch ended early waiting for %q; stderr: %q", want, w.seen)
			}
			w.seen = append(w.seen, l)
			if strings.Contains(l, want) {
				return
			}
		case <-deadline:
			w.cmd.Process.Signal(syscall.SIGQUIT)
			for l := range w.lines {
				w.seen = append(w.seen, l)
			}
			w.t.Fatalf("no %q within 60 s; stderr so far: %q", want, w.seen)
		}
	}
}

// stop sends Ctrl-C and expects "stopped" and exit 0.
func (w *watchRun) stop() {
	w.t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		w.t.Fatal(err)
	}
	w.waitFor("stopped")
	for range w.lines {
	}
	if err := w.cmd.Wait(); err != nil {
		w.t.Fatalf("the watch ended with %v after Ctrl-C, want exit 0; stderr: %q", err, w.seen)
	}
}
