package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	w := startWorker(t, nil)
	start := time.Now()
	res, err := http.Get(w.env.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	first := time.Since(start)
	start = time.Now()
	for range 5 {
		res, err := http.Get(w.env.url + "/")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	warm := time.Since(start) / 5
	t.Logf("Worker cold start: miniflare load %d ms, first request %d ms (later requests %d ms each)", w.loadMs, first.Milliseconds(), warm.Milliseconds())

	relay := startBenchRelay(t)
	for _, tc := range []struct {
		name string
		env  couchEnv
	}{{"livesync-relay", relay}, {"Worker (workerd, D1)", w.env}} {
		db := openDB(t, fixedServer(tc.env), dbName(t), true, nil)
		seedPullDocs(t, db, n)
		stats := pouchPullStats(t, node, script, tc.env, db.Name())
		if stats.Docs != n {
			t.Errorf("%s: pulled %d docs, want %d", tc.name, stats.Docs, n)
		}
		t.Logf("%s: PouchDB 9 pulled %d docs in %.0f ms: %.0f docs/s", tc.name, stats.Docs, stats.Ms, stats.DocsPerSec)
	}
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
