package replicate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

// dyingServer is a remote with latency (the fetches of a pipelined pull
// finish out of order) that can be killed: from then on every request,
// in flight or new, fails with a transport error, as when the server
// process dies or the connection is cut.
type dyingServer struct {
	*memEP
	rnd    *rand.Rand
	rndMu  sync.Mutex
	killed atomic.Bool
}

func (s *dyingServer) delay(ctx context.Context, max time.Duration) error {
	s.rndMu.Lock()
	d := time.Duration(s.rnd.Int64N(int64(max)))
	s.rndMu.Unlock()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return ctx.Err()
	}
	if s.killed.Load() {
		return transportErr
	}
	return nil
}

func (s *dyingServer) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	if err := s.delay(ctx, 5*time.Millisecond); err != nil {
		return engine.ChangesPage{}, err
	}
	return s.memEP.Changes(ctx, req)
}

func (s *dyingServer) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	if err := s.delay(ctx, 60*time.Millisecond); err != nil {
		return nil, err
	}
	return s.memEP.BulkGet(ctx, revs)
}

func (s *dyingServer) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	if err := s.delay(ctx, time.Millisecond); err != nil {
		return nil, err
	}
	return s.memEP.GetLocal(ctx, id)
}

func (s *dyingServer) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	if err := s.delay(ctx, time.Millisecond); err != nil {
		return err
	}
	return s.memEP.PutLocal(ctx, id, doc)
}

// writeCounter counts how often each revision is written to the local
// endpoint.
type writeCounter struct {
	*memEP
	mu     sync.Mutex
	writes map[engine.DocRev]int
}

func (w *writeCounter) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	res, err := w.memEP.BulkDocs(ctx, docs)
	if err == nil {
		w.mu.Lock()
		for _, raw := range docs {
			var h struct {
				ID  string `json:"_id"`
				Rev string `json:"_rev"`
			}
			_ = json.Unmarshal(raw, &h)
			w.writes[engine.DocRev{ID: h.ID, Rev: h.Rev}]++
		}
		w.mu.Unlock()
	}
	return res, err
}

// localCheckpoint returns the local checkpoint's sequence (0 if none).
func localCheckpoint(t *testing.T, local *memEP, id string) int {
	t.Helper()
	raw, err := local.GetLocal(context.Background(), id)
	if err != nil {
		return 0
	}
	var cp struct {
		LastSeq string `json:"last_seq"`
	}
	_ = json.Unmarshal(raw, &cp)
	n, err := strconv.Atoi(cp.LastSeq)
	if err != nil {
		t.Fatalf("checkpoint %s", raw)
	}
	return n
}

// noGaps fails unless every remote document up to sequence seq is local.
func noGaps(t *testing.T, remote, local *memEP, seq int) {
	t.Helper()
	remote.mu.Lock()
	var want []string
	for id, d := range remote.docs {
		if d.seq <= seq {
			want = append(want, id)
		}
	}
	remote.mu.Unlock()
	local.mu.Lock()
	defer local.mu.Unlock()
	for _, id := range want {
		if local.docs[id] == nil {
			t.Fatalf("checkpoint %d passes %s, which is not stored", seq, id)
		}
	}
}

// TestPipelinedPullSurvivesAKilledServer kills the server at random
// instants while many pages are fetched concurrently and finish out of
// order, and resumes each time: the checkpoint never passes a document
// that is not stored, and in the end every revision has been written
// exactly once (nothing lost, nothing transferred twice).
func TestPipelinedPullSurvivesAKilledServer(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { killAndResume(t, seed) })
		})
	}
}

func killAndResume(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 1))
	base := newMem("remote")
	seedVault(base, 150) // 300 documents, 30 pages of 10
	remote := &dyingServer{memEP: base, rnd: rand.New(rand.NewPCG(seed, 2))}
	local := &writeCounter{memEP: newMem("local"), writes: map[engine.DocRev]int{}}
	r := newRep(t, replicate.Config{Local: local, Remote: remote, LocalID: "L", RemoteID: "R", BatchSize: 10, BatchesLimit: 6})
	id := replicate.ReplicationID("R", "L", nil)
	prev, kills := 0, 0 // last checkpoint; runs ended by a kill
	for attempt := 0; ; attempt++ {
		remote.killed.Store(false)
		var timer *time.Timer
		if attempt < 6 {
			timer = time.AfterFunc(time.Duration(rnd.IntN(150))*time.Millisecond, func() { remote.killed.Store(true) })
		}
		_, err := r.Pull(context.Background())
		if timer != nil {
			timer.Stop()
		}
		// The local checkpoint may go back: a resumed pull starts where
		// both sides' checkpoints agree, and the remote one lags (it is
		// written every few batches and could not be written at the
		// kill). It must never pass a document that is not stored.
		seq := localCheckpoint(t, local.memEP, id)
		prev = seq
		noGaps(t, base, local.memEP, seq)
		if err == nil {
			break
		}
		if !replicate.IsTransport(err) {
			t.Fatalf("attempt %d: %v, want a transport error", attempt, err)
		}
		kills++
	}
	if kills == 0 {
		t.Log("the server was never killed mid-pull")
	}
	sameDocs(t, base, local.memEP)
	if prev != 300 {
		t.Errorf("final checkpoint %d, want 300", prev)
	}
	for dr, n := range local.writes {
		if n != 1 {
			t.Errorf("%v written %d times", dr, n)
		}
	}
	if len(local.writes) != 300 {
		t.Errorf("%d revisions written, want 300", len(local.writes))
	}
}

// TestFetchesRunConcurrently: while the first page's BulkGet is stuck,
// the fetches of the following pages (up to BatchesLimit in all) have
// been started.
func TestFetchesRunConcurrently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newMem("remote")
		seedVault(base, 20) // 40 documents, 10 pages of 4
		release := make(chan struct{})
		var started atomic.Int32
		remote := &stuckFirstGet{memEP: base, release: release, started: &started}
		local := newMem("local")
		r := newRep(t, replicate.Config{Local: local, Remote: remote, BatchSize: 4, BatchesLimit: 4})
		done := make(chan error, 1)
		go func() { _, err := r.Pull(context.Background()); done <- err }()
		synctest.Wait()
		if n := started.Load(); n != 4 {
			t.Errorf("%d BulkGets started while the first is stuck, want 4 (batches_limit)", n)
		}
		if n := local.bulkDocsCalls; n != 0 {
			t.Errorf("%d writes before the first page was fetched, want 0", n)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		sameDocs(t, base, local)
		if local.bulkDocsCalls >= 10 {
			t.Errorf("%d writes for 10 pages, want fewer (fetched pages written together)", local.bulkDocsCalls)
		}
	})
}

type stuckFirstGet struct {
	*memEP
	release chan struct{}
	started *atomic.Int32
}

func (s *stuckFirstGet) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	s.started.Add(1)
	if revs[0].ID == "h:c000" { // the first page's
		<-s.release
	}
	return s.memEP.BulkGet(ctx, revs)
}

// TestPushGroupsFetchedPages: a push writes the pages already fetched
// in one BulkDocs, as a pull does, but no more than about 1 MiB of
// documents at once: pages of large documents are sent one by one.
func TestPushGroupsFetchedPages(t *testing.T) {
	for _, size := range []int{100, 300 << 10} {
		synctest.Test(t, func(t *testing.T) {
			base := newMem("local")
			data := strings.Repeat("x", size)
			for i := range 40 {
				base.write(fmt.Sprintf("h:c%03d", i), map[string]any{"type": "leaf", "data": data})
			}
			release := make(chan struct{})
			var started atomic.Int32
			local := &stuckFirstGet{memEP: base, release: release, started: &started}
			remote := newMem("remote")
			r := newRep(t, replicate.Config{Local: local, Remote: remote, BatchSize: 4, BatchesLimit: 10})
			done := make(chan error, 1)
			go func() { _, err := r.Push(context.Background()); done <- err }()
			synctest.Wait()
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			sameDocs(t, base, remote)
			n := remote.bulkDocsCalls
			if size < 1000 && n >= 10 {
				t.Errorf("%d writes for 10 pages of small documents, want fewer (fetched pages written together)", n)
			}
			if size > 1000 && n != 10 {
				t.Errorf("%d writes for 10 pages of 1.2 MB, want 10 (each alone)", n)
			}
		})
	}
}
