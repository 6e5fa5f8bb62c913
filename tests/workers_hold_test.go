package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWorkersHoldBack pushes the plugin's E2EE vault dump (path
// obfuscation on) into the Worker metadata first, as an interrupted push
// leaves it: with the vault's passphrase configured (LIVESYNC_PASSPHRASES)
// every note is hidden from every read until its chunks come, request
// after request, while _revs_diff says it is stored; then the chunks,
// and every note is served and `livesync pull` reads each file byte for
// byte. A database without a passphrase cannot judge such metadata and
// serves it at once, as the relay does.
func TestWorkersHoldBack(t *testing.T) {
	const name, open = "held-vault", "unheld-vault"
	w := startWorker(t, map[string]string{"LIVESYNC_PASSPHRASES": name + ":vector-passphrase"})
	v := readVectorVault(t, "e2ee")
	inputs := dumpInputs(t, v.vaultDump)
	// held are the notes with content: an empty file has no chunks and
	// is served at once, as is the version document.
	held, served := map[string]bool{}, map[string]bool{}
	for _, f := range v.Files {
		held[f.DocID] = len(inputs[f.VaultPath]) > 0
	}
	var notes, chunks []json.RawMessage
	for _, r := range v.Remote.AllDocs {
		if strings.HasPrefix(r.ID, "h:") {
			chunks = append(chunks, r.Doc)
			continue
		}
		notes = append(notes, r.Doc)
		if !held[r.ID] {
			served[r.ID] = true
		}
	}
	if len(notes) < 5 || len(chunks) == 0 || len(served) >= len(notes) {
		t.Fatalf("the vault dump has %d notes (%d not held) and %d chunks", len(notes), len(served), len(chunks))
	}
	h := holdClient{t: t, w: w}
	t0 := time.Now()
	for _, db := range []string{name, open} {
		h.do("PUT", "/"+db, nil, 201)
		for _, l := range v.Remote.LocalDocs {
			var head struct {
				ID string `json:"_id"`
			}
			json.Unmarshal(l, &head)
			h.do("PUT", "/"+db+"/"+head.ID, l, 201)
		}
		h.push(db, notes)
	}
	t.Logf("both databases created and their notes pushed in %v", time.Since(t0))
	t0 = time.Now()
	// Each request runs a new scope over D1: a GET of the held notes, of
	// an empty note (no chunks, served), then the feeds and _revs_diff.
	gets := 0
	for id, isHeld := range held {
		want := 200
		if isHeld {
			want = 404
			if gets++; gets > 3 {
				continue // every note is checked through the feeds below
			}
		}
		if code := h.code("GET", "/"+name+"/"+url.PathEscape(id)); code != want {
			t.Fatalf("GET %s: %d before the chunks, want %d", id, code, want)
		}
	}
	for _, id := range h.listed(name) {
		if !served[id] {
			t.Fatalf("%s is listed before its chunks", id)
		}
	}
	if diff := h.revsDiff(name, notes); len(diff) != 0 {
		t.Fatalf("_revs_diff says held revisions are missing: %v", diff)
	}
	t.Logf("the reads of the held notes in %v", time.Since(t0))
	if got := h.listed(open); len(got) != len(notes) {
		t.Errorf("without a passphrase, %d of %d notes are served at once (passthrough)", len(got), len(notes))
	}
	for _, db := range []string{name, open} {
		start := time.Now()
		for range 2 {
			h.do("GET", "/"+db+"/obsydian_livesync_version", nil, 200)
		}
		t.Logf("GET of a document in %s: %v a request", db, time.Since(start)/2)
	}
	start := time.Now()
	h.push(name, chunks)
	t.Logf("the %d chunks pushed in %v (%d requests), releasing %d notes", len(chunks), time.Since(start), (len(chunks)+49)/50, len(held)-1)
	if got := h.listed(name); len(got) != len(notes) {
		t.Fatalf("after the chunks, %d of %d notes are served", len(got), len(notes))
	}
	start = time.Now()
	for id := range held {
		h.do("GET", "/"+name+"/"+url.PathEscape(id), nil, 200)
	}
	t.Logf("GET of a note in %s, none held: %v a request", name, time.Since(start)/time.Duration(len(held)))
	t0 = time.Now()
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir(), couch: w.env}
	env := map[string]string{"LIVESYNC_PASSPHRASE": "vector-passphrase"}
	work := t.TempDir()
	st := filepath.Join(work, "pulled.db")
	c.ok(t, work, env, "pull", c.url(name), "--store", st, "--quiet")
	for p, b := range inputs {
		if got := c.ok(t, work, env, "cat", p, "--store", st).stdout; got != string(b) {
			t.Errorf("cat %s: %d bytes, want %d (not byte for byte)", p, len(got), len(b))
		}
	}
	t.Logf("livesync pull and cat in %v", time.Since(t0))
}

// holdClient talks to the Worker as its admin.
type holdClient struct {
	t *testing.T
	w *worker
}

func (h holdClient) send(method, path string, body []byte) (int, []byte) {
	h.t.Helper()
	req, err := http.NewRequestWithContext(ctxT(h.t), method, h.w.env.url+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.SetBasicAuth(h.w.env.user, h.w.env.password)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return res.StatusCode, b
}

func (h holdClient) code(method, path string) int {
	h.t.Helper()
	c, _ := h.send(method, path, nil)
	return c
}

func (h holdClient) do(method, path string, body []byte, want int) []byte {
	h.t.Helper()
	c, b := h.send(method, path, body)
	if c != want {
		h.t.Fatalf("%s %s: %d %s, want %d", method, path, c, b, want)
	}
	return b
}

func (h holdClient) post(path string, v any) []byte {
	h.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		h.t.Fatal(err)
	}
	c, out := h.send("POST", path, b)
	if c/100 != 2 {
		h.t.Fatalf("POST %s: %d %s", path, c, out)
	}
	return out
}

// push writes docs as a replicator does, 50 to a request.
func (h holdClient) push(db string, docs []json.RawMessage) {
	h.t.Helper()
	for len(docs) > 0 {
		n := min(50, len(docs))
		var res []struct{ ID, Error string }
		json.Unmarshal(h.post("/"+db+"/_bulk_docs", map[string]any{"docs": docs[:n], "new_edits": false}), &res)
		for _, r := range res {
			if r.Error != "" {
				h.t.Fatalf("push %s: %s", r.ID, r.Error)
			}
		}
		docs = docs[n:]
	}
}

// listed returns the ids of the notes (not chunks) that _changes,
// _all_docs and _bulk_get serve, failing when they disagree.
func (h holdClient) listed(db string) []string {
	h.t.Helper()
	var changes struct {
		Results []struct{ ID string } `json:"results"`
	}
	json.Unmarshal(h.do("GET", "/"+db+"/_changes", nil, 200), &changes)
	var all struct {
		Rows []struct{ ID string } `json:"rows"`
	}
	json.Unmarshal(h.do("GET", "/"+db+"/_all_docs", nil, 200), &all)
	var fromChanges, fromAll []string
	for _, r := range changes.Results {
		if !strings.HasPrefix(r.ID, "h:") {
			fromChanges = append(fromChanges, r.ID)
		}
	}
	var want []map[string]string
	for _, r := range all.Rows {
		if !strings.HasPrefix(r.ID, "h:") {
			fromAll = append(fromAll, r.ID)
			want = append(want, map[string]string{"id": r.ID})
		}
	}
	slices.Sort(fromChanges)
	if strings.Join(fromChanges, " ") != strings.Join(fromAll, " ") {
		h.t.Fatalf("_changes lists %v, _all_docs %v", fromChanges, fromAll)
	}
	if len(want) > 0 {
		var bg struct {
			Results []struct {
				Docs []struct {
					OK json.RawMessage `json:"ok"`
				} `json:"docs"`
			} `json:"results"`
		}
		json.Unmarshal(h.post("/"+db+"/_bulk_get", map[string]any{"docs": want}), &bg)
		for i, r := range bg.Results {
			if len(r.Docs) == 0 || r.Docs[0].OK == nil {
				h.t.Fatalf("_bulk_get of listed %s is not ok", fromAll[i])
			}
		}
	}
	return fromAll // sorted by id, as _all_docs lists them
}

// revsDiff returns what _revs_diff says db lacks of docs' revisions.
func (h holdClient) revsDiff(db string, docs []json.RawMessage) map[string]any {
	h.t.Helper()
	q := map[string][]string{}
	for _, d := range docs {
		var head struct{ ID, Rev string }
		var m map[string]json.RawMessage
		json.Unmarshal(d, &m)
		json.Unmarshal(m["_id"], &head.ID)
		json.Unmarshal(m["_rev"], &head.Rev)
		q[head.ID] = append(q[head.ID], head.Rev)
	}
	var diff map[string]any
	json.Unmarshal(h.post("/"+db+"/_revs_diff", q), &diff)
	return diff
}
