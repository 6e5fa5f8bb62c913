package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
	"github.com/livesync-go/livesync-go/tests/internal/faultnet"
)

const toxiCLIFiles = 1200

// TestToxiCLIPull runs the livesync binary's pull through toxiproxy
// (latency 20±10 ms up, slicer down) and, behind it, an HTTP proxy that
// counts the documents every _bulk_get asks for. A vault of 1,200 files
// (2,400 documents) is imported directly into the server. Each fault in turn (a reset, an
// answer cut off after 1 KB, the server gone, a black hole closed after
// 1 s) strikes at the eighth _bulk_get of a pull (past its first write): the pull exits 4 (remote
// unreachable) with one line on stderr, and the bbolt replica it leaves
// lists each document once and never fewer than before; the clean pull
// resumes (reads less than the whole vault). After the faults a clean pull completes;
// in all, the documents asked for again are at most what a fault can lose
// per run (the pull writes fetched pages in groups of up to 1,000
// documents: an unwritten group, and the pages in flight), each run
// resuming from its checkpoint, and the replica exports the 1,200 files
// byte for byte.
func TestToxiCLIPull(t *testing.T) {
	t.Parallel()
	e := couchServer(t)
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir(), couch: e}
	work := t.TempDir()
	src := filepath.Join(work, "vault")
	files := map[string][]byte{}
	for i := range toxiCLIFiles {
		p := fmt.Sprintf("notes/%04d.md", i)
		files[p] = []byte(fmt.Sprintf("# Note %d\n%s", i, strings.Repeat(fmt.Sprintf("pulled through a bad network, %d\n", i), 20)))
		if err := os.MkdirAll(filepath.Join(src, "notes"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, filepath.FromSlash(p)), files[p], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := dbName(t)
	t.Cleanup(func() { _ = openDB(t, couchServer, db, false, nil).Destroy(ctxT(t)) })
	c.ok(t, work, nil, "import", src, c.url(db), "--quiet")

	h := toxiHTTP(t, e.url)
	asked := newBodyLog(h, "/_bulk_get", "/_bulk_get")
	p := toxiProxy(t, hostOf(t, h.URL()))
	toxiMust(t, p.Latency("latency", faultnet.Up, 20*time.Millisecond, 10*time.Millisecond))
	toxiMust(t, p.Slicer("slicer", faultnet.Down, 1024, 512, 50*time.Microsecond))
	url := "http://" + e.user + "@" + p.Addr() + "/" + db
	st := filepath.Join(work, "replica.db")
	faults := []toxiUpstreamFault{
		{"reset_peer", func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.ResetPeer("fault", faultnet.Down, 0)) }, removeFault},
		{"answer_cut_mid_body", func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.CutAfter("fault", faultnet.Down, 1024)) }, removeFault},
		{"server_gone", func(t *testing.T, p *faultnet.Proxy) { p.Cut() }, func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.Restore()) }},
		{"black_hole", func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.Timeout("fault", faultnet.Up, time.Second)) }, removeFault},
	}
	held := 0
	for _, f := range faults {
		asked.arm(8, func() { f.inject(t, p) })
		r := c.run(t, work, nil, "pull", url, "--store", st, "--quiet")
		asked.arm(0, nil)
		f.heal(t, p)
		if r.code != 4 || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("pull through %s: exit %d, stderr %q; want exit 4 and one line", f.name, r.code, r.stderr)
		}
		n := replicaDocs(t, st)
		t.Logf("pull through %s: %d documents in the replica; %s", f.name, n, strings.TrimSpace(r.stderr))
		if n < held {
			t.Errorf("the replica shrank through %s: %d documents, %d before", f.name, n, held)
		}
		held = n
	}
	var res struct {
		Pulled struct {
			DocsRead int `json:"docs_read"`
		} `json:"pulled"`
	}
	r := c.ok(t, work, nil, "pull", url, "--store", st, "--quiet", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("--json: %q %v", r.stdout, err)
	}
	total, distinct := asked.counts()
	if held == 0 || res.Pulled.DocsRead >= distinct {
		t.Errorf("the faulted pulls kept %d documents and the clean pull read %d of %d: it did not resume", held, res.Pulled.DocsRead, distinct)
	}
	t.Logf("the last pull read %d documents; in all %d asked for, %d distinct (%d asked again)", res.Pulled.DocsRead, total, distinct, total-distinct)
	// A pull writes the pages it has fetched together, up to 1,000
	// documents (or 1 MiB) a write, so a fault loses at most that group
	// and the pages in flight.
	if bound := (1000 + 2*100) * len(faults); total-distinct > bound {
		t.Errorf("%d documents asked for again, more than a write group and the pages in flight (%d) per fault", total-distinct, bound/len(faults))
	}
	if last := replicaDocs(t, st); last < 2*len(files) {
		t.Errorf("the replica holds %d documents after the clean pull", last)
	}
	out := filepath.Join(work, "out")
	c.ok(t, work, nil, "export", "--out", out, "--store", st, "--quiet")
	got := map[string][]byte{}
	for p := range files {
		b, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(p)))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		got[p] = b
	}
	sameFiles(t, got, files)
}

// replicaDocs opens a bbolt replica the CLI left (closed) and checks it
// lists each document once; it returns how many it holds.
func replicaDocs(t *testing.T, path string) int {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		return 0
	}
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatalf("open the replica after a failed pull: %v", err)
	}
	defer st.Close()
	all, err := st.AllDocs(ctxT(t), store.AllDocsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range all {
		if seen[d.ID] {
			t.Errorf("%s is listed twice in the replica", d.ID)
		}
		seen[d.ID] = true
	}
	return len(all)
}
