package tests

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// TestCLIHunt: files pulled metadata-only are held; "livesync hunt"
// lists them and "hunt --retry" fetches their chunks through
// engine/hunt, from a CouchDB remote, and from a CouchDB remote and a
// journal bucket that each hold half of them.
func TestCLIHunt(t *testing.T) {
	t.Parallel()
	couchServer(t) // fail (CI) or skip before building
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir(), couch: couchServer(t)}
	t.Run("FromCouch", func(t *testing.T) { testCLIHuntFromCouch(t, c) })
	t.Run("SplitSources", func(t *testing.T) {
		s3Server(t)
		testCLIHuntSplit(t, c)
	})
}

// huntReport is hunt's --json answer.
type huntReport struct {
	OK   bool `json:"ok"`
	Held []struct {
		Path        string   `json:"path"`
		Chunks      int      `json:"chunks"`
		Missing     int      `json:"missing"`
		Since       *string  `json:"since"`
		Source      *string  `json:"source"`
		LastAttempt *string  `json:"last_attempt"`
		LastResult  *string  `json:"last_result"`
		NextAttempt *string  `json:"next_attempt"`
		Reasons     []string `json:"reasons"`
	} `json:"held"`
	Released []struct {
		Path          string `json:"path"`
		ChunksFetched int    `json:"chunks_fetched"`
	} `json:"released"`
	Sources []struct {
		Remote      string `json:"remote"`
		Status      string `json:"status"`
		Error       string `json:"error"`
		ChunksFound int    `json:"chunks_found"`
	} `json:"sources"`
}

func parseHunt(t *testing.T, r cliResult) huntReport {
	t.Helper()
	var h huntReport
	if err := json.Unmarshal([]byte(r.stdout), &h); err != nil {
		t.Fatalf("hunt --json: %v\nstdout: %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return h
}

// fileChunkIDs returns the distinct chunk ids of the files at paths.
func fileChunkIDs(metas map[string]livesync.Meta, paths ...string) map[string]bool {
	ids := map[string]bool{}
	for _, p := range paths {
		for _, id := range metas[p].Children {
			ids[id] = true
		}
	}
	return ids
}

// deleteDocs deletes documents of database name (plain DELETEs, as any
// client may).
func deleteDocs(t *testing.T, c *cliRunner, db *couchdb.DB, ids map[string]bool) {
	t.Helper()
	page, err := db.Changes(ctxT(t), engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ch := range page.Results {
		if !ids[ch.ID] || ch.Deleted {
			continue
		}
		u := c.couch.url + "/" + db.Name() + "/" + url.PathEscape(ch.ID) + "?rev=" + url.QueryEscape(ch.Revs[0])
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodDelete, u, nil)
		req.SetBasicAuth(c.couch.user, c.couch.password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("DELETE %s: HTTP %d", ch.ID, resp.StatusCode)
		}
		n++
	}
	if n != len(ids) {
		t.Fatalf("deleted %d of %d documents", n, len(ids))
	}
}

// testCLIHuntFromCouch: the plugin's vault pulled metadata-only; hunt
// lists the held files with their missing counts, since when and from
// where; hunt --retry fetches them from the remote (a second, closed
// remote only warns), except the chunks no remote has, which it names.
func testCLIHuntFromCouch(t *testing.T, c *cliRunner) {
	v := readVectorVault(t, "plain")
	db := loadVaultDump(t, couchServer, v.vaultDump)
	inputs := dumpInputs(t, v.vaultDump)
	_, metas := decodeDocs(t, dbDocs(t, db), remoteCodec(t, db, ""))
	// tiny.md's chunks are on no remote.
	gone := fileChunkIDs(metas, "tiny.md")
	for id := range fileChunkIDs(metas, pathsExcept(metas, "tiny.md")...) {
		delete(gone, id)
	}
	if len(gone) == 0 {
		t.Fatal("tiny.md shares every chunk with another file")
	}
	deleteDocs(t, c, db, gone)

	work := t.TempDir()
	store := filepath.Join(work, "s.db")
	c.ok(t, work, nil, "pull", c.url(db.Name()), "--metadata-only", "--store", store, "--quiet")
	h := parseHunt(t, c.ok(t, work, nil, "hunt", "--json", "--store", store))
	if len(h.Held) != len(inputs)-1 { // empty.md has no chunks
		t.Fatalf("hunt lists %d held files, want %d: %+v", len(h.Held), len(inputs)-1, h.Held)
	}
	for _, f := range h.Held {
		want := len(fileChunkIDs(metas, f.Path))
		if f.Missing != want || f.Chunks != want || f.Since == nil || f.Source == nil || *f.Source != c.couch.url+"/"+db.Name() ||
			f.LastAttempt != nil || f.NextAttempt != nil {
			t.Errorf("%s: %+v, want %d of %d missing, a since and the source", f.Path, f, want, want)
		}
	}
	text := c.ok(t, work, nil, "hunt", "--store", store).stdout
	if !strings.Contains(text, fmt.Sprintf("%d files are held", len(inputs)-1)) || !strings.Contains(text, "notes/large.md") {
		t.Errorf("hunt:\n%s", text)
	}

	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := "http://admin@" + l.Addr().String() + "/vault"
	l.Close()
	r := c.run(t, work, nil, "hunt", "--retry", c.url(db.Name()), closed, "--json", "--store", store)
	c.noSecrets(t, r)
	if r.code != 1 || !strings.Contains(r.stderr, "not hunting on http://"+l.Addr().String()+"/vault") {
		t.Fatalf("hunt --retry: exit %d (want 1: tiny.md stays held)\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	h = parseHunt(t, r)
	if len(h.Released) != len(inputs)-2 || len(h.Held) != 1 || h.Held[0].Path != "tiny.md" ||
		len(h.Held[0].Reasons) != 1 || !strings.Contains(h.Held[0].Reasons[0], "on no remote") {
		t.Errorf("after the hunt: released %+v, held %+v", h.Released, h.Held)
	}
	if len(h.Sources) != 2 || h.Sources[0].Status != "ok" || h.Sources[1].Status != "failed" || !strings.Contains(h.Sources[1].Error, "connection refused") {
		t.Errorf("sources: %+v", h.Sources)
	}
	for p, want := range inputs {
		if p == "tiny.md" {
			continue
		}
		if got := c.ok(t, work, nil, "cat", p, "--store", store).stdout; got != string(want) {
			t.Errorf("cat %s after the hunt: %d bytes, want %d", p, len(got), len(want))
		}
	}
	// The listing remembers the attempt and why it failed.
	h = parseHunt(t, c.ok(t, work, nil, "hunt", "--json", "--store", store))
	if len(h.Held) != 1 || h.Held[0].LastAttempt == nil || h.Held[0].LastResult == nil || !strings.Contains(*h.Held[0].LastResult, "on no remote") {
		t.Errorf("hunt after the retry: %+v", h.Held)
	}
	if text := c.ok(t, work, nil, "status", "--store", store).stdout; !strings.Contains(text, "1 file wait") {
		t.Errorf("status after the hunt:\n%s", text)
	}
}

func pathsExcept(metas map[string]livesync.Meta, except string) []string {
	var out []string
	for p := range metas {
		if p != except {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// testCLIHuntSplit: a vault on CouchDB whose chunks of half the files
// were deleted there, and a journal bucket (direct_fetch) holding those
// files; a metadata-only pull from CouchDB, then hunt --retry on every
// configured remote fetches one half from each, and every file reads.
func testCLIHuntSplit(t *testing.T, c *cliRunner) {
	const pass = "hunt split passphrase"
	v := readVectorVault(t, "e2ee")
	inputs := dumpInputs(t, v.vaultDump)
	src := writeInputs(t, v)
	b, e := freshBucket(t)
	env := s3CLIEnv(e, pass)
	work := t.TempDir()
	name := dbName(t)
	db := openDB(t, couchServer, name, false, nil)
	t.Cleanup(func() { _ = db.Destroy(ctxT(t)) })
	c.ok(t, work, env, "import", src, c.url(name), "--encrypt", "--quiet")
	_, metas := decodeDocs(t, dbDocs(t, db), remoteCodec(t, db, pass))

	var paths []string
	for p := range inputs {
		if len(metas[p].Children) > 0 {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	var first, second []string
	for i, p := range paths {
		if i%2 == 0 {
			first = append(first, p)
		} else {
			second = append(second, p)
		}
	}
	// The bucket holds the second half (same settings, same passphrase:
	// the same chunk ids); CouchDB loses the chunks only they use.
	half := filepath.Join(work, "half.db")
	for _, p := range second {
		c.ok(t, work, env, "put", p, filepath.Join(src, filepath.FromSlash(p)), "--store", half, "--encrypt", "--custom-chunk-size", "60")
	}
	c.ok(t, work, env, "push", bucketURL(e, b), "--store", half, "--quiet")
	firstIDs, onlySecond := fileChunkIDs(metas, first...), fileChunkIDs(metas, second...)
	for id := range firstIDs {
		delete(onlySecond, id)
	}
	deleteDocs(t, c, db, onlySecond)

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "secret"), []byte(e.secret+"\n"), 0o600)
	tlsLine := ""
	if e.secure {
		tlsLine = "tls = true\nca_file = " + jsonString(os.Getenv("LIVESYNC_TEST_S3_CA_FILE")) + "\n"
	}
	cfg := "default_remote = \"couch\"\n\n[remote.couch]\nurl = " + jsonString(c.url(name)) + "\n\n" +
		"[remote.bucket]\nkind = \"s3\"\nendpoint = " + jsonString(e.hostPort()) + "\n" + tlsLine +
		"bucket = " + jsonString(b.Name()) + "\nprefix = " + jsonString(b.Prefix()) + "\nregion = " + jsonString(e.region) + "\n" +
		"access_key = " + jsonString(e.access) + "\nsecret_key_file = \"secret\"\ndirect_fetch = true\n"
	os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600)
	cenv := map[string]string{"LIVESYNC_CONFIG": filepath.Join(dir, "config.toml"), "LIVESYNC_PASSPHRASE": pass}

	store := filepath.Join(work, "s.db")
	c.ok(t, work, cenv, "pull", "--metadata-only", "--store", store, "--quiet")
	h := parseHunt(t, c.ok(t, work, cenv, "hunt", "--json", "--store", store))
	if len(h.Held) != len(paths) {
		t.Fatalf("held before the hunt: %d files, want %d", len(h.Held), len(paths))
	}
	// cat --remote reads a file of the second half from the bucket's
	// packs (direct_fetch); without direct fetch the bucket cannot.
	p := second[0]
	if got := c.ok(t, work, cenv, "cat", p, "--remote", "bucket", "--store", store).stdout; got != string(inputs[p]) {
		t.Errorf("cat --remote bucket %s: %d bytes, want %d", p, len(got), len(inputs[p]))
	}
	benv := map[string]string{"LIVESYNC_PASSPHRASE": pass, "LIVESYNC_S3_SECRET_KEY": e.secret}
	if r := c.run(t, work, benv, "cat", second[1], "--remote", bucketURL(e, b), "--store", store); r.code != 3 || !strings.Contains(r.stderr, "direct_fetch") {
		t.Errorf("cat --remote on a bucket without direct fetch: exit %d %q", r.code, r.stderr)
	}
	r := c.ok(t, work, cenv, "hunt", "--retry", "--json", "--store", store)
	c.noSecrets(t, r, pass, e.secret)
	h = parseHunt(t, r)
	if !h.OK || len(h.Released) != len(paths)-1 || len(h.Held) != 0 {
		t.Fatalf("hunt --retry: %s\n%s", r.stdout, r.stderr)
	}
	found := map[string]int{}
	for _, s := range h.Sources {
		found[s.Remote] = s.ChunksFound
	}
	couchID, bucketID := c.couch.url+"/"+name, "s3://"+e.hostPort()+"/"+b.Name()+"/"+b.Prefix()
	// Each source's chunks that cat did not fetch already.
	couchWant, bucketWant := 0, 0
	catIDs := fileChunkIDs(metas, p)
	for id := range firstIDs {
		if !catIDs[id] {
			couchWant++
		}
	}
	for id := range onlySecond {
		if !catIDs[id] {
			bucketWant++
		}
	}
	if found[couchID] != couchWant || found[bucketID] != bucketWant {
		t.Errorf("chunks found: %v; want %d from CouchDB and %d from the bucket", found, couchWant, bucketWant)
	}
	for _, p := range paths {
		if got := c.ok(t, work, cenv, "cat", p, "--store", store).stdout; got != string(inputs[p]) {
			t.Errorf("cat %s after the hunt: %d bytes, want %d", p, len(got), len(inputs[p]))
		}
	}
}
