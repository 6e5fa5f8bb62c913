package replicate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/activity"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

func newRep(t *testing.T, cfg replicate.Config) *replicate.Replicator {
	t.Helper()
	r, err := replicate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// seedVault writes n notes, each a metadata document and one chunk.
func seedVault(ep *memEP, n int) {
	for i := range n {
		chunk := fmt.Sprintf("h:c%03d", i)
		ep.write(chunk, map[string]any{"type": "leaf", "data": fmt.Sprintf("piece %d", i)})
		ep.write(fmt.Sprintf("note%03d.md", i), map[string]any{"type": "plain", "path": fmt.Sprintf("note%03d.md", i),
			"children": []string{chunk}, "ctime": 1, "mtime": 1, "size": 7, "eden": map[string]any{}})
	}
}

// sameDocs fails unless a and b hold the same documents with the same
// leaves and the same winning bodies.
func sameDocs(t *testing.T, a, b *memEP) {
	t.Helper()
	if ia, ib := a.ids(), b.ids(); !slices.Equal(ia, ib) {
		t.Fatalf("ids differ:\n%v\n%v", ia, ib)
	}
	for _, id := range a.ids() {
		if la, lb := a.leaves(id), b.leaves(id); !slices.Equal(la, lb) {
			t.Errorf("%s: leaves %v vs %v", id, la, lb)
		}
		if wa, wb := a.winner(id), b.winner(id); !reflect.DeepEqual(wa, wb) {
			t.Errorf("%s: winner %v vs %v", id, wa, wb)
		}
	}
}

func TestPullCopiesEverythingAndRerunTransfersNothing(t *testing.T) {
	remote, local := newMem("remote"), newMem("local")
	seedVault(remote, 30)
	var progress []replicate.Progress
	r := newRep(t, replicate.Config{Local: local, Remote: remote, BatchSize: 7, Progress: func(p replicate.Progress) { progress = append(progress, p) }})
	res, err := r.Pull(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sameDocs(t, remote, local)
	if res.Pull.DocsRead != 60 || res.Pull.DocsWritten != 60 || res.Pull.LastSeq != "60" {
		t.Errorf("result %+v", res.Pull)
	}
	if len(progress) == 0 || progress[len(progress)-1].DocsWritten != 60 {
		t.Errorf("progress %+v", progress)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i].DocsWritten < progress[i-1].DocsWritten {
			t.Errorf("progress went backwards: %+v", progress)
		}
	}
	gets, calls := remote.bulkGetCalls, remote.changesCalls
	res, err = r.Pull(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if remote.bulkGetCalls != gets || res.Pull.DocsRead != 0 {
		t.Errorf("rerun fetched documents again: %d BulkGet calls, %+v", remote.bulkGetCalls-gets, res.Pull)
	}
	if remote.changesCalls-calls != 1 {
		t.Errorf("rerun read %d pages, want 1 (empty, from the checkpoint)", remote.changesCalls-calls)
	}
}

func TestSyncConflictsAndDeletions(t *testing.T) {
	remote, local := newMem("remote"), newMem("local")
	seedVault(remote, 3)
	r := newRep(t, replicate.Config{Local: local, Remote: remote})
	if _, err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Both sides edit note000 from the same revision: a conflict.
	local.write("note000.md", map[string]any{"type": "plain", "path": "note000.md", "children": []string{"h:c000"}, "mtime": 2})
	remote.write("note000.md", map[string]any{"type": "plain", "path": "note000.md", "children": []string{"h:c000"}, "mtime": 3})
	// The remote deletes note001 (tombstone); the local side soft-deletes note002 and adds a note.
	remote.write("note001.md", map[string]any{"_deleted": true})
	local.write("note002.md", map[string]any{"type": "plain", "path": "note002.md", "children": []string{}, "deleted": true})
	local.write("new.md", map[string]any{"type": "plain", "path": "new.md", "children": []string{}})
	res, err := r.Sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sameDocs(t, remote, local)
	if ls := local.leaves("note000.md"); len(ls) != 2 {
		t.Errorf("conflict not replicated: leaves %v", ls)
	}
	if w := local.winner("note001.md"); w["_deleted"] != true {
		t.Errorf("deletion not pulled: %v", w)
	}
	if w := remote.winner("note002.md"); w["deleted"] != true {
		t.Errorf("soft deletion not pushed: %v", w)
	}
	if res.Pull.DocsWritten != 2 || res.Push.DocsWritten != 3 {
		t.Errorf("result %+v", res)
	}
}

func TestResumeFromCheckpointAfterInterruption(t *testing.T) {
	remote, local := newMem("remote"), newMem("local")
	seedVault(remote, 50) // 100 documents
	failed := false
	local.onBulkDocs = func(docs []json.RawMessage) error {
		// The write that holds the fifth page's first document fails.
		for _, d := range docs {
			if !failed && strings.Contains(string(d), `"_id":"h:c020"`) {
				failed = true
				return transportErr
			}
		}
		return nil
	}
	r := newRep(t, replicate.Config{Local: local, Remote: remote, BatchSize: 10, BatchesLimit: 3})
	_, err := r.Pull(context.Background())
	if !replicate.IsTransport(err) {
		t.Fatalf("interrupted pull: %v, want the transport error", err)
	}
	// Pages are fetched ahead of the writes (at most BatchesLimit pages
	// beyond those written), and fetched pages are written together, so
	// the failed write may have held the pages before the fifth too.
	got, put := remote.bulkGetDocs, local.bulkDocsDocs
	if put > 40 || put%10 != 0 || got < 50 || got > put+30 {
		t.Fatalf("before the failure: %d fetched, %d written; want whole pages up to 40 written, at most 3 pages more fetched", got, put)
	}
	res, err := r.Pull(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sameDocs(t, remote, local)
	// Only what was not written is fetched again; nothing written twice.
	if d := remote.bulkGetDocs - got; d != 100-put || res.Pull.DocsRead != 100-put {
		t.Errorf("rerun fetched %d documents, want %d", d, 100-put)
	}
	if local.bulkDocsDocs != 100 {
		t.Errorf("written %d documents in all, want 100", local.bulkDocsDocs)
	}
}

func TestBatchFallbackSizes(t *testing.T) {
	for _, tc := range []struct {
		batch int
		want  []int
	}{
		{25, []int{25, 15, 10, 7, 6, 5}},         // LiveSync's batch_size
		{0, []int{100, 52, 28, 16, 10, 7, 6, 5}}, // our default
	} {
		remote, local := newMem("remote"), newMem("local")
		seedVault(remote, 20)
		local.onBulkDocs = func([]json.RawMessage) error {
			return &engine.Error{Op: "bulk docs", Stage: engine.StageProtocol, Err: errors.New("500 internal error")}
		}
		r := newRep(t, replicate.Config{Local: local, Remote: remote, BatchSize: tc.batch})
		_, err := r.Pull(context.Background())
		if err == nil || replicate.IsTransport(err) {
			t.Fatalf("err = %v", err)
		}
		// One Changes request per attempt (the write fails on the
		// first), listing 4 pages: the limits are 4 times the batch
		// sizes of upstream's fallback.
		var firsts []int
		for i, l := range remote.limits {
			if i == 0 || l != remote.limits[i-1] {
				firsts = append(firsts, l/4)
			}
		}
		if !slices.Equal(firsts, tc.want) {
			t.Errorf("BatchSize %d: batch sizes %v, want %v", tc.batch, firsts, tc.want)
		}
	}
}

func TestTooLargeShrinksUntilItFits(t *testing.T) {
	remote, local := newMem("remote"), newMem("local")
	seedVault(remote, 20)
	local.onBulkDocs = func(docs []json.RawMessage) error {
		if len(docs) > 8 {
			return &engine.Error{Op: "bulk docs", Stage: engine.StageProtocol, Err: fmt.Errorf("413: %w", engine.ErrTooLarge)}
		}
		return nil
	}
	r := newRep(t, replicate.Config{Local: local, Remote: remote})
	if _, err := r.Pull(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameDocs(t, remote, local)
	if last := remote.limits[len(remote.limits)-1] / 4; last != 7 { // 4 pages a request
		t.Errorf("final batch size %d, want 7", last)
	}
}

func TestTransportErrorEndsTheRun(t *testing.T) {
	remote, local := newMem("remote"), newMem("local")
	seedVault(remote, 5)
	remote.onChanges = func(engine.ChangesRequest) error { return transportErr }
	r := newRep(t, replicate.Config{Local: local, Remote: remote})
	if _, err := r.Pull(context.Background()); !errors.Is(err, transportErr) {
		t.Fatalf("err = %v", err)
	}
	if len(remote.limits) != 1 {
		t.Errorf("%d attempts, want 1 (the caller retries)", len(remote.limits))
	}
}

func TestSelectorPullLeavesChunksOut(t *testing.T) {
	remote, local := newMem("remote"), newMem("local")
	seedVault(remote, 10)
	r := newRep(t, replicate.Config{Local: local, Remote: remote, Selector: replicate.ChunksOnlineSelector})
	if _, err := r.Pull(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, id := range local.ids() {
		if id[:2] == "h:" {
			t.Errorf("chunk %s pulled despite the selector", id)
		}
	}
	if n := len(local.ids()); n != 10 {
		t.Errorf("%d documents pulled, want the 10 notes", n)
	}
	// The selector is part of the replication id: the same endpoints
	// without it start from the beginning and fetch the chunks.
	if replicate.ReplicationID("remote", "local", replicate.ChunksOnlineSelector) == replicate.ReplicationID("remote", "local", nil) {
		t.Error("selector does not change the replication id")
	}
	r2 := newRep(t, replicate.Config{Local: local, Remote: remote})
	res, err := r2.Pull(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sameDocs(t, remote, local)
	if res.Pull.DocsRead != 10 {
		t.Errorf("pull without selector read %d, want the 10 chunks", res.Pull.DocsRead)
	}
}

type holdCall struct {
	rev    hold.Revision
	source string
}

type fakeHolder struct {
	mu      sync.Mutex
	holds   []holdCall
	arrived []engine.ChunkID
}

func (h *fakeHolder) Hold(ctx context.Context, r hold.Revision, source string) (hold.Outcome, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holds = append(h.holds, holdCall{r, source})
	return hold.Held, nil
}

func (h *fakeHolder) ChunksArrived(ids []engine.ChunkID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.arrived = append(h.arrived, ids...)
}

func TestHolderGetsPulledMetadataWithMissingChunks(t *testing.T) {
	remote, local := newMem("remote"), newMem("local")
	seedVault(remote, 3)
	remote.write("note001.md", map[string]any{"_deleted": true})
	h := &fakeHolder{}
	r := newRep(t, replicate.Config{Local: local, Remote: remote, Selector: replicate.ChunksOnlineSelector,
		Holder: h, HoldSource: "couch.example:5984", Arrivals: h})
	if _, err := r.Pull(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(h.arrived) != 0 {
		t.Errorf("chunk arrivals %v with the selector", h.arrived)
	}
	got := map[string]holdCall{}
	for _, c := range h.holds {
		got[c.rev.Doc] = c
		if c.source != "couch.example:5984" {
			t.Errorf("%s held with source %q", c.rev.Doc, c.source)
		}
		if want := local.leaves(c.rev.Doc)[0]; c.rev.Rev != want {
			t.Errorf("%s held at %s, want %s", c.rev.Doc, c.rev.Rev, want)
		}
	}
	if len(h.holds) != 3 {
		t.Fatalf("holds %+v, want one per pulled metadata revision", h.holds)
	}
	if c := got["note000.md"]; !slices.Equal(c.rev.Chunks, []engine.ChunkID{"h:c000"}) {
		t.Errorf("note000 needs %v", c.rev.Chunks)
	}
	if c := got["note001.md"]; len(c.rev.Chunks) != 0 {
		t.Errorf("deleted note001 needs %v", c.rev.Chunks)
	}

	// Without the selector the chunks arrive and are announced.
	local2, h2 := newMem("local2"), &fakeHolder{}
	r2 := newRep(t, replicate.Config{Local: local2, Remote: remote, Holder: h2, Arrivals: h2})
	if _, err := r2.Pull(context.Background()); err != nil {
		t.Fatal(err)
	}
	slices.Sort(h2.arrived)
	if want := []engine.ChunkID{"h:c000", "h:c001", "h:c002"}; !slices.Equal(h2.arrived, want) {
		t.Errorf("arrived %v, want %v", h2.arrived, want)
	}
}

// TestOneShotRunsAreFinite: a successful finite operation is complete
// when its replicator has reached the latest sequence in the operation's
// scope, so the finite count is raised while
// any request of a pull or sync runs and is zero after; a push cannot
// deliver a local document and is bounded only.
func TestOneShotRunsAreFinite(t *testing.T) {
	remote, local := newMem("remote"), newMem("local")
	seedVault(remote, 5)
	local.write("mine.md", map[string]any{"type": "plain", "path": "mine.md", "children": []string{}})
	tr := activity.New(nil)
	var seen []activity.State
	observe := func(engine.ChangesRequest) error { seen = append(seen, tr.State()); return nil }
	remote.onChanges, local.onChanges = observe, observe
	r := newRep(t, replicate.Config{Local: local, Remote: remote, Activity: tr})
	for _, tc := range []struct {
		name   string
		run    func(context.Context) (replicate.Result, error)
		finite int
	}{{"pull", r.Pull, 1}, {"sync", r.Sync, 1}, {"push", r.Push, 0}} {
		seen = nil
		if _, err := tc.run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(seen) == 0 {
			t.Fatalf("%s: no requests", tc.name)
		}
		for _, s := range seen {
			if s.Finite != tc.finite || s.Bounded != 1 {
				t.Errorf("%s: state during the run %+v, want finite %d", tc.name, s, tc.finite)
			}
		}
		if s := tr.State(); s.Finite != 0 || s.Bounded != 0 {
			t.Errorf("%s: state after the run %+v", tc.name, s)
		}
	}
	if s := tr.State(); s.FiniteStarts != 2 {
		t.Errorf("finite starts %d, want 2", s.FiniteStarts)
	}
}

func TestCheckpointsOnBothSides(t *testing.T) {
	remote, local := newMem("remote"), newMem("local")
	seedVault(remote, 4)
	r := newRep(t, replicate.Config{Local: local, Remote: remote, LocalID: "L", RemoteID: "R"})
	if _, err := r.Pull(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := replicate.ReplicationID("R", "L", nil)
	for _, ep := range []*memEP{local, remote} {
		raw, err := ep.GetLocal(context.Background(), id)
		if err != nil {
			t.Fatalf("%s: %v", ep.name, err)
		}
		var cp struct {
			LastSeq string `json:"last_seq"`
		}
		_ = json.Unmarshal(raw, &cp)
		if cp.LastSeq != "8" {
			t.Errorf("%s: checkpoint %s", ep.name, raw)
		}
	}
}

// A pull's local checkpoint is written after every write, the remote one
// every RemoteCheckpointBatches batches and at the end; a push writes both
// on the remote's schedule. Both end at the last sequence.
func TestRemoteCheckpointIsSpacedOut(t *testing.T) {
	for _, dir := range []string{"pull", "push"} {
		t.Run(dir, func(t *testing.T) {
			remote, local := newMem("remote"), newMem("local")
			src := remote
			if dir == "push" {
				src = local
			}
			seedVault(src, 50) // 100 documents, 20 batches of 5
			r := newRep(t, replicate.Config{Local: local, Remote: remote, LocalID: "L", RemoteID: "R", BatchSize: 5, BatchesLimit: 2})
			var err error
			id := replicate.ReplicationID("R", "L", nil)
			if dir == "push" {
				_, err = r.Push(context.Background())
				id = replicate.ReplicationID("L", "R", nil)
			} else {
				_, err = r.Pull(context.Background())
			}
			if err != nil {
				t.Fatal(err)
			}
			// A pull writes pages already fetched together (one
			// checkpoint per write).
			if n := local.putLocalCalls; n > 20 || n < 1 || (dir == "push" && n != remote.putLocalCalls) {
				t.Errorf("local checkpoint writes = %d, want at most 20 for a pull, as many as the remote's for a push", n)
			}
			if n := remote.putLocalCalls; n < 2 || n > 3 {
				t.Errorf("remote checkpoint writes = %d, want 2 or 3", n)
			}
			for _, ep := range []*memEP{local, remote} {
				raw, err := ep.GetLocal(context.Background(), id)
				if err != nil {
					t.Fatalf("%s: %v", ep.name, err)
				}
				var cp struct {
					LastSeq string `json:"last_seq"`
				}
				_ = json.Unmarshal(raw, &cp)
				if cp.LastSeq != "100" {
					t.Errorf("%s: checkpoint %s, want last_seq 100", ep.name, raw)
				}
			}
		})
	}
}

// A run that fails after a few batches (fewer than RemoteCheckpointBatches)
// still leaves the remote checkpoint at the last written batch.
func TestRemoteCheckpointWrittenOnError(t *testing.T) {
	remote, local := newMem("remote"), newMem("local")
	seedVault(remote, 50)
	calls := 0
	local.onBulkDocs = func([]json.RawMessage) error {
		if calls++; calls == 4 {
			return transportErr
		}
		return nil
	}
	r := newRep(t, replicate.Config{Local: local, Remote: remote, LocalID: "L", RemoteID: "R", BatchSize: 10, BatchesLimit: 1})
	if _, err := r.Pull(context.Background()); !replicate.IsTransport(err) {
		t.Fatalf("pull: %v, want the transport error", err)
	}
	raw, err := remote.GetLocal(context.Background(), replicate.ReplicationID("R", "L", nil))
	if err != nil {
		t.Fatal(err)
	}
	var cp struct {
		LastSeq string `json:"last_seq"`
	}
	_ = json.Unmarshal(raw, &cp)
	if cp.LastSeq != "30" || remote.putLocalCalls != 1 {
		t.Fatalf("remote checkpoint %s after %d writes, want last_seq 30 in one write", raw, remote.putLocalCalls)
	}
}

// A push that fails after a few pages leaves both sides' checkpoints at
// the last page written, and a second push sends nothing twice.
func TestPushCheckpointWrittenOnError(t *testing.T) {
	remote, local := newMem("remote"), newMem("local")
	seedVault(local, 50)
	calls := 0
	remote.onBulkDocs = func([]json.RawMessage) error {
		if calls++; calls == 4 {
			return transportErr
		}
		return nil
	}
	r := newRep(t, replicate.Config{Local: local, Remote: remote, LocalID: "L", RemoteID: "R", BatchSize: 10, BatchesLimit: 1})
	if _, err := r.Push(context.Background()); !replicate.IsTransport(err) {
		t.Fatalf("push: %v, want the transport error", err)
	}
	id := replicate.ReplicationID("L", "R", nil)
	for _, ep := range []*memEP{local, remote} {
		raw, err := ep.GetLocal(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var cp struct {
			LastSeq string `json:"last_seq"`
		}
		_ = json.Unmarshal(raw, &cp)
		if cp.LastSeq != "30" || ep.putLocalCalls != 1 {
			t.Errorf("%s: checkpoint %s after %d writes, want last_seq 30 in one write", ep.name, raw, ep.putLocalCalls)
		}
	}
	remote.onBulkDocs = nil
	before := remote.bulkDocsDocs
	if _, err := r.Push(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := remote.bulkDocsDocs - before; n != 70 {
		t.Errorf("second push wrote %d documents, want the 70 left", n)
	}
}
