package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
)

// heldStatus is the part of a database's /status this test reads.
type heldStatus struct {
	Name string `json:"name"`
	Held []struct {
		Doc string `json:"doc"`
	} `json:"held"`
	HeldDocuments int    `json:"held_documents"`
	HeldNote      string `json:"held_note"`
	Holdback      struct {
		MaxHeldDocuments        int            `json:"max_held_documents"`
		MaxHeldDocumentsPerUser int            `json:"max_held_documents_per_user"`
		Refused                 uint64         `json:"refused"`
		Released                uint64         `json:"released"`
		HeldByUser              map[string]int `json:"held_by_user"`
		HeldRevisions           int            `json:"held_revisions"`
	} `json:"holdback"`
}

// heldNote is a plain (unencrypted) note's metadata naming one chunk,
// and that chunk, as the plugin writes them (new_edits=false).
func heldNote(owner string, i int) (meta, chunk map[string]any) {
	id := fmt.Sprintf("notes/%s/n%03d.md", owner, i)
	cid := fmt.Sprintf("h:%s-%03d", owner, i)
	revs := map[string]any{"start": 1, "ids": []string{"aaaa"}}
	meta = map[string]any{"_id": id, "_rev": "1-aaaa", "_revisions": revs, "path": id, "children": []string{cid},
		"ctime": 1700000000000, "mtime": 1700000000000, "size": 5, "type": "plain", "eden": map[string]any{}}
	chunk = map[string]any{"_id": cid, "_rev": "1-bbbb", "_revisions": map[string]any{"start": 1, "ids": []string{"bbbb"}},
		"type": "leaf", "data": "text" + strconv.Itoa(i)}
	return meta, chunk
}

type bulkRow struct {
	ID     string `json:"id"`
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// A writer could make the relay hold metadata without chunks without
// bound (20,000 held documents: +29 MiB of heap and a
// 4.96 MB /status). With [holdback] limits, metadata past them is
// refused per document with an error that says what to do, nothing else
// of the push is affected, refused documents take no memory or disk,
// /status stays bounded, and released documents free their slots.
func TestRelayHeldDocumentsLimit(t *testing.T) {
	t.Parallel()
	bin := buildRelay(t)
	wd := t.TempDir()
	conf := fmt.Sprintf("data_dir = %q\n\n", filepath.Join(wd, "data")) +
		"[[users]]\nname = \"admin\"\npassword_env = \"LSGO_HELD_PW\"\nadmin = true\n\n" +
		"[[users]]\nname = \"alice\"\npassword_env = \"LSGO_HELD_PW\"\ndatabases = [\"vault\"]\n\n" +
		"[[users]]\nname = \"bob\"\npassword_env = \"LSGO_HELD_PW\"\ndatabases = [\"vault\"]\n\n" +
		"[purgatory]\nsave_interval = \"1h\"\n\n" + // no periodic write while the file size is compared
		"[holdback]\nmax_held_documents = 30\nmax_held_documents_per_user = 20\n"
	if err := os.WriteFile(filepath.Join(wd, "relay.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	const pw = "held-limit-password"
	p := startRelayArgs(t, bin, wd, []string{"LSGO_HELD_PW=" + pw}, "--config", filepath.Join(wd, "relay.toml"), "--listen", "127.0.0.1:0")
	r := &heldRelay{t: t, p: p, pw: pw, wd: wd}

	r.pastUserLimit()
	// Bob is not held back by Alice's limit, only by the database's (30).
	ids := r.refused(r.push("bob", heldMetas("bob", 0, 15)), "[holdback] max_held_documents")
	if len(ids) != 5 || ids[0] != "notes/bob/n010.md" {
		t.Fatalf("bob refused %v", ids)
	}
	s, size := r.status()
	if s.HeldDocuments != 30 || len(s.Held) != 30 || s.HeldNote != "" || s.Holdback.HeldRevisions != 30 || s.Holdback.Refused != 36 ||
		s.Holdback.MaxHeldDocuments != 30 || s.Holdback.MaxHeldDocumentsPerUser != 20 ||
		s.Holdback.HeldByUser["alice"] != 20 || s.Holdback.HeldByUser["bob"] != 10 || len(s.Holdback.HeldByUser) != 2 {
		t.Fatalf("/status: %+v", s)
	}
	t.Logf("/status with 30 held: %d bytes", size)
	r.refusedCostNothing()
	r.releaseFreesSlots()
}

// heldRelay is the relay binary of TestRelayHeldDocumentsLimit, with
// users alice and bob on database vault and the password of every user.
type heldRelay struct {
	t  *testing.T
	p  *relayProcess
	pw string
	wd string
}

// do sends one request as user, with body as JSON.
func (r *heldRelay) do(method, path, user string, body any) (int, []byte) {
	r.t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	h := basic(user, r.pw)
	h.Set("Content-Type", "application/json")
	code, _, b := httpDo(r.t, method, r.p.url+path, rd, h)
	return code, b
}

// push sends docs as user in one _bulk_docs with new_edits:false and
// returns the rows of the answer.
func (r *heldRelay) push(user string, docs []map[string]any) []bulkRow {
	r.t.Helper()
	code, b := r.do("POST", "/vault/_bulk_docs", user, map[string]any{"docs": docs, "new_edits": false})
	if code != http.StatusCreated {
		r.t.Fatalf("%s's _bulk_docs: %d %s", user, code, b)
	}
	var rows []bulkRow
	if err := json.Unmarshal(b, &rows); err != nil {
		r.t.Fatal(err)
	}
	return rows
}

// heldMetas returns the metadata of owner's notes from to to (excluded).
func heldMetas(owner string, from, to int) (out []map[string]any) {
	for i := from; i < to; i++ {
		m, _ := heldNote(owner, i)
		out = append(out, m)
	}
	return out
}

// heldChunks returns the chunks of owner's notes from to to (excluded).
func heldChunks(owner string, from, to int) (out []map[string]any) {
	for i := from; i < to; i++ {
		_, c := heldNote(owner, i)
		out = append(out, c)
	}
	return out
}

// status returns the vault's entry of /status and the size of /status.
func (r *heldRelay) status() (heldStatus, int) {
	r.t.Helper()
	code, b := r.do("GET", "/status", "admin", nil)
	if code != 200 {
		r.t.Fatalf("/status: %d %s", code, b)
	}
	var s struct {
		Databases []heldStatus `json:"databases"`
	}
	if err := json.Unmarshal(b, &s); err != nil || len(s.Databases) != 1 {
		r.t.Fatalf("/status: %v %s", err, b)
	}
	return s.Databases[0], len(b)
}

// refused checks every row is a too_many_held refusal whose reason
// names key, and returns their ids.
func (r *heldRelay) refused(rows []bulkRow, key string) []string {
	r.t.Helper()
	var ids []string
	for _, row := range rows {
		if row.Error != "too_many_held" || !strings.Contains(row.Reason, "Push the notes' chunks before their metadata") ||
			!strings.Contains(row.Reason, key+" in the relay's configuration") {
			r.t.Fatalf("row %+v: want error too_many_held and a reason naming %s", row, key)
		}
		ids = append(ids, row.ID)
	}
	return ids
}

// pastUserLimit: Alice pushes 50 notes' metadata without their chunks,
// and one complete note: 20 held (her limit), 30 refused, the complete
// one stored. A single PUT of one more is refused the same way, and
// refused notes are not held.
func (r *heldRelay) pastUserLimit() {
	t := r.t
	whole, wholeChunk := heldNote("whole", 0)
	rows := r.push("alice", append(heldMetas("alice", 0, 50), wholeChunk, whole))
	ids := r.refused(rows, "[holdback] max_held_documents_per_user")
	if len(ids) != 30 || ids[0] != "notes/alice/n020.md" || ids[29] != "notes/alice/n049.md" {
		t.Fatalf("refused %d: %v", len(ids), ids)
	}
	if !strings.Contains(rows[0].Reason, `user "alice" already has 20 notes waiting`) {
		t.Errorf("reason %q does not say whose limit", rows[0].Reason)
	}
	if code, b := r.do("GET", "/vault/notes%2Fwhole%2Fn000.md", "alice", nil); code != 200 {
		t.Fatalf("the complete note of the same push: %d %s", code, b)
	}
	// A single PUT of one more: the same error, as a 400.
	m, _ := heldNote("alice", 50)
	code, b := r.do("PUT", "/vault/notes%2Falice%2Fn050.md?new_edits=false", "alice", m)
	if code != http.StatusBadRequest || !strings.Contains(string(b), `"error":"too_many_held"`) {
		t.Fatalf("PUT new_edits=false past the limit: %d %s", code, b)
	}
	// Refused notes are not held: a replicator is asked for them again.
	code, b = r.do("POST", "/vault/_revs_diff", "alice", map[string][]string{"notes/alice/n000.md": {"1-aaaa"}, "notes/alice/n030.md": {"1-aaaa"}})
	if code != 200 || strings.Contains(string(b), "n000") || !strings.Contains(string(b), "n030") {
		t.Fatalf("_revs_diff: %d %s", code, b)
	}
}

// refusedCostNothing: 5,000 more refused notes leave the database file
// and the counts as they were, and the heap does not grow with them.
func (r *heldRelay) refusedCostNothing() {
	t := r.t
	dbFile := filepath.Join(r.wd, "data", "vault.db")
	fi0, err := os.Stat(dbFile)
	if err != nil {
		t.Fatal(err)
	}
	heap0 := relayMetric(t, r.p.url, r.pw, "go_memstats_heap_alloc_bytes")
	for i := 100; i < 5100; i += 500 {
		if ids := r.refused(r.push("alice", heldMetas("alice", i, i+500)), "[holdback] max_held_documents"); len(ids) != 500 {
			t.Fatalf("refused %d of 500", len(ids))
		}
	}
	heap1 := relayMetric(t, r.p.url, r.pw, "go_memstats_heap_alloc_bytes")
	fi1, _ := os.Stat(dbFile)
	s, size := r.status()
	if s.HeldDocuments != 30 || s.Holdback.HeldRevisions != 30 || s.Holdback.Refused != 5036 || fi1.Size() != fi0.Size() {
		t.Fatalf("after 5,000 refused: held %d, refused %d, vault.db %d -> %d bytes", s.HeldDocuments, s.Holdback.Refused, fi0.Size(), fi1.Size())
	}
	t.Logf("heap before and after 5,000 refused notes: %.1f -> %.1f MiB; /status %d bytes", heap0/(1<<20), heap1/(1<<20), size)
	// Held, they would take about 7 MiB more, live; refused, only the
	// garbage of the requests, which the collector frees (the heap of a
	// relay this small stays under twice its live size, about 4 MiB).
	if heap1-heap0 > 5<<20 {
		t.Errorf("the heap grew by %.1f MiB with refused notes", (heap1-heap0)/(1<<20))
	}
}

// releaseFreesSlots: the held notes' chunks arrive; every held note is
// released and its slot is free again.
func (r *heldRelay) releaseFreesSlots() {
	t := r.t
	r.push("alice", heldChunks("alice", 0, 20))
	r.push("bob", heldChunks("bob", 0, 10))
	db, err := couchdb.New(couchdb.Config{URL: r.p.url, Database: "vault", User: "admin", Password: r.pw})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var released []string
	for i := range 20 {
		released = append(released, fmt.Sprintf("notes/alice/n%03d.md", i))
	}
	upWaitInFeed(t, db, released, 60*time.Second)
	var s heldStatus
	upPoll(t, "no held notes in /status", func() bool { s, _ = r.status(); return s.HeldDocuments == 0 },
		func() string { return fmt.Sprintf("%+v", s) })
	if s.Holdback.Released != 30 || len(s.Holdback.HeldByUser) != 0 {
		t.Fatalf("after the chunks: %+v", s)
	}
	if ids := r.refused(r.push("alice", heldMetas("alice", 20, 50)), "[holdback] max_held_documents_per_user"); len(ids) != 10 || ids[0] != "notes/alice/n040.md" {
		t.Fatalf("after the release alice's refused %v, want n040…n049", ids)
	}
	if s, _ = r.status(); s.HeldDocuments != 20 || s.Holdback.HeldByUser["alice"] != 20 {
		t.Fatalf("after holding again: %+v", s)
	}
}

// relayMetric reads an unlabelled gauge, such as
// go_memstats_heap_alloc_bytes, from the relay's /metrics.
func relayMetric(t *testing.T, url, pw, name string) float64 {
	t.Helper()
	code, _, b := httpDo(t, "GET", url+"/metrics", nil, basic("admin", pw))
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(b)
	if code != 200 || m == nil {
		t.Fatalf("/metrics %s: %d", name, code)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
