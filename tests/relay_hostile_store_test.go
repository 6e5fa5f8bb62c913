package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine/store"
)

// What a writer with a vault's credentials
// can do to the relay's store, against the built binary.

// storeRelay is a relay binary started for these tests, with its admin
// credentials.
type storeRelay struct {
	t   *testing.T
	env couchEnv
}

func startStoreRelay(t *testing.T) *storeRelay {
	t.Helper()
	wd := t.TempDir()
	p := startRelayArgs(t, buildRelay(t), wd, nil, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(wd, "data"))
	return &storeRelay{t: t, env: relayCredentials(t, p)}
}

// do sends a request as the admin; body is sent as is ([]byte, string)
// or as JSON.
func (r *storeRelay) do(method, path string, body any) (int, []byte) {
	r.t.Helper()
	var b []byte
	switch v := body.(type) {
	case nil:
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			r.t.Fatal(err)
		}
	}
	h := basic(r.env.user, r.env.password)
	h.Set("Content-Type", "application/json")
	status, _, out := httpDo(r.t, method, r.env.url+path, bytes.NewReader(b), h)
	return status, out
}

func (r *storeRelay) must(want int, method, path string, body any) []byte {
	r.t.Helper()
	status, out := r.do(method, path, body)
	if status != want {
		r.t.Fatalf("%s %s: %d %s, want %d", method, path, status, trimBody(out), want)
	}
	return out
}

// docCount is the database's doc_count.
func (r *storeRelay) docCount(db string) int {
	r.t.Helper()
	var info struct {
		DocCount *int `json:"doc_count"`
	}
	if err := json.Unmarshal(r.must(http.StatusOK, http.MethodGet, "/"+db, nil), &info); err != nil || info.DocCount == nil {
		r.t.Fatalf("GET /%s: %v", db, err)
	}
	return *info.DocCount
}

func trimBody(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// longHistory is a replicated revision of id whose _revisions lists n
// ids (7 hex digits each, as in the report: 100,000 ids, 0.9 MB).
func longHistory(id string, n int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"new_edits":false,"docs":[{"_id":%q,"_rev":"%d-%07x","v":1,"_revisions":{"start":%d,"ids":[`, id, n, n, n)
	for i := n; i >= 1; i-- {
		if i != n {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%07x"`, i)
	}
	b.WriteString("]}}]}")
	return b.Bytes()
}

// _bulk_docs with new_edits:false used to take time quadratic in
// the length of _revisions (100,000 ids: 18-54 s), holding the database's
// only write transaction: a 7-byte PUT waited 9.8-16.3 s. The same
// request with 10x the ids must take about 10x the time (within 15x),
// and small writes beside it must go through.
func TestRelayLongRevisionsLinear(t *testing.T) {
	r := startStoreRelay(t)
	r.must(http.StatusCreated, http.MethodPut, "/hostile", nil)
	write := func(id string, n int) time.Duration {
		body := longHistory(id, n)
		start := time.Now()
		r.must(http.StatusCreated, http.MethodPost, "/hostile/_bulk_docs", body)
		return time.Since(start)
	}
	write("warm-up", 10_000)
	// The best of three of each, so one scheduling hiccup does not decide.
	small, big := time.Hour, time.Hour
	var mu sync.Mutex
	var slowest time.Duration
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // small writes while the big ones run
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			status, out := r.do(http.MethodPut, fmt.Sprintf("/hostile/small-%d", i), `{"v":1}`)
			took := time.Since(start)
			if status != http.StatusCreated {
				t.Errorf("small PUT beside the long histories: %d %s", status, trimBody(out))
				return
			}
			mu.Lock()
			slowest = max(slowest, took)
			mu.Unlock()
		}
	}()
	for i := range 3 {
		small = min(small, write(fmt.Sprintf("ten-thousand-%d", i), 10_000))
		big = min(big, write(fmt.Sprintf("hundred-thousand-%d", i), 100_000))
	}
	close(stop)
	wg.Wait()
	t.Logf("_revisions of 10,000 ids: %v; of 100,000 ids: %v (x%.1f); slowest small PUT beside them: %v",
		small, big, float64(big)/float64(small), slowest)
	if big > 15*small {
		t.Errorf("100,000 _revisions ids took %v, %.1fx the %v of 10,000: not linear", big, float64(big)/float64(small), small)
	}
	if slowest > 2*time.Second+big {
		t.Errorf("a 7-byte PUT waited %v beside writes of %v", slowest, big)
	}
	// The history is stemmed to the revs limit.
	var d struct {
		Revisions struct {
			IDs []string `json:"ids"`
		} `json:"_revisions"`
	}
	json.Unmarshal(r.must(http.StatusOK, http.MethodGet, "/hostile/hundred-thousand-0?revs=true", nil), &d)
	if len(d.Revisions.IDs) != 1000 {
		t.Errorf("stored history of 100,000 ids: %d ids, want the revs limit 1000", len(d.Revisions.IDs))
	}
}

// A document id over bbolt's 32 KiB key limit used to give 500;
// in a new_edits:false batch nothing was stored, so PouchDB retried the
// batch for ever, and with new_edits:true part of the batch was stored.
// Now such an id is a per-document error row and the rest of the batch
// is stored; a single PUT is 400; nothing of it is stored anywhere.
func TestRelayOverlongDocumentIDs(t *testing.T) {
	t.Parallel()
	r := startStoreRelay(t)
	r.must(http.StatusCreated, http.MethodPut, "/hostile", nil)
	long := strings.Repeat("n", 40_000)
	var rows []struct {
		ID     string `json:"id"`
		OK     bool   `json:"ok"`
		Error  string `json:"error"`
		Reason string `json:"reason"`
	}
	check := func(what string, out []byte, wantRows int) {
		t.Helper()
		rows = nil
		if err := json.Unmarshal(out, &rows); err != nil {
			t.Fatalf("%s: %v: %s", what, err, trimBody(out))
		}
		var bad int
		for _, row := range rows {
			if row.ID == long {
				bad++
				if row.Error != "bad_request" || !strings.Contains(row.Reason, fmt.Sprint(store.MaxIDLength)) {
					t.Errorf("%s: row for the long id: %s %q, want bad_request naming the limit", what, row.Error, row.Reason)
				}
			} else if row.Error != "" {
				t.Errorf("%s: row %s: %s %s", what, row.ID, row.Error, row.Reason)
			}
		}
		if bad != 1 || len(rows) != wantRows {
			t.Errorf("%s: %d rows (%d for the long id): %s", what, len(rows), bad, trimBody(out))
		}
	}
	// Replication (new_edits:false): only errors are reported.
	out := r.must(http.StatusCreated, http.MethodPost, "/hostile/_bulk_docs", map[string]any{"new_edits": false, "docs": []any{
		map[string]any{"_id": "rep-a", "_rev": "1-a"},
		map[string]any{"_id": long, "_rev": "1-a"},
		map[string]any{"_id": "rep-b", "_rev": "1-a"},
	}})
	check("new_edits:false", out, 1)
	// Local edits (new_edits:true): a row per document.
	out = r.must(http.StatusCreated, http.MethodPost, "/hostile/_bulk_docs", map[string]any{"docs": []any{
		map[string]any{"_id": "edit-a"}, map[string]any{"_id": long}, map[string]any{"_id": "edit-b"},
	}})
	check("new_edits:true", out, 3)
	if n := r.docCount("hostile"); n != 4 {
		t.Errorf("doc_count %d, want the 4 short ids", n)
	}
	for _, p := range []string{"/hostile/" + long, "/hostile/" + long + "?new_edits=false", "/hostile/_local/" + long} {
		body := `{"v":1}`
		if strings.Contains(p, "new_edits") {
			body = `{"_rev":"1-a","v":1}`
		}
		if status, out := r.do(http.MethodPut, p, body); status != http.StatusBadRequest {
			t.Errorf("PUT %s…: %d %s, want 400", p[:30], status, trimBody(out))
		}
	}
	if status, _ := r.do(http.MethodGet, "/hostile/"+long, nil); status != http.StatusNotFound {
		t.Errorf("GET of the long id: %d, want 404", status)
	}
	if status, _ := r.do(http.MethodGet, "/hostile/_local/"+long, nil); status != http.StatusNotFound {
		t.Errorf("GET of the long _local id: %d, want 404", status)
	}
	if n := r.docCount("hostile"); n != 4 {
		t.Errorf("doc_count %d after the single PUTs, want 4", n)
	}
}

// A full disk used to give a generic 500, and a batch answered
// 500 could be partly applied (4 of 20 documents stored). The relay runs
// with its data directory on a 3 MiB tmpfs (in a private mount namespace,
// via unshare); a batch that does not fit is 507 with a reason that says
// the disk is full, and nothing of it is stored, with new_edits:true and
// false; a small write afterwards succeeds.
func TestRelayDiskFull(t *testing.T) {
	t.Parallel()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no unshare(1): cannot make a small filesystem for the relay")
		}
		t.Skip("no unshare(1): cannot make a small filesystem for the relay")
	}
	probe := exec.Command(unshare, "-rm", "sh", "-c", `d=$(mktemp -d) && mount -t tmpfs -o size=3m tmpfs "$d"`)
	if out, err := probe.CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot mount a tmpfs in a user namespace here: %v %s", err, out)
		}
		t.Skipf("cannot mount a tmpfs in a user namespace here: %v %s", err, out)
	}
	bin := buildRelay(t)
	wd := t.TempDir()
	tiny := filepath.Join(wd, "tiny")
	if err := os.Mkdir(tiny, 0o755); err != nil {
		t.Fatal(err)
	}
	// The relay itself runs in the namespace, on the tmpfs.
	script := `mount -t tmpfs -o size=3m tmpfs "$1" || exit 99
exec "$2" --listen 127.0.0.1:0 --data-dir "$1/data"`
	p := startRelayOpts(t, unshare, wd, relayStart{env: []string{"PATH=" + os.Getenv("PATH")},
		args: []string{"-rm", "sh", "-c", script, "sh", tiny, bin}})
	r := &storeRelay{t: t, env: relayCredentials(t, p)}
	r.must(http.StatusCreated, http.MethodPut, "/hostile", nil)
	r.must(http.StatusCreated, http.MethodPut, "/hostile/seed", `{"v":1}`)

	filler := strings.Repeat("x", 180_000)
	for _, newEdits := range []bool{false, true} {
		var docs []any
		for i := range 20 {
			d := map[string]any{"_id": fmt.Sprintf("fill-%v-%02d", newEdits, i), "data": filler}
			if !newEdits {
				d["_rev"] = "1-a"
			}
			docs = append(docs, d)
		}
		status, out := r.do(http.MethodPost, "/hostile/_bulk_docs", map[string]any{"new_edits": newEdits, "docs": docs})
		var e struct{ Error, Reason string }
		json.Unmarshal(out, &e)
		if status != http.StatusInsufficientStorage || e.Error != "insufficient_storage" || !strings.Contains(e.Reason, "no space left") {
			t.Errorf("new_edits:%v: a 3.6 MB batch on a 3 MiB disk: %d %s, want 507 insufficient_storage saying no space is left", newEdits, status, trimBody(out))
		}
		if n := r.docCount("hostile"); n != 1 {
			t.Errorf("new_edits:%v: doc_count %d after the failed batch, want 1: part of it was stored", newEdits, n)
		}
		for _, i := range []int{0, 19} {
			if status, _ := r.do(http.MethodGet, fmt.Sprintf("/hostile/fill-%v-%02d", newEdits, i), nil); status != http.StatusNotFound {
				t.Errorf("new_edits:%v: document %d of the failed batch: %d, want 404", newEdits, i, status)
			}
		}
	}
	// What fits still goes in.
	r.must(http.StatusCreated, http.MethodPut, "/hostile/after", `{"v":1}`)
	if n := r.docCount("hostile"); n != 2 {
		t.Errorf("doc_count %d after a small write, want 2", n)
	}
	if !strings.Contains(p.output(), "no space left") {
		t.Errorf("the relay's log does not say the disk is full:\n%s", p.output())
	}
}

// The same stall another way: one _bulk_docs naming one
// document many times (each entry a new conflicting leaf) used to rewrite the
// document's growing record once per entry, quadratic in the batch. 10x
// the entries must take about 10x the time (within 15x).
func TestRelayManyConflictsOneBatchLinear(t *testing.T) {
	r := startStoreRelay(t)
	r.must(http.StatusCreated, http.MethodPut, "/hostile", nil)
	write := func(id string, n int) time.Duration {
		var b bytes.Buffer
		b.WriteString(`{"new_edits":false,"docs":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"_id":%q,"_rev":"1-%032x","v":%d}`, id, i, i)
		}
		b.WriteString("]}")
		start := time.Now()
		r.must(http.StatusCreated, http.MethodPost, "/hostile/_bulk_docs", b.Bytes())
		return time.Since(start)
	}
	write("warm-up", 1000)
	small, big := time.Hour, time.Hour
	for i := range 3 {
		small = min(small, write(fmt.Sprintf("thousand-%d", i), 1000))
		big = min(big, write(fmt.Sprintf("ten-thousand-%d", i), 10_000))
	}
	t.Logf("one batch of 1,000 leaves of one document: %v; of 10,000: %v (x%.1f)", small, big, float64(big)/float64(small))
	if big > 25*small { // n log n sorting the leaves; quadratic was 118x
		t.Errorf("10,000 leaves in one batch took %v, %.1fx the %v of 1,000: not linear", big, float64(big)/float64(small), small)
	}
	var d struct {
		Conflicts []string `json:"_conflicts"`
	}
	json.Unmarshal(r.must(http.StatusOK, http.MethodGet, "/hostile/ten-thousand-0?conflicts=true", nil), &d)
	if len(d.Conflicts) != 9999 {
		t.Errorf("%d conflicts, want 9999", len(d.Conflicts))
	}
}
