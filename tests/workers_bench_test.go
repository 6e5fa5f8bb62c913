package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
)

// workersPullDocsDefault is how many documents TestWorkersPullRate pulls
// unless LIVESYNC_WORKERS_PULL_DOCS says otherwise (the README's figure
// is LIVESYNC_WORKERS_PULL_DOCS=10000).
const workersPullDocsDefault = 1000

// TestWorkersPullRate measures, in one run on one machine, the Worker's
// cold start under workerd (loading it, and its first request) and how
// fast PouchDB 9 with LiveSync's settings pulls the same documents from
// the Worker (D1 in SQLite) and from the livesync-relay binary.
func TestWorkersPullRate(t *testing.T) {
	n := workersPullDocsDefault
	if v := os.Getenv("LIVESYNC_WORKERS_PULL_DOCS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("LIVESYNC_WORKERS_PULL_DOCS=%q is not a positive count", v)
		}
	}
	node, script := pouchClient(t)
	before := workerdProcs()
	w := startWorker(t, nil)
	cpu := newWorkerdCPU(before)
	start := time.Now()
	getRoot(t, w.env.url)
	first := time.Since(start)
	const warmN = 50
	c0 := cpu.used()
	start = time.Now()
	for range warmN {
		getRoot(t, w.env.url)
	}
	warm := time.Since(start) / warmN
	t.Logf("Worker cold start: miniflare load %d ms, first request %d ms; GET / after it: %.2f ms each, workerd CPU %.2f ms each (over %d)",
		w.loadMs, first.Milliseconds(), float64(warm.Microseconds())/1000, float64((cpu.used()-c0).Microseconds())/1000/warmN, warmN)

	relay := startBenchRelay(t)
	for _, tc := range []struct {
		name string
		env  couchEnv
	}{{"livesync-relay", relay}, {"Worker (workerd, D1)", w.env}} {
		db := openDB(t, fixedServer(tc.env), dbName(t), true, nil)
		seedPullDocs(t, db, n)
		c0 := cpu.used()
		stats := pouchPullStats(t, node, script, tc.env, db.Name())
		if stats.Docs != n {
			t.Errorf("%s: pulled %d docs, want %d", tc.name, stats.Docs, n)
		}
		t.Logf("%s: PouchDB 9 pulled %d docs in %.0f ms: %.0f docs/s", tc.name, stats.Docs, stats.Ms, stats.DocsPerSec)
		if tc.env.url == w.env.url && cpu.ok {
			t.Logf("%s: workerd CPU (the Worker and its local D1) %.0f ms for the pull, %.2f ms per 100 docs",
				tc.name, float64((cpu.used() - c0).Milliseconds()), float64((cpu.used()-c0).Microseconds())/1000/float64(n)*100)
		}
	}
}

func getRoot(t *testing.T, url string) {
	t.Helper()
	res, err := http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %s", res.Status)
	}
}

// workerdCPU adds up the CPU time of the workerd processes one
// startWorker started: those under this test process that were not
// running before it (Linux /proc; ok is false elsewhere). The figure
// includes miniflare's local D1, which runs in the same process.
type workerdCPU struct {
	pids []int
	ok   bool
}

func newWorkerdCPU(before map[int]bool) workerdCPU {
	var c workerdCPU
	for pid := range workerdProcs() {
		if !before[pid] {
			c.pids = append(c.pids, pid)
		}
	}
	c.ok = len(c.pids) > 0
	return c
}

// used is the CPU time (user and system) the processes used so far.
func (c workerdCPU) used() time.Duration {
	var ticks int64
	for _, pid := range c.pids {
		if st, ok := procStat(pid); ok {
			ticks += st.utime + st.stime
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// clockTicks is Linux's USER_HZ, the unit of /proc/PID/stat's times.
const clockTicks = 100

type procStatus struct {
	comm         string
	ppid         int
	utime, stime int64
}

// procStat reads /proc/PID/stat.
func procStat(pid int) (procStatus, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStatus{}, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStatus{}, false
	}
	f := strings.Fields(s[end+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return procStatus{}, false
	}
	st := procStatus{comm: s[open+1 : end]}
	st.ppid, _ = strconv.Atoi(f[1])
	st.utime, _ = strconv.ParseInt(f[11], 10, 64)
	st.stime, _ = strconv.ParseInt(f[12], 10, 64)
	return st, true
}

// workerdProcs are the workerd processes below this test process.
func workerdProcs() map[int]bool {
	out := map[int]bool{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	parent := map[int]int{}
	var cands []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := procStat(pid)
		if !ok {
			continue
		}
		parent[pid] = st.ppid
		if st.comm == "workerd" {
			cands = append(cands, pid)
		}
	}
	me := os.Getpid()
	for _, pid := range cands {
		for p, n := parent[pid], 0; p > 1 && n < 64; p, n = parent[p], n+1 {
			if p == me {
				out[pid] = true
				break
			}
		}
	}
	return out
}

// startBenchRelay starts the livesync-relay binary with one admin.
func startBenchRelay(t *testing.T) couchEnv {
	t.Helper()
	wd := t.TempDir()
	conf := fmt.Sprintf("data_dir = %q\n\n[[users]]\nname = \"admin\"\npassword_env = \"LSGO_BENCH_PASSWORD\"\nadmin = true\n", filepath.Join(wd, "data"))
	if err := os.WriteFile(filepath.Join(wd, "relay.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	password := hexToken(t)
	p := startRelayArgs(t, buildRelay(t), wd, []string{"LSGO_BENCH_PASSWORD=" + password},
		"--config", filepath.Join(wd, "relay.toml"), "--listen", "127.0.0.1:0")
	return couchEnv{url: p.url, user: "admin", password: password}
}

// seedPullDocs writes n small documents shaped like LiveSync's chunks and
// notes (new_edits=false), 200 per request.
func seedPullDocs(t *testing.T, db *couchdb.DB, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for i := 0; i < n; i += 200 {
		var docs []json.RawMessage
		for j := i; j < min(i+200, n); j++ {
			if j%2 == 0 {
				docs = append(docs, raw(fmt.Sprintf(`{"_id":"h:c%06d","_rev":"1-%032x","type":"leaf","data":"%s"}`, j, j, strings.Repeat("d", 200))))
			} else {
				docs = append(docs, raw(fmt.Sprintf(`{"_id":"n%06d.md","_rev":"1-%032x","type":"plain","path":"n%06d.md","children":["h:c%06d"],"ctime":1,"mtime":1,"size":200}`, j, j, j, j-1)))
			}
		}
		res, err := db.BulkDocs(ctx, docs)
		if err != nil {
			t.Fatalf("seed %d docs: %v", n, err)
		}
		for _, r := range res {
			if r.Error != "" {
				t.Fatalf("seed %s: %s %s", r.ID, r.Error, r.Reason)
			}
		}
	}
}

// pullStats is what replicate.mjs --stats prints.
type pullStats struct {
	Docs       int     `json:"docs"`
	Ms         float64 `json:"ms"`
	DocsPerSec float64 `json:"docsPerSec"`
}

// pouchPullStats pulls database name of e with replicate.mjs --stats
// (LiveSync's batch size and batches limit).
func pouchPullStats(t *testing.T, node, script string, e couchEnv, name string) pullStats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, "--url", e.url, "--db", name, "--stats")
	cmd.Env = append(os.Environ(), "LIVESYNC_TEST_COUCHDB_USER="+e.user, "LIVESYNC_TEST_COUCHDB_PASSWORD="+e.password)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("replicate.mjs --stats: %v\n%s", err, stderr.String())
	}
	var s pullStats
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("replicate.mjs --stats printed %q: %v", stdout.String(), err)
	}
	return s
}
