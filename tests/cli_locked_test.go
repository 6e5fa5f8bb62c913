package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	miniogo "github.com/minio/minio-go/v7"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// pluginNode is the node id of the device that made the vectors (the
// vault dumps' and journals' milestone).
const pluginNode = "vector-node-0001"

// TestCLILockedRemote: a remote left as the
// plugin's "Rebuild everything" leaves it (locked, only the plugin's
// device accepted, the plugin's full tweak values) on the CouchDB-protocol
// test server, on the relay binary and on a bucket of the S3 test server.
// Against each:
//   - the read-only commands (ls --remote, export with a throwaway
//     replica, doctor) and the failed attempts (a wrong passphrase) write
//     nothing to the remote;
//   - export into an empty --store replica joins and gives every file byte
//     for byte, as does pull into an empty replica;
//   - after the plugin rebuilds again, the replica that holds documents is
//     refused with exit 7 and the documented message, and the commands
//     doctor advises (pull --rebuild-local, unlock) are run and succeed.
func TestCLILockedRemote(t *testing.T) {
	t.Parallel()
	couchServer(t) // fail (CI) or skip before building
	s3Server(t)
	bin := buildCLI(t)
	t.Run("CouchServer", func(t *testing.T) {
		testLockedRemote(t, couchLockedTarget(t, bin, couchServer(t), true))
	})
	t.Run("Relay", func(t *testing.T) {
		p := startRelayProcess(t, buildRelay(t), t.TempDir())
		testLockedRemote(t, couchLockedTarget(t, bin, relayCredentials(t, p), false))
	})
	t.Run("Bucket", func(t *testing.T) {
		testLockedRemote(t, bucketLockedTarget(t, bin))
	})
}

// lockedTarget is a remote holding the plugin's E2EE vault, and the means
// to watch and change it behind the CLI's back.
type lockedTarget struct {
	c   *cliRunner
	url string            // the remote for the CLI
	env map[string]string // its secrets
	// milestone reads the remote's milestone.
	milestone func(t *testing.T) *negotiate.Milestone
	// plugin changes the milestone as the plugin's device would.
	plugin func(t *testing.T, fn func(m *negotiate.Milestone))
	// writes returns what the CLI wrote to the remote since the last call
	// (or since plugin last changed it).
	writes func(t *testing.T) []string
}

// pluginRebuilt is the plugin's markRemoteLocked(true) after "Rebuild
// everything": locked, and only the plugin's device accepted.
func pluginRebuilt(m *negotiate.Milestone) { m.Lock(pluginNode, negotiate.CouchDBChunkRange, false) }

// couchLockedTarget loads the plugin's E2EE vault dump into a new
// database on server e and locks it as the plugin's rebuild leaves it.
// With proxy, the CLI reaches it through a proxy that records every
// request that could write; without, writes are seen in the database's
// update_seq and the _rev of its sync parameters and milestone. (The
// relay is watched the second way: through httputil.ReverseProxy, about
// one run in ten of its pulls ended in "unexpected EOF", a fault of the
// proxy path that no direct client of the relay meets.)
func couchLockedTarget(t *testing.T, bin string, e couchEnv, proxy bool) lockedTarget {
	t.Helper()
	ctx := ctxT(t)
	name := dbName(t)
	db, err := couchdb.New(couchdb.Config{URL: e.url, Database: name, User: e.user, Password: e.password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Create(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = db.Destroy(ctx)
	})
	d := readVectorVault(t, "e2ee").vaultDump
	var docs []json.RawMessage
	for _, r := range d.Remote.AllDocs {
		docs = append(docs, r.Doc)
	}
	if _, err := db.BulkDocs(ctx, docs); err != nil {
		t.Fatal(err)
	}
	for _, l := range d.Remote.LocalDocs {
		var head struct {
			ID string `json:"_id"`
		}
		_ = json.Unmarshal(l, &head)
		if err := db.PutLocal(ctx, strings.TrimPrefix(head.ID, "_local/"), l); err != nil {
			t.Fatal(err)
		}
	}
	base, writes := e.url, func(*testing.T) []string { return nil }
	if proxy {
		w := startWriteWatch(t, e.url)
		base, writes = w.url(), func(*testing.T) []string { return w.take() }
	} else {
		state := func(t *testing.T) string {
			info, err := db.Info(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			ms, _ := db.GetLocal(ctxT(t), "obsydian_livesync_milestone")
			sp, _ := db.GetLocal(ctxT(t), "obsidian_livesync_sync_parameters")
			return fmt.Sprintf("update_seq %s, milestone %s, sync parameters %s", info.UpdateSeq, ms, sp)
		}
		last := state(t)
		writes = func(t *testing.T) []string {
			now := state(t)
			defer func() { last = now }()
			if now != last {
				return []string{now}
			}
			return nil
		}
	}
	lt := lockedTarget{
		c:   &cliRunner{bin: bin, home: t.TempDir(), couch: e},
		url: strings.Replace(base, "://", "://"+e.user+"@", 1) + "/" + name,
		env: map[string]string{"LIVESYNC_PASSPHRASE": d.FixedValues.Passphrase},
		milestone: func(t *testing.T) *negotiate.Milestone {
			m, err := db.ReadMilestone(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			return m
		},
		writes: writes,
	}
	lt.plugin = func(t *testing.T, fn func(m *negotiate.Milestone)) {
		_, err := db.UpdateMilestone(ctxT(t), pluginNode, time.Now(), func(m *negotiate.Milestone, _ bool) (bool, error) {
			fn(m)
			return true, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		lt.writes(t) // the plugin's own write is not the CLI's
	}
	lt.plugin(t, pluginRebuilt)
	return lt
}

// bucketLockedTarget uploads the plugin's E2EE journal objects into a new
// bucket and locks its milestone as the plugin's rebuild leaves it. The
// bucket's listing (keys and ETags) tells what the CLI wrote.
func bucketLockedTarget(t *testing.T, bin string) lockedTarget {
	t.Helper()
	b, e := freshBucket(t)
	dir := filepath.Join(vectorsDir, "journal", "e2ee")
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
	var snap map[string]string
	listing := func(t *testing.T) map[string]string {
		out := map[string]string{}
		for o := range b.Client().ListObjects(ctxT(t), b.Name(), miniogo.ListObjectsOptions{Prefix: b.Prefix(), Recursive: true}) {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			out[o.Key] = o.ETag
		}
		return out
	}
	lt := lockedTarget{
		c:   &cliRunner{bin: bin, home: t.TempDir()},
		url: bucketURL(e, b),
		env: s3CLIEnv(e, "vector-passphrase"),
		milestone: func(t *testing.T) *negotiate.Milestone {
			m, err := b.ReadMilestone(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			return m
		},
		writes: func(t *testing.T) []string {
			now := listing(t)
			var diff []string
			for k, v := range now {
				if snap[k] != v {
					diff = append(diff, "wrote "+k)
				}
			}
			for k := range snap {
				if _, ok := now[k]; !ok {
					diff = append(diff, "deleted "+k)
				}
			}
			snap = now
			return diff
		},
	}
	lt.plugin = func(t *testing.T, fn func(m *negotiate.Milestone)) {
		_, err := b.UpdateMilestone(ctxT(t), pluginNode, time.Now(), func(m *negotiate.Milestone, _ bool) (bool, error) {
			fn(m)
			return true, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		snap = listing(t)
	}
	lt.plugin(t, func(m *negotiate.Milestone) { m.Lock(pluginNode, negotiate.JournalChunkRange, false) })
	return lt
}

func testLockedRemote(t *testing.T, lt lockedTarget) {
	c := lt.c
	work := t.TempDir()
	v := readVectorVault(t, "e2ee")
	inputs := dumpInputs(t, v.vaultDump)
	m0 := lt.milestone(t)
	if !m0.Locked || !slices.Equal(m0.AcceptedNodes, []string{pluginNode}) || m0.TweakValues[negotiate.PreferredNode].Len() < 30 {
		t.Fatalf("the remote is not as the plugin's rebuild leaves it: %+v", m0)
	}
	noTrace := func(t *testing.T, what string) {
		t.Helper()
		if w := lt.writes(t); len(w) > 0 {
			t.Errorf("%s wrote to the remote: %v", what, w)
		}
		if m := lt.milestone(t); len(m.NodeInfo) != len(m0.NodeInfo) || m.Rev != m0.Rev && m0.Rev != "" {
			t.Errorf("%s changed the milestone: %d node_info entries (was %d), _rev %q (was %q)", what, len(m.NodeInfo), len(m0.NodeInfo), m.Rev, m0.Rev)
		}
	}
	lt.writes(t)

	// Reading leaves no trace, and reads a locked remote without joining.
	r := c.ok(t, work, lt.env, "ls", "--remote", lt.url, "--json")
	if n := strings.Count(r.stdout, `"path"`); n != len(inputs) {
		t.Errorf("ls --remote listed %d files, want %d: %s", n, len(inputs), r.stdout)
	}
	noTrace(t, "ls --remote")
	out := filepath.Join(work, "throwaway")
	c.ok(t, work, lt.env, "export", lt.url, "--out", out, "--quiet")
	checkFolder(t, out, inputs, nil)
	noTrace(t, "export with a throwaway replica")
	r = c.run(t, work, lt.env, "doctor", lt.url)
	if r.code != 7 || !strings.Contains(r.stdout, "livesync pull") {
		t.Errorf("doctor on a locked remote: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	noTrace(t, "doctor")

	// Failed attempts leave no trace either.
	wrong := map[string]string{}
	for k, val := range lt.env {
		wrong[k] = val
	}
	wrong["LIVESYNC_PASSPHRASE"] = "not the vault's passphrase"
	if r := c.run(t, work, wrong, "pull", lt.url, "--store", filepath.Join(work, "wrong.db")); r.code != 6 {
		t.Errorf("pull with a wrong passphrase: exit %d, want 6: %s", r.code, r.stderr)
	}
	noTrace(t, "a pull with a wrong passphrase")

	// An empty replica joins as it fetches, and gets every file.
	joined := filepath.Join(work, "joined.db")
	out = filepath.Join(work, "joined")
	r = c.ok(t, work, lt.env, "export", lt.url, "--store", joined, "--out", out, "--quiet")
	checkFolder(t, out, inputs, nil)
	if !strings.Contains(r.stderr, "joins the remote's accepted devices") {
		t.Errorf("the join was not announced: %s", r.stderr)
	}
	m := lt.milestone(t)
	if !m.Locked || len(m.AcceptedNodes) != 2 || m.AcceptedNodes[0] != pluginNode || len(m.NodeInfo) != len(m0.NodeInfo)+1 {
		t.Errorf("after joining: locked %v, accepted %v, %d node_info entries", m.Locked, m.AcceptedNodes, len(m.NodeInfo))
	}
	me := m.AcceptedNodes[1]
	// An accepted device syncs a locked remote; connecting again adds no
	// second entry.
	c.ok(t, work, lt.env, "sync", lt.url, "--store", joined, "--quiet")
	if m := lt.milestone(t); len(m.NodeInfo) != len(m0.NodeInfo)+1 {
		t.Errorf("a second connection of the same replica: %d node_info entries", len(m.NodeInfo))
	}
	lt.writes(t)

	// The plugin rebuilds again: the replica holds documents from before,
	// and is refused.
	lt.plugin(t, pluginRebuilt)
	m0 = lt.milestone(t)
	// Reading through the replica (cat --remote) still works, and leaves
	// no trace.
	if r := c.ok(t, work, lt.env, "cat", "tiny.md", "--remote", lt.url, "--store", joined); r.stdout != string(inputs["tiny.md"]) {
		t.Errorf("cat --remote: %q", r.stdout)
	}
	noTrace(t, "cat --remote")
	r = c.run(t, work, lt.env, "pull", lt.url, "--store", joined)
	if r.code != 7 || !strings.Contains(r.stderr, "--rebuild-local --store "+joined) || !strings.Contains(r.stderr, "livesync unlock") ||
		!strings.Contains(r.stderr, "vector-device") {
		t.Errorf("pull into a non-empty replica on a locked remote: exit %d, want 7 naming --rebuild-local, unlock and the accepted device: %s", r.code, r.stderr)
	}
	noTrace(t, "a refused pull")

	// doctor names the ways out; each is run and succeeds.
	advice := doctorCommands(t, c, work, lt.env, lt.url, "--store", joined)
	if len(advice) != 2 || !slices.Contains(advice[0], "--rebuild-local") || advice[1][0] != "unlock" {
		t.Fatalf("doctor's advice: %q", advice)
	}
	noTrace(t, "doctor with a replica")
	r = c.ok(t, work, lt.env, advice[0]...)
	if !strings.Contains(r.stderr, "discarded the local replica's") {
		t.Errorf("--rebuild-local: %s", r.stderr)
	}
	out = filepath.Join(work, "rebuilt-local")
	c.ok(t, work, lt.env, "export", "--store", joined, "--out", out)
	checkFolder(t, out, inputs, nil)
	if m := lt.milestone(t); !slices.Equal(m.AcceptedNodes, []string{pluginNode, me}) {
		t.Errorf("after --rebuild-local: accepted %v, want the plugin's device and this one (%s), the node id kept", m.AcceptedNodes, me)
	}

	lt.plugin(t, pluginRebuilt)
	advice = doctorCommands(t, c, work, lt.env, lt.url, "--store", joined)
	r = c.ok(t, work, lt.env, append(advice[1], "--yes")...)
	if !strings.Contains(r.stdout, "vector-device") || !strings.Contains(r.stdout, "unlocked") {
		t.Errorf("unlock: %s", r.stdout)
	}
	if m := lt.milestone(t); m.Locked || !slices.Equal(m.AcceptedNodes, []string{me}) {
		t.Errorf("after unlock: locked %v, accepted %v", m.Locked, m.AcceptedNodes)
	}
	c.ok(t, work, lt.env, "sync", lt.url, "--store", joined, "--quiet")
	if r := c.run(t, work, lt.env, "unlock", lt.url, "--store", joined); r.code != 0 || !strings.Contains(r.stdout, "not locked") {
		t.Errorf("unlock of an unlocked remote: exit %d %s", r.code, r.stdout)
	}
}

// doctorCommands runs doctor --json and returns the commands its
// milestone finding advises.
func doctorCommands(t *testing.T, c *cliRunner, work string, env map[string]string, args ...string) [][]string {
	t.Helper()
	return doctorFinding(t, c, work, env, "milestone", args...)
}

// writeWatch is a proxy to a CouchDB-protocol server that records every
// request that could write (reads sent as POST, such as _all_docs keys,
// _bulk_get, _changes with a selector, _revs_diff and logins, excepted).
type writeWatch struct {
	srv *httptest.Server
	mu  sync.Mutex
	log []string
}

func startWriteWatch(t *testing.T, upstream string) *writeWatch {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) }}
	w := &writeWatch{}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if isWrite(r) {
			w.mu.Lock()
			w.log = append(w.log, r.Method+" "+r.URL.Path)
			w.mu.Unlock()
		}
		rp.ServeHTTP(rw, r)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *writeWatch) url() string { return w.srv.URL }

func (w *writeWatch) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.log
	w.log = nil
	return out
}

func isWrite(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	case http.MethodPost:
		for _, read := range []string{"/_all_docs", "/_bulk_get", "/_changes", "/_revs_diff", "/_session"} {
			if strings.HasSuffix(r.URL.Path, read) {
				return false
			}
		}
	}
	return true
}

// TestCLIDoctorAdvice runs the commands doctor advises (its --json
// "commands") for a database that does not exist and for a replica whose
// settings differ from the remote's, and sees each succeed; the locked
// cases are in TestCLILockedRemote.
func TestCLIDoctorAdvice(t *testing.T) {
	t.Parallel()
	e := couchServer(t)
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir(), couch: e}
	work := t.TempDir()
	env := map[string]string{"LIVESYNC_PASSPHRASE": "advice passphrase"}
	store := filepath.Join(work, "laptop.db")
	src := writeInputs(t, readVectorVault(t, "plain"))
	c.ok(t, work, env, "put", "note.md", filepath.Join(src, "tiny.md"), "--store", store, "--encrypt")

	// A database that does not exist: the advised push creates it.
	name := dbName(t)
	missing := c.url(name)
	mdb := openDB(t, couchServer, name, false, nil)
	t.Cleanup(func() { _ = mdb.Destroy(context.Background()) })
	advice := doctorFinding(t, c, work, env, "database", missing, "--store", store)
	if len(advice) != 1 || advice[0][0] != "push" {
		t.Fatalf("advice for a missing database: %q", advice)
	}
	c.ok(t, work, env, advice[0]...)
	c.ok(t, work, env, "doctor", missing, "--store", store)

	// A remote whose preferred settings differ (a plain vault) from the
	// replica's (end-to-end encrypted): a fresh replica adopts the
	// remote's; a rebuild imposes the replica's.
	plain := loadVaultDump(t, couchServer, readVectorVault(t, "plain").vaultDump)
	advice = doctorFinding(t, c, work, env, "settings", c.url(plain.Name()), "--store", store)
	if len(advice) != 2 || advice[0][0] != "pull" || !slices.Contains(advice[1], "--rebuild") {
		t.Fatalf("advice for different settings: %q", advice)
	}
	c.ok(t, work, env, append(advice[0], "--quiet")...)
	c.ok(t, work, env, append(advice[1], "--yes", "--quiet")...)
	c.ok(t, work, env, "doctor", c.url(plain.Name()), "--store", store)
}

// doctorFinding runs doctor --json and returns the commands of its
// problem finding check.
func doctorFinding(t *testing.T, c *cliRunner, work string, env map[string]string, check string, args ...string) [][]string {
	t.Helper()
	r := c.run(t, work, env, append([]string{"doctor", "--json"}, args...)...)
	var rep struct {
		Findings []struct {
			Check    string     `json:"check"`
			Status   string     `json:"status"`
			Commands [][]string `json:"commands"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v: %s %s", err, r.stdout, r.stderr)
	}
	for _, f := range rep.Findings {
		if f.Check == check && f.Status == "problem" {
			return f.Commands
		}
	}
	t.Fatalf("doctor found no %s problem: %s", check, r.stdout)
	return nil
}
