//go:build !js && !wasip1

package boltstore_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

// The kill test re-executes the test binary as a writer process selected
// by these variables.
const (
	envKillPath  = "BOLTSTORE_KILL_CHILD_PATH"
	envKillStart = "BOLTSTORE_KILL_CHILD_START"
	killBatch    = 100 // documents (and chunks) per batch
)

func batchDocs(n int) ([]json.RawMessage, []engine.Chunk) {
	docs := make([]json.RawMessage, killBatch)
	chunks := make([]engine.Chunk, killBatch)
	pad := strings.Repeat("p", 900)
	for i := range docs {
		id := fmt.Sprintf("b%06d-%03d", n, i)
		docs[i] = json.RawMessage(fmt.Sprintf(`{"_id":%q,"_rev":"1-%08x","type":"plain","batch":%d,"children":["h:%s"],"pad":%q}`, id, n, n, id, pad))
		chunks[i] = engine.Chunk{ID: "h:" + id, Data: fmt.Sprintf("chunk of batch %d %s", n, pad)}
	}
	return docs, chunks
}

// TestKillChild is the writer: it runs only when the parent sets the
// environment, writes numbered batches forever and reports each one on
// stdout once BulkDocs and PutChunks have both returned.
func TestKillChild(t *testing.T) {
	path := os.Getenv(envKillPath)
	if path == "" {
		t.Skip("writer process of TestKillMidBatch")
	}
	start, _ := strconv.Atoi(os.Getenv(envKillStart))
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	for n := start; ; n++ {
		docs, chunks := batchDocs(n)
		res, err := st.BulkDocs(t.Context(), docs)
		if err != nil || len(res) != len(docs) {
			fmt.Println("error", err)
			os.Exit(2)
		}
		if err := st.PutChunks(t.Context(), chunks); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Printf("ack %d\n", n) // os.Stdout is unbuffered
	}
}

// TestKillMidBatch SIGKILLs the writer at a random moment, several times
// on the same file, and checks after each kill that the store opens, that
// every acknowledged batch is complete, that no batch is half-written and
// that the changes feed agrees with the documents.
func TestKillMidBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns writer processes")
	}
	path := filepath.Join(t.TempDir(), "kill.db")
	acked := map[int]bool{}
	for round := range 4 {
		start := round * 100000
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envKillPath+"="+path, envKillStart+"="+strconv.Itoa(start))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		want := 3 + rand.IntN(5)
		seen := 0
		deadline := time.After(60 * time.Second)
	wait:
		for seen < want {
			select {
			case l, ok := <-lines:
				if !ok {
					break wait
				}
				if strings.HasPrefix(l, "ack ") {
					seen++
					n, _ := strconv.Atoi(strings.TrimPrefix(l, "ack "))
					acked[n] = true
				} else if strings.HasPrefix(l, "error") {
					t.Fatalf("writer: %s", l)
				}
			case <-deadline:
				t.Fatal("writer made no progress")
			}
		}
		time.Sleep(time.Duration(rand.IntN(15000)) * time.Microsecond)
		if err := cmd.Process.Kill(); err != nil { // SIGKILL
			t.Fatal(err)
		}
		for l := range lines { // acks written before the kill
			if n, err := strconv.Atoi(strings.TrimPrefix(l, "ack ")); err == nil && strings.HasPrefix(l, "ack ") {
				acked[n] = true
			}
		}
		cmd.Wait()
		t.Logf("round %d: killed after %d acknowledged batches in this round", round, countFrom(acked, start))
		checkKilledStore(t, path, acked)
	}
}

func countFrom(acked map[int]bool, start int) int {
	n := 0
	for b := range acked {
		if b >= start && b < start+100000 {
			n++
		}
	}
	return n
}

func checkKilledStore(t *testing.T, path string, acked map[int]bool) {
	t.Helper()
	ctx := t.Context()
	st, err := boltstore.Open(path, boltstore.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer st.Close()
	// Every document in the feed, once, in a consistent state.
	docs := map[int]int{}   // batch → metadata docs
	chunks := map[int]int{} // batch → chunks
	seen := map[string]bool{}
	since := ""
	for {
		page, err := st.Changes(ctx, engine.ChangesRequest{Since: since, Limit: 500})
		if err != nil {
			t.Fatalf("changes after kill: %v", err)
		}
		for _, c := range page.Results {
			if seen[c.ID] {
				t.Fatalf("%s twice in the feed", c.ID)
			}
			seen[c.ID] = true
			var n int
			id := strings.TrimPrefix(c.ID, "h:")
			if _, err := fmt.Sscanf(id, "b%06d-", &n); err != nil {
				t.Fatalf("unexpected id %q", c.ID)
			}
			if strings.HasPrefix(c.ID, "h:") {
				chunks[n]++
			} else {
				docs[n]++
			}
		}
		since = page.LastSeq
		if len(page.Results) < 500 {
			break
		}
	}
	info, err := st.Info(ctx)
	if err != nil || info.DocCount != int64(len(seen)) || info.UpdateSeq != since {
		t.Fatalf("Info %+v (%v) vs %d docs in the feed ending at %s", info, err, len(seen), since)
	}
	all, err := st.AllDocs(ctx, store.AllDocsOptions{})
	if err != nil || len(all) != len(seen) {
		t.Fatalf("AllDocs: %d rows (%v), feed %d", len(all), err, len(seen))
	}
	// Acknowledged batches are complete; any other batch is all or nothing
	// per call (BulkDocs, then PutChunks).
	for n := range acked {
		if docs[n] != killBatch || chunks[n] != killBatch {
			t.Fatalf("acknowledged batch %d: %d docs, %d chunks of %d", n, docs[n], chunks[n], killBatch)
		}
	}
	for n, c := range docs {
		if c != killBatch {
			t.Fatalf("batch %d half written: %d of %d docs", n, c, killBatch)
		}
	}
	for n, c := range chunks {
		if c != killBatch || docs[n] != killBatch {
			t.Fatalf("batch %d half written: %d chunks, %d docs", n, c, docs[n])
		}
	}
	// Spot-check content of the last acknowledged batch.
	last := -1
	for n := range acked {
		last = max(last, n)
	}
	docsOf, chunksOf := batchDocs(last)
	ids := []engine.ChunkID{chunksOf[0].ID, chunksOf[killBatch-1].ID}
	got, err := st.GetChunks(ctx, ids)
	if err != nil || got[ids[0]] != chunksOf[0] || got[ids[1]] != chunksOf[killBatch-1] {
		t.Fatalf("chunks of batch %d: %v", last, err)
	}
	var d struct {
		ID string `json:"_id"`
	}
	json.Unmarshal(docsOf[7], &d)
	if b, err := st.Get(ctx, d.ID, store.GetOptions{}); err != nil || !strings.Contains(string(b), fmt.Sprintf(`"batch":%d`, last)) {
		t.Fatalf("doc %s: %s, %v", d.ID, b, err)
	}
}
