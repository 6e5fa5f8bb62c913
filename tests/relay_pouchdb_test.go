package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// livesyncClient returns a command running tests/pouchdb/livesync-client.mjs
// (a real PouchDB 9 client configured as LiveSync configures it; its
// header describes the modes) against the test's server, with the
// server's credentials in the environment.
func livesyncClient(t *testing.T, srv couchFactory, ctx context.Context, args ...string) *exec.Cmd {
	t.Helper()
	node, script := pouchClient(t)
	js := filepath.Join(filepath.Dir(script), "livesync-client.mjs")
	e := srv(t)
	cmd := exec.CommandContext(ctx, node, append([]string{js, "--url", e.url}, args...)...)
	cmd.Env = append(os.Environ(), "LIVESYNC_TEST_COUCHDB_USER="+e.user, "LIVESYNC_TEST_COUCHDB_PASSWORD="+e.password)
	return cmd
}

// allDocsOf reads every document of a database (_all_docs include_docs)
// with its full revision history, keyed by id.
func allDocsOf(t *testing.T, db *couchdb.DB) map[string]string {
	t.Helper()
	ctx := ctxT(t)
	out := map[string]string{}
	since := ""
	for {
		page, err := db.Changes(ctx, engine.ChangesRequest{Since: since, Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		var refs []engine.DocRev
		for _, c := range page.Results {
			for _, r := range c.Revs {
				refs = append(refs, engine.DocRev{ID: c.ID, Rev: r})
			}
		}
		docs, err := db.BulkGet(ctx, refs)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			var m map[string]any
			if err := json.Unmarshal(d, &m); err != nil {
				t.Fatal(err)
			}
			canon, _ := json.Marshal(m)
			key := fmt.Sprint(m["_id"], " ", m["_rev"])
			out[key] = string(canon)
		}
		if len(page.Results) == 0 {
			return out
		}
		since = page.LastSeq
	}
}

// TestPouchDBLiveSyncRoundTrip: the plugin's E2EE vault dump is loaded
// into a database (new_edits=false); a real PouchDB 9 client pulls it with
// LiveSync's readChunksOnline settings (metadata through the selector
// feed, then the chunks its metadata names, fetched with POST _all_docs
// keys include_docs in batches of 100 as the plugin's ChunkFetcher does)
// and pushes its copy to a second database. Both databases then hold the
// same documents, revisions and histories.
func TestPouchDBLiveSyncRoundTrip(t *testing.T) { testPouchDBLiveSyncRoundTrip(t, couchServer) }

func testPouchDBLiveSyncRoundTrip(t *testing.T, srv couchFactory) {
	pouchClient(t)
	d := readVaultDump(t)
	db := loadVaultDump(t, srv, d)
	db2 := freshDB(t, srv, nil)
	ctx := ctxT(t)
	// The chunk ids the plugin would fetch: the children of every file's
	// metadata, readable once decrypted (paths are obfuscated).
	codec := handshakeCodec(t, db, "go-reader", dumpSettings(t, d, d.FixedValues.Passphrase))
	page, err := db.Changes(ctx, engine.ChangesRequest{Selector: json.RawMessage(`{"type":{"$ne":"leaf"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	var refs []engine.DocRev
	for _, c := range page.Results {
		refs = append(refs, engine.DocRev{ID: c.ID, Rev: c.Revs[0]})
	}
	metas, err := db.BulkGet(ctx, refs)
	if err != nil {
		t.Fatal(err)
	}
	var chunkIDs []string
	for _, raw := range metas {
		doc, err := livesync.ParseDoc(raw)
		if err != nil {
			t.Fatal(err)
		}
		if doc, err = codec.DecodeRemote(doc); err != nil {
			t.Fatal(err)
		}
		if !doc.IsFileDoc() {
			continue
		}
		m, err := livesync.ParseMeta(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range m.Children {
			chunkIDs = append(chunkIDs, string(c))
		}
	}
	slices.Sort(chunkIDs)
	chunkIDs = slices.Compact(chunkIDs)
	chunkIDs = append(chunkIDs, "h:+not-on-the-server") // a missing chunk is an error row, dropped
	ids, _ := json.Marshal(chunkIDs)
	chunksFile := filepath.Join(t.TempDir(), "chunks.json")
	if err := os.WriteFile(chunksFile, ids, 0o600); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := livesyncClient(t, srv, cctx, "--mode", "roundtrip", "--db", db.Name(), "--db2", db2.Name(), "--chunks", chunksFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("PouchDB client: %v\n%s", err, stderr.String())
	}
	var stats struct{ Pulled, Fetched, Requests, Pushed, Local int }
	if err := json.Unmarshal(out, &stats); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	t.Logf("PouchDB: %+v", stats)
	if stats.Fetched != len(chunkIDs)-1 || stats.Requests != (len(chunkIDs)+99)/100 || stats.Pulled != len(metas) {
		t.Fatalf("pulled %d of %d metadata documents, fetched %d of %d chunks in %d requests", stats.Pulled, len(metas), stats.Fetched, len(chunkIDs)-1, stats.Requests)
	}
	src, dst := allDocsOf(t, db), allDocsOf(t, db2)
	if len(src) != len(d.Remote.AllDocs) || len(dst) != len(src) {
		t.Fatalf("source %d revisions (dump %d), copy %d", len(src), len(d.Remote.AllDocs), len(dst))
	}
	for k, v := range src {
		if dst[k] != v {
			t.Fatalf("%s differs:\n%s\n%s", k, v, dst[k])
		}
	}
}

// TestPouchDBLiveReplication: LiveSync's continuous mode, a live PouchDB
// sync (longpoll feed with heartbeat, selector on the pull side) against
// the server: a document written on the server after the client caught up
// reaches it, a chunk does not (readChunksOnline), and a document the
// client writes reaches the server.
func TestPouchDBLiveReplication(t *testing.T) { testPouchDBLiveReplication(t, couchServer) }

func testPouchDBLiveReplication(t *testing.T, srv couchFactory) {
	pouchClient(t)
	db := freshDB(t, srv, nil)
	ctx := ctxT(t)
	seed := []json.RawMessage{
		raw(`{"_id":"early","_rev":"1-a","type":"plain","path":"early.md"}`),
		raw(`{"_id":"h:early","_rev":"1-b","type":"leaf","data":"x"}`),
	}
	if _, err := db.BulkDocs(ctx, seed); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := livesyncClient(t, srv, cctx, "--mode", "sync", "--db", db.Name(), "--wait-for", "late")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func(prefix string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok || !strings.HasPrefix(l, prefix) {
				_ = cmd.Wait()
				t.Fatalf("PouchDB client said %q (open %v), want %s…\n%s", l, ok, prefix, stderr.String())
			}
			return l
		case <-cctx.Done():
			t.Fatalf("no %s from the PouchDB client\n%s", prefix, stderr.String())
		}
		return ""
	}
	next("READY")
	// Written after the client caught up: a chunk first, then a document.
	if _, err := db.BulkDocs(ctx, []json.RawMessage{raw(`{"_id":"h:late","_rev":"1-c","type":"leaf","data":"y"}`)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := db.BulkDocs(ctx, []json.RawMessage{raw(`{"_id":"late","_rev":"1-d","type":"plain","path":"late.md"}`)}); err != nil {
		t.Fatal(err)
	}
	if got := next("GOT "); got != "GOT late 1-d" {
		t.Fatalf("got %q", got)
	}
	// The client's own document reaches the server.
	deadline := time.Now().Add(30 * time.Second)
	for {
		page, err := db.Changes(ctx, engine.ChangesRequest{Selector: raw(`{"_id":"from-pouch"}`)})
		if err == nil && len(page.Results) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client's document never reached the server (%v)\n%s", err, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	stdin.Close()
	local := next("LOCAL ")
	var ids []string
	if err := json.Unmarshal([]byte(strings.TrimPrefix(local, "LOCAL ")), &ids); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ids, "early") || !slices.Contains(ids, "late") || slices.Contains(ids, "h:late") || slices.Contains(ids, "h:early") {
		t.Fatalf("client's documents %v: want the notes, no chunks", ids)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("PouchDB client: %v\n%s", err, stderr.String())
	}
}
