package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Hold-back memory must be capped by the documents' size, not only by
// their count: 20 held documents, each listing 50,000 missing chunk ids
// (each doc about 850 KB), once raised heap in use by 528 MiB. With the
// default limits a user's held revisions may need 200,000 chunk ids: of
// 20 such notes 4 are held and 16 refused with too_many_held naming
// [holdback] max_held_chunk_ids_per_user, and the heap grows by far less
// than 528 MiB.
func TestRelayHeldChunkIDsLimit(t *testing.T) {
	t.Parallel()
	bin := buildRelay(t)
	wd := t.TempDir()
	conf := fmt.Sprintf("data_dir = %q\n\n", filepath.Join(wd, "data")) +
		"[[users]]\nname = \"admin\"\npassword_env = \"LSGO_HELD_PW\"\nadmin = true\n\n" +
		"[[users]]\nname = \"alice\"\npassword_env = \"LSGO_HELD_PW\"\ndatabases = [\"big9\"]\n"
	if err := os.WriteFile(filepath.Join(wd, "relay.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	const pw = "held-size-password"
	p := startRelayArgs(t, bin, wd, []string{"LSGO_HELD_PW=" + pw}, "--config", filepath.Join(wd, "relay.toml"), "--listen", "127.0.0.1:0")
	h := basic("admin", pw)
	if code, _, b := httpDo(t, "PUT", p.url+"/big9", nil, h); code != http.StatusCreated {
		t.Fatalf("PUT /big9: %d %s", code, b)
	}
	heap0 := relayMetric(t, p.url, pw, "go_memstats_heap_inuse_bytes")
	var held, refused int
	for i := range 20 {
		id := fmt.Sprintf("held/n%d.md", i)
		children := make([]string, 50000)
		for j := range children {
			children[j] = fmt.Sprintf("h:m%d-%07d", i, j)
		}
		doc := map[string]any{"_id": id, "_rev": fmt.Sprintf("1-%032x", i), "path": id, "children": children,
			"ctime": 1, "mtime": 1, "size": 5, "type": "plain", "eden": map[string]any{}}
		body, _ := json.Marshal(map[string]any{"docs": []any{doc}, "new_edits": false})
		ah := basic("alice", pw)
		ah.Set("Content-Type", "application/json")
		code, _, b := httpDo(t, "POST", p.url+"/big9/_bulk_docs", bytes.NewReader(body), ah)
		if code != http.StatusCreated {
			t.Fatalf("push %d: %d %s", i, code, b)
		}
		var rows []bulkRow
		if err := json.Unmarshal(b, &rows); err != nil || len(rows) > 1 {
			t.Fatalf("push %d: %v %s", i, err, b)
		}
		switch {
		case len(rows) == 0: // new_edits=false answers only errors
			held++
		case rows[0].Error == "too_many_held" && strings.Contains(rows[0].Reason, "[holdback] max_held_chunk_ids_per_user in the relay's configuration"):
			refused++
		default:
			t.Fatalf("push %d: %+v", i, rows[0])
		}
	}
	heap1 := relayMetric(t, p.url, pw, "go_memstats_heap_inuse_bytes")
	grew := (heap1 - heap0) / (1 << 20)
	t.Logf("20 notes of 50,000 missing chunk ids: %d held, %d refused; heap in use %.0f -> %.0f MiB (+%.0f MiB)",
		held, refused, heap0/(1<<20), heap1/(1<<20), grew)
	if held != 4 || refused != 16 {
		t.Fatalf("%d held, %d refused; want 4 held (200,000 ids, the per-user default) and 16 refused", held, refused)
	}
	if grew > 150 {
		t.Fatalf("heap in use grew by %.0f MiB holding 200,000 chunk ids; want under 150 MiB", grew)
	}
}
