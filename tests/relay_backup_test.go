package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// backupAck is a document write the relay acknowledged, and when.
type backupAck struct {
	id, rev string
	at      time.Time     // when the answer was read
	took    time.Duration // the request's round trip
}

// backupWriter writes batches of new documents to the relay's vault with
// _bulk_docs until stop, recording every acknowledged document.
func backupWriter(ctx context.Context, e couchEnv, w int, stop *atomic.Bool, acks chan<- backupAck) error {
	pad := strings.Repeat("x", 900)
	for n := 0; !stop.Load(); n++ {
		var docs []map[string]any
		for i := range 20 {
			docs = append(docs, map[string]any{"_id": fmt.Sprintf("w%d-%06d-%02d", w, n, i), "writer": w, "n": n, "pad": pad})
		}
		body, _ := json.Marshal(map[string]any{"docs": docs})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/vault/_bulk_docs", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth(e.user, e.password)
		sent := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		at := time.Now()
		if err != nil || resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("_bulk_docs: %d %s %v", resp.StatusCode, b, err)
		}
		var res []struct {
			OK  bool   `json:"ok"`
			ID  string `json:"id"`
			Rev string `json:"rev"`
		}
		if err := json.Unmarshal(b, &res); err != nil {
			return err
		}
		for _, r := range res {
			if r.OK {
				acks <- backupAck{id: r.ID, rev: r.Rev, at: at, took: at.Sub(sent)}
			}
		}
	}
	return nil
}

// runRelayCmd runs a livesync-relay subcommand and returns its stderr.
func runRelayCmd(t *testing.T, bin string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"HOME=" + t.TempDir()}, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("livesync-relay %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stderr.String()
}

// getJSON reads one JSON answer of the relay as e's user.
func getJSON(t *testing.T, e couchEnv, path string, v any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodGet, e.url+path, nil)
	req.SetBasicAuth(e.user, e.password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// TestRelayBackupUnderWrites backs a running relay up while four
// clients keep writing, restores the backup into a fresh data folder and
// starts a relay on it: every document acknowledged before the backup
// began is there with its revision, the database's count, changes feed
// and document list agree, and a real PouchDB 9 client replicates all of
// it.
func TestRelayBackupUnderWrites(t *testing.T) {
	pouchClient(t) // fail or skip before the work
	bin := goBuildRelay(t)
	wd := t.TempDir()
	p := startRelayOpts(t, bin, wd, relayStart{args: []string{"--listen", "127.0.0.1:0", "--data-dir", filepath.Join(wd, "data")}, graceful: true})
	e := relayCredentials(t, p)

	ctx := ctxT(t)
	var stop atomic.Bool
	acks := make(chan backupAck, 1024)
	var all []backupAck
	collected := make(chan struct{})
	go func() {
		for a := range acks {
			all = append(all, a)
		}
		close(collected)
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() { errs <- backupWriter(ctx, e, w, &stop, acks) })
	}
	time.Sleep(1500 * time.Millisecond) // let the database grow to a few MB under the writers

	out := filepath.Join(t.TempDir(), "relay.tar")
	env := []string{"LIVESYNC_RELAY_ADMIN_PASSWORD=" + e.password}
	began := time.Now()
	said := runRelayCmd(t, bin, env, "backup", "--out", out, "--url", e.url, "--user", e.user)
	ended := time.Now()
	time.Sleep(200 * time.Millisecond) // writes after the backup: not in it
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
	close(acks)
	<-collected
	var before, during int
	var slowBefore, slowDuring time.Duration // the slowest write before and during the backup
	for _, a := range all {
		switch {
		case a.at.Before(began):
			before++
			slowBefore = max(slowBefore, a.took)
		case a.at.Before(ended):
			during++
			slowDuring = max(slowDuring, a.took)
		}
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backup: %s; %d bytes in %s; %d documents acknowledged before it, %d during, %d in all",
		strings.TrimSpace(said), fi.Size(), ended.Sub(began).Round(time.Millisecond), before, during, len(all))
	t.Logf("slowest _bulk_docs of 20 documents: %s before the backup, %s during it", slowBefore.Round(time.Millisecond), slowDuring.Round(time.Millisecond))
	if before == 0 || during == 0 {
		t.Fatalf("the writers did not overlap the backup (%d before, %d during)", before, during)
	}

	restored := filepath.Join(t.TempDir(), "restored")
	said = runRelayCmd(t, bin, nil, "restore", "--in", out, "--data-dir", restored)
	t.Logf("restore: %s", strings.TrimSpace(said))
	p2 := startRelayOpts(t, bin, t.TempDir(), relayStart{args: []string{"--listen", "127.0.0.1:0", "--data-dir", restored}, graceful: true})
	e2 := couchEnv{url: p2.url, user: e.user, password: e.password} // the admin is in the restored users.json

	checkRestoredVault(t, e2, all, began)
	docs := pouchReplicate(t, fixedServer(e2), "vault")
	var info struct {
		DocCount int `json:"doc_count"`
	}
	getJSON(t, e2, "/vault", &info)
	if len(docs) != info.DocCount {
		t.Fatalf("PouchDB 9 replicated %d documents of %d", len(docs), info.DocCount)
	}
}

// checkRestoredVault checks the restored vault: every document
// acknowledged before began, at its revision, and the database's own
// views of itself agreeing.
func checkRestoredVault(t *testing.T, e couchEnv, all []backupAck, began time.Time) {
	t.Helper()
	var list struct {
		TotalRows int `json:"total_rows"`
		Rows      []struct {
			ID    string `json:"id"`
			Value struct {
				Rev string `json:"rev"`
			} `json:"value"`
		} `json:"rows"`
	}
	getJSON(t, e, "/vault/_all_docs", &list)
	revs := map[string]string{}
	for _, r := range list.Rows {
		revs[r.ID] = r.Value.Rev
	}
	missing := 0
	for _, a := range all {
		if a.at.Before(began) && revs[a.id] != a.rev {
			if missing++; missing <= 5 {
				t.Errorf("%s acknowledged (rev %s) before the backup: restored rev %q", a.id, a.rev, revs[a.id])
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d acknowledged documents missing from the restored relay", missing)
	}
	var info struct {
		DocCount  int             `json:"doc_count"`
		UpdateSeq json.RawMessage `json:"update_seq"`
	}
	getJSON(t, e, "/vault", &info)
	var changes struct {
		Results []struct {
			ID string `json:"id"`
		} `json:"results"`
		LastSeq json.RawMessage `json:"last_seq"`
	}
	getJSON(t, e, "/vault/_changes", &changes)
	seen := map[string]bool{}
	for _, c := range changes.Results {
		seen[c.ID] = true
	}
	if info.DocCount != len(list.Rows) || list.TotalRows != len(list.Rows) || len(seen) != len(list.Rows) || len(changes.Results) != len(seen) {
		t.Fatalf("inconsistent: doc_count %d, _all_docs %d rows (total_rows %d), _changes %d results for %d ids",
			info.DocCount, len(list.Rows), list.TotalRows, len(changes.Results), len(seen))
	}
	for id := range revs {
		if !seen[id] {
			t.Fatalf("%s is listed but not in the changes feed", id)
		}
	}
	if !bytes.Equal(changes.LastSeq, info.UpdateSeq) {
		t.Fatalf("last_seq %s, update_seq %s", changes.LastSeq, info.UpdateSeq)
	}
	t.Logf("restored vault: %d documents, update_seq %s", info.DocCount, info.UpdateSeq)
}
