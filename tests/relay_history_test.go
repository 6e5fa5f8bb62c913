package tests

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Revision history on the relay. GET /db/doc?rev=<older rev> used to
// answer 404 missing on the relay, both for older revisions loaded with
// new_edits=false and after a normal edit, so the plugin's file-history
// view (revs_info, then each available rev) was empty. CouchDB keeps
// those bodies until compaction, and so must the relay.

// relayHTTP sends one request to a running relay as cred's user and
// returns the status and body.
func relayHTTP(t *testing.T, cred couchEnv, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctxT(t), method, cred.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth(cred.user, cred.password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// mustRelayHTTP is relayHTTP that fails unless the status is want.
func mustRelayHTTP(t *testing.T, cred couchEnv, want int, method, path string, body any) []byte {
	t.Helper()
	code, b := relayHTTP(t, cred, method, path, body)
	if code != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, code, want, b)
	}
	return b
}

// pouchHistory runs one step of tests/pouchdb/history.mjs (a PouchDB 9
// client) against the relay's database vault and decodes its output into
// out.
func pouchHistory(t *testing.T, cred couchEnv, step, id string, n int, out any) {
	t.Helper()
	node, script := pouchClient(t)
	js := filepath.Join(filepath.Dir(script), "history.mjs")
	ctx, cancel := context.WithTimeout(ctxT(t), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, js, "--url", cred.url, "--db", "vault", "--step", step, "--id", id, "--n", fmt.Sprint(n))
	cmd.Env = append(os.Environ(), "LIVESYNC_TEST_COUCHDB_USER="+cred.user, "LIVESYNC_TEST_COUCHDB_PASSWORD="+cred.password)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("history.mjs %s %s: %v\n%s", step, id, err, stderr.String())
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("history.mjs %s: %v: %s", step, err, b)
	}
}

// historyView is what the plugin's history view reads: revs_info, and
// the body of each available revision.
type historyView struct {
	RevsInfo []struct{ Rev, Status string } `json:"revs_info"`
	Docs     map[string]struct {
		ID       string   `json:"_id"`
		Rev      string   `json:"_rev"`
		Children []string `json:"children"`
		Mtime    int64    `json:"mtime"`
	} `json:"docs"`
}

// historyChunk is the chunk id history.mjs gives a version's text.
func historyChunk(text string) string {
	sum := md5.Sum([]byte(text))
	return "h:" + hex.EncodeToString(sum[:])[:12]
}

// checkHistory reads id's history as the plugin does and checks that
// revs (oldest first) are listed newest first, that the last `available`
// of them are available with the body of their version (version text
// format: the step's), and the others missing.
func checkHistory(t *testing.T, cred couchEnv, id string, revs []string, available int, format string) {
	t.Helper()
	var h historyView
	pouchHistory(t, cred, "history", id, 0, &h)
	var got, want []string
	for _, e := range h.RevsInfo {
		got = append(got, e.Rev+" "+e.Status)
	}
	for i := len(revs) - 1; i >= 0; i-- {
		st := "missing"
		if i >= len(revs)-available {
			st = "available"
		}
		want = append(want, revs[i]+" "+st)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: revs_info = %v\nwant %v", id, got, want)
	}
	if len(h.Docs) != available {
		t.Fatalf("%s: read %d revisions, want %d", id, len(h.Docs), available)
	}
	for i, rev := range revs {
		d, ok := h.Docs[rev]
		if !ok {
			continue
		}
		k := i + 1
		if wantChunk := historyChunk(fmt.Sprintf(format, id, k)); d.ID != id || d.Rev != rev ||
			!reflect.DeepEqual(d.Children, []string{wantChunk}) || d.Mtime != 1700000000000+int64(k) {
			t.Fatalf("%s rev %s (version %d) = %+v, want children [%s], mtime %d", id, rev, k, d, wantChunk, 1700000000000+k)
		}
	}
}

// TestRelayHistoryPouchDB: a PouchDB 9 client writes a note and edits it,
// and loads another note's older revisions with new_edits=false; the
// history view's reads (get with revs_info, then get with each available
// rev) see every version with its body. After db.compact() (POST
// _compact) only the current version is available, as in CouchDB; then
// _revs_limit bounds the history of the next write.
func TestRelayHistoryPouchDB(t *testing.T) {
	t.Parallel()
	pouchClient(t)
	p := startRelayProcess(t, buildRelay(t), t.TempDir())
	cred := relayCredentials(t, p)

	const note, legacy = "notes/history.md", "notes/legacy.md"
	var w, l struct{ Revs []string }
	pouchHistory(t, cred, "write", note, 4, &w)
	pouchHistory(t, cred, "load", legacy, 3, &l)
	if len(w.Revs) != 4 || len(l.Revs) != 3 {
		t.Fatalf("written %v, loaded %v", w.Revs, l.Revs)
	}
	checkHistory(t, cred, note, w.Revs, 4, "%s: version %d\n")
	checkHistory(t, cred, legacy, l.Revs, 3, "%s: replicated version %d\n")

	var res struct{ OK bool }
	pouchHistory(t, cred, "compact", note, 0, &res)
	if !res.OK {
		t.Fatalf("db.compact() = %+v", res)
	}
	checkHistory(t, cred, note, w.Revs, 1, "%s: version %d\n")
	checkHistory(t, cred, legacy, l.Revs, 1, "%s: replicated version %d\n")
	// The report's request, now answered as CouchDB answers after a
	// compaction.
	code, b := relayHTTP(t, cred, http.MethodGet, "/vault/"+url.PathEscape(note)+"?rev="+w.Revs[0], nil)
	if code != http.StatusNotFound || !strings.Contains(string(b), `"reason":"missing"`) {
		t.Fatalf("GET ?rev= of a compacted revision: %d %s", code, b)
	}

	// _revs_limit: CouchDB's default, then 2 for the next write.
	if b := mustRelayHTTP(t, cred, http.StatusOK, http.MethodGet, "/vault/_revs_limit", nil); string(b) != "1000\n" {
		t.Fatalf("GET _revs_limit = %q", b)
	}
	mustRelayHTTP(t, cred, http.StatusOK, http.MethodPut, "/vault/_revs_limit", "2")
	var cur map[string]any
	json.Unmarshal(mustRelayHTTP(t, cred, http.StatusOK, http.MethodGet, "/vault/"+url.PathEscape(note), nil), &cur)
	cur["mtime"] = 1700000000000 + 5
	var put struct{ Rev string }
	json.Unmarshal(mustRelayHTTP(t, cred, http.StatusCreated, http.MethodPut, "/vault/"+url.PathEscape(note), cur), &put)
	var h historyView
	pouchHistory(t, cred, "history", note, 0, &h)
	if len(h.RevsInfo) != 2 || h.RevsInfo[0].Rev != put.Rev || h.RevsInfo[0].Status != "available" ||
		h.RevsInfo[1].Rev != w.Revs[3] || h.RevsInfo[1].Status != "available" {
		t.Fatalf("revs_info after a write with _revs_limit 2: %+v", h.RevsInfo)
	}
}

// boltFree opens a closed bbolt file and returns its free pages (free and
// pending), page size and file size.
func boltFree(t *testing.T, path string) (free, pageSize int, size int64) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := db.Stats()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.FreePageN + st.PendingPageN, db.Info().PageSize, fi.Size()
}

// TestRelayCompactFreesSpace: many revisions with large bodies written
// through the relay binary, then POST /vault/_compact. bbolt files do not
// shrink (the relay compacts in place and bbolt reuses the pages), so the
// measure is the free pages of vault.db, read with the relay stopped.
func TestRelayCompactFreesSpace(t *testing.T) {
	t.Parallel()
	const docs, edits, bodySize = 20, 30, 16 << 10
	bin := buildRelay(t)
	wd := t.TempDir()
	dbFile := filepath.Join(wd, "livesync-data", "vault.db")
	p := startRelayProcess(t, bin, wd)
	cred := relayCredentials(t, p)
	filler := strings.Repeat("x", bodySize)
	var first string
	for d := range docs {
		path := fmt.Sprintf("/vault/blob-%02d", d)
		rev := ""
		for e := range edits {
			body := map[string]any{"e": e, "blob": filler}
			if rev != "" {
				body["_rev"] = rev
			}
			var r struct{ Rev string }
			json.Unmarshal(mustRelayHTTP(t, cred, http.StatusCreated, http.MethodPut, path, body), &r)
			if rev = r.Rev; d == 0 && e == 0 {
				first = rev
			}
		}
	}
	mustRelayHTTP(t, cred, http.StatusOK, http.MethodGet, "/vault/blob-00?rev="+first, nil)
	if code := p.signal(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.output())
	}
	free0, pageSize, size0 := boltFree(t, dbFile)

	p = startRelayProcess(t, bin, wd)
	cred.url = p.url // a new port
	if b := mustRelayHTTP(t, cred, http.StatusAccepted, http.MethodPost, "/vault/_compact", nil); string(b) != "{\"ok\":true}\n" {
		t.Fatalf("POST _compact = %s", b)
	}
	if code, _ := relayHTTP(t, cred, http.MethodGet, "/vault/blob-00?rev="+first, nil); code != http.StatusNotFound {
		t.Fatalf("an earlier revision after _compact: %d", code)
	}
	if code := p.signal(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.output())
	}
	free1, _, size1 := boltFree(t, dbFile)
	history := docs * (edits - 1) * bodySize
	t.Logf("vault.db: %d bytes, %d free pages of %d bytes before _compact; %d free pages after (%d bytes freed, earlier bodies %d bytes); %d bytes",
		size0, free0, pageSize, free1, (free1-free0)*pageSize, history, size1)
	if (free1-free0)*pageSize < history*9/10 {
		t.Fatalf("_compact freed %d bytes, want at least 90%% of the %d bytes of earlier bodies", (free1-free0)*pageSize, history)
	}
}

// TestRelayKeepRevisionBodies: [compaction] keep_revision_bodies = 2
// keeps the two newest earlier bodies of each document, without _compact.
func TestRelayKeepRevisionBodies(t *testing.T) {
	t.Parallel()
	wd := t.TempDir()
	if err := os.WriteFile(filepath.Join(wd, "relay.toml"), []byte("[compaction]\nkeep_revision_bodies = 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startRelayArgs(t, buildRelay(t), wd, nil, "--config", "relay.toml", "--listen", "127.0.0.1:0")
	cred := relayCredentials(t, p)
	var revs []string
	for e := range 5 {
		body := map[string]any{"e": e}
		if len(revs) > 0 {
			body["_rev"] = revs[len(revs)-1]
		}
		var r struct{ Rev string }
		json.Unmarshal(mustRelayHTTP(t, cred, http.StatusCreated, http.MethodPut, "/vault/n", body), &r)
		revs = append(revs, r.Rev)
	}
	var d struct {
		RevsInfo []struct{ Rev, Status string } `json:"_revs_info"`
	}
	json.Unmarshal(mustRelayHTTP(t, cred, http.StatusOK, http.MethodGet, "/vault/n?revs_info=true", nil), &d)
	var got []string
	for _, e := range d.RevsInfo {
		got = append(got, e.Status)
	}
	if want := []string{"available", "available", "available", "missing", "missing"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("revs_info statuses with keep_revision_bodies = 2: %v, want %v", got, want)
	}
	mustRelayHTTP(t, cred, http.StatusOK, http.MethodGet, "/vault/n?rev="+revs[2], nil)
	mustRelayHTTP(t, cred, http.StatusNotFound, http.MethodGet, "/vault/n?rev="+revs[1], nil)
}
