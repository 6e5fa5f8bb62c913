package tests

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
)

// workersDir holds run-worker.mjs and the miniflare it runs the Worker
// under (npm ci there).
const workersDir = "workers"

var workerBuild struct {
	once sync.Once
	dist string
	err  error
}

// buildWorker builds wasm/workers once per test binary.
func buildWorker(t *testing.T) string {
	t.Helper()
	workerBuild.once.Do(func() {
		out, err := exec.Command("bash", "../wasm/workers/build.sh").CombinedOutput()
		if err != nil {
			workerBuild.err = fmt.Errorf("wasm/workers/build.sh: %v\n%s", err, out)
			return
		}
		workerBuild.dist, workerBuild.err = filepath.Abs("../wasm/workers/dist")
	})
	if workerBuild.err != nil {
		t.Fatal(workerBuild.err)
	}
	return workerBuild.dist
}

// worker is the Worker running under workerd (miniflare) with a local D1.
type worker struct {
	env    couchEnv
	loadMs int
}

// startWorker builds the Worker and runs it under miniflare until t ends.
// Without tests/workers/node_modules it fails under CI and skips
// otherwise.
func startWorker(t *testing.T, vars map[string]string) *worker {
	t.Helper()
	return startWorkerFrom(t, "", vars)
}

// startWorkerFrom runs the Worker built into dist ("": wasm/workers/dist,
// built by buildWorker).
func startWorkerFrom(t *testing.T, dist string, vars map[string]string) *worker {
	t.Helper()
	if _, err := os.Stat(filepath.Join(workersDir, "node_modules", "miniflare")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tests/workers/node_modules is missing but CI is set: run npm ci in tests/workers")
		}
		t.Skip("tests/workers/node_modules is missing: run npm ci in tests/workers")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required to run the Worker under miniflare")
	}
	if dist == "" {
		dist = buildWorker(t)
	}
	pw := make([]byte, 12)
	_, _ = rand.Read(pw)
	e := couchEnv{user: "admin", password: hex.EncodeToString(pw)}
	migrations, err := filepath.Abs("../wasm/workers/migrations")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "run-worker.mjs", "--dist", dist, "--migrations", migrations)
	cmd.Dir = workersDir
	cmd.Env = append(os.Environ(), "LIVESYNC_USERS="+e.user+":"+e.password+":* alice:alice-password:alicedb")
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdin, err := cmd.StdinPipe() // closing it stops the runner
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("run-worker.mjs stderr (the last 4 KB):\n%s", tail(stderr.Bytes(), 4096))
		}
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
	}()
	var line string
	select {
	case l, ok := <-lines:
		if !ok {
			cmd.Wait()
			t.Fatalf("run-worker.mjs ended before serving: %s", stderr.String())
		}
		line = l
	case <-time.After(60 * time.Second):
		t.Fatalf("run-worker.mjs did not start in 60 s: %s", stderr.String())
	}
	var ready struct {
		URL    string `json:"url"`
		LoadMs int    `json:"loadMs"`
	}
	if err := json.Unmarshal([]byte(line), &ready); err != nil || ready.URL == "" {
		t.Fatalf("run-worker.mjs printed %q: %v", line, err)
	}
	e.url = strings.TrimSuffix(ready.URL, "/")
	return &worker{env: e, loadMs: ready.LoadMs}
}

// lockedBuffer collects a process's output while tests read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

func (l *lockedBuffer) String() string { return string(l.Bytes()) }

// tail is the last n bytes of b.
func tail(b []byte, n int) []byte { return b[max(0, len(b)-n):] }

func (w *worker) server() couchFactory { return fixedServer(w.env) }

// notOnWorkers are the relaySuite tests that change the server's
// configuration through /_node/_local/_config: a Worker's configuration
// is its vars and secrets, read when its instance starts and the same in
// every isolate, so TestWorkersLimits checks the 413 answers with the
// Worker's own limits.
var notOnWorkers = map[string]bool{
	"TestCouchDBTooLarge":   true,
	"TestFaultPushTooLarge": true,
}

// TestWorkersConformance runs the CouchDB-protocol suite the relay and
// express-pouchdb pass (the engine's adapter, kivik, PouchDB 9 syncing
// the plugin's E2EE vault dump both ways) and the engine's endpoint suite
// against the Worker under workerd.
func TestWorkersConformance(t *testing.T) {
	w := startWorker(t, nil)
	srv := w.server()
	for _, tc := range relaySuite {
		if notOnWorkers[tc.name] {
			continue
		}
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, srv) })
	}
	t.Run("EndpointSuite", func(t *testing.T) {
		enginetest.EndpointSuite(t, func(t *testing.T) (engine.Endpoint, func()) {
			db := openDB(t, srv, dbName(t), false, nil)
			if err := db.Create(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			return db, func() { _ = db.Destroy(context.Background()) }
		})
	})
}

// TestWorkersCLIPull loads the plugin's E2EE vault dump into the Worker
// and has the CLI pull it: every file comes out byte for byte.
func TestWorkersCLIPull(t *testing.T) {
	w := startWorker(t, nil)
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir(), couch: w.env}
	v := readVectorVault(t, "e2ee")
	db := loadVaultDump(t, w.server(), v.vaultDump)
	env := map[string]string{"LIVESYNC_PASSPHRASE": "vector-passphrase"}
	work := t.TempDir()
	st := filepath.Join(work, "pulled.db")
	c.ok(t, work, env, "pull", c.url(db.Name()), "--store", st, "--quiet")
	want := dumpInputs(t, v.vaultDump)
	if len(want) == 0 {
		t.Fatal("the vault dump has no files")
	}
	for p, b := range want {
		if got := c.ok(t, work, env, "cat", p, "--store", st).stdout; got != string(b) {
			t.Errorf("cat %s: %d bytes, want %d (not byte for byte)", p, len(got), len(b))
		}
	}
	out := filepath.Join(work, "vault")
	c.ok(t, work, env, "export", c.url(db.Name()), "--out", out, "--quiet")
	checkFolder(t, out, want, v.times)
}

// TestWorkersLimits: wrong credentials are answered 401, a document over
// the Worker's document limit and a body over its request limit 413.
func TestWorkersLimits(t *testing.T) {
	w := startWorker(t, map[string]string{"LIVESYNC_MAX_REQUEST_BYTES": "2000000"})
	db := openDB(t, w.server(), dbName(t), true, nil)
	base := w.env.url + "/" + db.Name()
	do := func(user, pw, method, url string, body []byte) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctxT(t), method, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth(user, pw)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, tc := range []struct{ user, pw string }{{w.env.user, "wrong"}, {"nobody", "x"}, {"alice", w.env.password}} {
		if code, body := do(tc.user, tc.pw, "GET", base, nil); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong password: %d %s, want 401", tc.user, code, body)
		}
	}
	if code, _ := do("alice", "alice-password", "GET", base, nil); code != http.StatusForbidden {
		t.Errorf("alice reading another user's database: %d, want 403", code)
	}
	doc := fmt.Sprintf(`{"docs":[{"_id":"big","type":"leaf","data":"%s"}]}`, strings.Repeat("x", 1_100_000))
	if code, body := do(w.env.user, w.env.password, "POST", base+"/_bulk_docs", []byte(doc)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a 1.1 MB document: %d %.200s, want 413", code, body)
	}
	var many bytes.Buffer
	many.WriteString(`{"docs":[`)
	for i := range 30 {
		if i > 0 {
			many.WriteByte(',')
		}
		fmt.Fprintf(&many, `{"_id":"d%d","type":"leaf","data":"%s"}`, i, strings.Repeat("y", 100_000))
	}
	many.WriteString("]}")
	if code, body := do(w.env.user, w.env.password, "POST", base+"/_bulk_docs", many.Bytes()); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a 3 MB request: %d %.200s, want 413", code, body)
	}
	info, err := db.Info(ctxT(t))
	if err != nil || info.DocCount != 0 {
		t.Errorf("after the refused writes: %+v, %v; want an empty database", info, err)
	}
}
