package livesyncrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine/rpcroom"
)

// A storm of legacy/onProgress from a followed peer costs at most the
// pull running and one more, and every announcement is answered after a
// pull that started after it.
func TestOnProgressStormCoalesced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &network{}
		a := newNode(t, n, "aaaa", func(c *Config) { c.Follow = "device-bbbb" })
		b := newNode(t, n, "bbbb", nil)
		meet(a, b)
		put(t, b.st, "news", `"v":1`)
		release := make(chan struct{})
		var infoCalls int
		var mu sync.Mutex
		if err := b.room.Handle(MethodInfo, func(ctx context.Context, peer string, args []json.RawMessage) (any, error) {
			mu.Lock()
			infoCalls++
			mu.Unlock()
			<-release
			return b.handleInfo(ctx, peer, args)
		}); err != nil {
			t.Fatal(err)
		}
		const storm = 50
		var wg sync.WaitGroup
		errs := make(chan error, storm)
		for range storm {
			wg.Go(func() {
				_, err := b.room.Call(t.Context(), "aaaa", MethodOnProgress, "bbbb")
				errs <- err
			})
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if infoCalls != 2 {
			t.Fatalf("%d announcements made %d pulls, want 2 (the one running and one after)", storm, infoCalls)
		}
		if len(leaves(t, a.st)) != 1 {
			t.Fatal("nothing was pulled")
		}
		a.progressMu.Lock()
		left := len(a.followers)
		a.progressMu.Unlock()
		if left != 0 {
			t.Fatalf("%d followers kept after the storm", left)
		}
	})
}

// A hostile accepted peer asking for huge pages and bulk reads gets
// bounded answers or a clear error, never a crash.
func TestHostileBounds(t *testing.T) {
	n := &network{}
	a, b := newNode(t, n, "aaaa", nil), newNode(t, n, "bbbb", nil)
	meet(a, b)
	docs := make([]json.RawMessage, MaxChangesRows+5)
	for i := range docs {
		docs[i] = json.RawMessage(fmt.Sprintf(`{"_id":"d%05d","_rev":"1-a","v":1}`, i))
	}
	if _, err := a.st.BulkDocs(t.Context(), docs); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []any{1e18, nil, -1, "x", 5000} {
		got, err := call(t, b, MethodChanges, map[string]any{"since": 0, "limit": limit})
		if err != nil {
			t.Fatalf("limit %v: %v", limit, err)
		}
		var page changesAnswer
		if err := json.Unmarshal([]byte(got), &page); err != nil || len(page.Results) != MaxChangesRows {
			t.Fatalf("limit %v: %d rows, want %d (%v)", limit, len(page.Results), MaxChangesRows, err)
		}
	}
	reqs := make([]map[string]string, MaxBulkGetDocs+1)
	for i := range reqs {
		reqs[i] = map[string]string{"id": fmt.Sprintf("d%05d", i%len(docs)), "rev": "1-a"}
	}
	if _, err := call(t, b, MethodBulkGet, map[string]any{"docs": reqs}); !errors.Is(err, rpcroom.ErrRemote) ||
		!strings.Contains(err.Error(), "at most 2000") {
		t.Fatalf("bulkGet of %d revisions: %v", len(reqs), err)
	}
	got, err := call(t, b, MethodBulkGet, map[string]any{"docs": reqs[:MaxBulkGetDocs]})
	if err != nil || len(got) < MaxBulkGetDocs*10 {
		t.Fatalf("bulkGet of %d revisions: %d bytes, %v", MaxBulkGetDocs, len(got), err)
	}
	diff := map[string][]string{}
	for i := range MaxRevsDiffRevs + 1 {
		diff[fmt.Sprint(i)] = []string{"1-a"}
	}
	if _, err := call(t, b, MethodRevsDiff, diff); err == nil || !strings.Contains(err.Error(), "more than 10000") {
		t.Fatalf("revsDiff of %d revisions: %v", len(diff), err)
	}
	many := make([]json.RawMessage, MaxBulkDocs+1)
	for i := range many {
		many[i] = json.RawMessage(fmt.Sprintf(`{"_id":"m%05d","_rev":"1-a"}`, i))
	}
	if _, err := call(t, b, MethodBulkDocs, many, map[string]bool{"new_edits": false}); err == nil ||
		!strings.Contains(err.Error(), "at most 2000") {
		t.Fatalf("bulkDocs of %d documents: %v", MaxBulkDocs+1, err)
	}
	// Deep nesting is refused by the JSON decoder, not by a crash.
	deep := json.RawMessage(fmt.Sprintf("%s1%s", repeat("[", 20000), repeat("]", 20000)))
	for _, m := range []string{MethodChanges, MethodBulkGet, MethodRevsDiff, MethodBulkDocs, MethodPut} {
		if _, err := call(t, b, m, deep); err == nil {
			t.Errorf("%s of 20000 nested arrays answered", m)
		}
	}
	if _, err := call(t, b, MethodInfo); err != nil {
		t.Fatal("the peer stopped serving")
	}
}

func repeat(s string, n int) string {
	b := make([]byte, 0, len(s)*n)
	for range n {
		b = append(b, s...)
	}
	return string(b)
}

// A source that never answers legacy/onProgressAcknowledged does not
// hold a pull up: the plugin fires its acknowledgements and goes on.
func TestSlowAcknowledgementsDoNotHoldPull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := &network{}
		a, b := newNode(t, n, "aaaa", nil), newNode(t, n, "bbbb", nil)
		meet(a, b)
		for i := range 70 {
			put(t, b.st, fmt.Sprintf("d%02d", i), `"v":1`)
		}
		release := make(chan struct{})
		var acks int
		var mu sync.Mutex
		b.room.Handle(MethodOnProgressAcknowledged, func(context.Context, string, []json.RawMessage) (any, error) {
			mu.Lock()
			acks++
			mu.Unlock()
			<-release
			return nil, nil
		})
		start := time.Now()
		res, err := a.Pull(t.Context(), "bbbb", PullOptions{})
		if err != nil || res.Batches != 3 {
			t.Fatalf("pull %+v, %v", res, err)
		}
		if took := time.Since(start); took >= 500*time.Millisecond {
			t.Fatalf("the pull took %v waiting for acknowledgements", took)
		}
		time.Sleep(4 * 500 * time.Millisecond) // each unanswered acknowledgement times out
		synctest.Wait()
		close(release)
		a.Close()
		if acks != 4 {
			t.Fatalf("%d acknowledgements sent, want 3 batches and the end", acks)
		}
	})
}
