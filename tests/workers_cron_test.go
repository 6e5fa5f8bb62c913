package tests

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
)

// buildWorkerUpstreams builds the Worker with the build tag upstreams
// (its cron task bridges databases to CouchDB upstreams) into a folder of
// its own, beside the JavaScript of the default build, and logs its size
// against the Paid plan's 10 MB (gzip) script limit.
func buildWorkerUpstreams(t *testing.T) string {
	t.Helper()
	base := buildWorker(t)
	dist := t.TempDir()
	entries, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	var all bytes.Buffer
	for _, e := range entries {
		if e.IsDir() || e.Name() == "app.wasm" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(base, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dist, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-tags", "upstreams", "-o", filepath.Join(dist, "app.wasm"), ".")
	cmd.Dir = "../wasm/workers"
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the Worker with -tags upstreams: %v\n%s", err, out)
	}
	wasm, err := os.ReadFile(filepath.Join(dist, "app.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(wasm)
	zw.Write(all.Bytes())
	zw.Close()
	const paidLimit = 10_000_000
	if gz.Len() > paidLimit {
		t.Fatalf("the Worker with upstreams is %d bytes gzip, over the Paid plan's %d", gz.Len(), paidLimit)
	}
	t.Logf("the Worker with upstreams: app.wasm %d bytes, %d bytes gzip -9 with its JavaScript (Paid plan limit %d)",
		len(wasm), gz.Len(), paidLimit)
	return dist
}

// TestWorkersCron runs the Worker (built with upstreams) under workerd
// with LIVESYNC_UPSTREAMS naming a database on the CouchDB-protocol test
// server, chunks_online (metadata pulled, chunks hunted). The plugin's
// E2EE vault is split: half its notes pushed to the Worker as metadata
// only (held: their chunks are upstream), the other half and every chunk
// on the upstream. One Cron Trigger event later every note is served by
// the Worker, `livesync pull` reads every file byte for byte from it, and
// the upstream has every note.
func TestWorkersCron(t *testing.T) {
	couch := couchServer(t)
	dist := buildWorkerUpstreams(t)
	up := openDB(t, fixedServer(couch), dbName(t), true, nil)
	const name = "cron-vault"
	ups, _ := json.Marshal([]map[string]any{{"db": name, "url": couch.url + "/" + up.Name(), "user": couch.user,
		"password": couch.password, "chunks_online": true}})
	w := startWorkerFrom(t, dist, map[string]string{
		"LIVESYNC_UPSTREAMS":           string(ups),
		"LIVESYNC_PASSPHRASES":         name + ":vector-passphrase",
		"LIVESYNC_HUNT_MAX_PER_WINDOW": "1000",
	})
	v := readVectorVault(t, "e2ee")
	local := openDB(t, w.server(), name, true, nil)
	revs, notes := loadSplitVault(t, v, local, up)
	get := func(id string) int {
		req, _ := http.NewRequestWithContext(ctxT(t), "GET", w.env.url+"/"+name+"/"+url.PathEscape(id), nil)
		req.SetBasicAuth(w.env.user, w.env.password)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	served := func() (n int) {
		for id := range notes {
			if get(id) == 200 {
				n++
			}
		}
		return n
	}
	before := served()
	if before == len(notes) {
		t.Fatalf("every note is served before the cron run: the test holds nothing")
	}
	start := time.Now()
	triggerCron(t, w)
	// The event's answer may come before its task ends (waitUntil): poll.
	deadline := time.Now().Add(90 * time.Second)
	for {
		n := served()
		missing, err := up.RevsDiff(ctxT(t), revs)
		if err != nil {
			t.Fatal(err)
		}
		if n == len(notes) && len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the cron run, the Worker serves %d of %d notes (%d before) and the upstream lacks %d documents",
				n, len(notes), before, len(missing))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("one cron run: %d of %d notes not served before, all served and bridged after %v",
		len(notes)-before, len(notes), time.Since(start).Round(time.Millisecond))
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir(), couch: w.env}
	env := map[string]string{"LIVESYNC_PASSPHRASE": "vector-passphrase"}
	work := t.TempDir()
	st := filepath.Join(work, "pulled.db")
	c.ok(t, work, env, "pull", c.url(name), "--store", st, "--quiet")
	inputs := dumpInputs(t, v.vaultDump)
	if len(inputs) == 0 {
		t.Fatal("the vault dump has no files")
	}
	for p, b := range inputs {
		if got := c.ok(t, work, env, "cat", p, "--store", st).stdout; got != string(b) {
			t.Errorf("cat %s: %d bytes, want %d (not byte for byte)", p, len(got), len(b))
		}
	}
}

// loadSplitVault loads the plugin's E2EE vault split between the Worker
// (local: every other note, metadata only) and the upstream (the other
// notes and every chunk), with its _local documents in both. It returns
// every note and chunk with its revision (what the upstream must end
// with) and the notes.
func loadSplitVault(t *testing.T, v vectorVault, local, up *couchdb.DB) (map[string][]string, map[string]bool) {
	t.Helper()
	ctx := ctxT(t)
	var toWorker, toUp []json.RawMessage
	revs := map[string][]string{}
	notes := map[string]bool{}
	for i, r := range v.Remote.AllDocs {
		var head struct {
			Rev string `json:"_rev"`
		}
		json.Unmarshal(r.Doc, &head)
		revs[r.ID] = []string{head.Rev}
		switch {
		case strings.HasPrefix(r.ID, "h:"):
			toUp = append(toUp, r.Doc)
		case i%2 == 0:
			notes[r.ID] = true
			toWorker = append(toWorker, r.Doc)
		default:
			notes[r.ID] = true
			toUp = append(toUp, r.Doc)
		}
	}
	for _, l := range v.Remote.LocalDocs {
		var head struct {
			ID string `json:"_id"`
		}
		json.Unmarshal(l, &head)
		for _, target := range []*couchdb.DB{local, up} {
			if err := target.PutLocal(ctx, strings.TrimPrefix(head.ID, "_local/"), l); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, load := range []struct {
		what   string
		target *couchdb.DB
		docs   []json.RawMessage
	}{{"worker", local, toWorker}, {"upstream", up, toUp}} {
		res, err := load.target.BulkDocs(ctx, load.docs)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Error != "" {
				t.Fatalf("loading the %s: %s: %s", load.what, r.ID, r.Error)
			}
		}
	}
	return revs, notes
}

// triggerCron fires the Worker's Cron Trigger through miniflare's
// scheduled path.
func triggerCron(t *testing.T, w *worker) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t), "GET", w.env.url+"/cdn-cgi/handler/scheduled?cron=*+*+*+*+*", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("the scheduled event: %d %s", res.StatusCode, body)
	}
}
