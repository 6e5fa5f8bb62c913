package tests

import (
	"errors"
	"maps"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/activity"
	"github.com/livesync-go/livesync-go/engine/fetch"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// sentVault is a journal device 1 sent to a fresh bucket: the E2EE vault
// of the vectors' inputs.
type sentVault struct {
	bucket   *minio.Bucket
	settings livesync.Settings
	inputs   map[string][]byte
	metas    map[string]livesync.Meta // device 1's metadata by path
	device1  journalClient
	store1   store.Store
	packs    []string
}

// sendVault handshakes as device 1 on a fresh bucket, writes the E2EE
// vault's input files into a memory store and sends them with a Journal
// configured by cfg (Local, Remote, Cipher and Epoch are set here).
func sendVault(t *testing.T, cfg journalsync.Config) sentVault {
	t.Helper()
	s, inputs := vectorSettings(t, "e2ee")
	b, _ := freshBucket(t)
	v := sentVault{bucket: b, settings: s, inputs: inputs, device1: connectJournal(t, b, "device-1", s), store1: newMemoryStore(t)}
	v.metas = writeFiles(t, v.store1, v.device1.codec, inputs)
	cfg.Local, cfg.Remote, cfg.Cipher, cfg.Epoch = v.store1, b, v.device1.cipher, v.device1.epoch
	if res, err := newJournal(t, cfg).Send(ctxT(t)); err != nil || res.PacksSent == 0 {
		t.Fatalf("device 1 send: %+v, %v", res, err)
	}
	v.packs = packKeys(t, b)
	return v
}

// chunkIDs returns the distinct chunk ids of metas, sorted.
func chunkIDs(metas map[string]livesync.Meta) []string {
	seen := map[string]bool{}
	for _, m := range metas {
		for _, id := range m.Children {
			seen[id] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// retrieval is engine/fetch's read path over one chunk source: a
// Fetcher and the arrival wait layer sharing a claims coordinator and an
// activity tracker.
type retrieval struct {
	act    *activity.Tracker
	f      *fetch.Fetcher
	layer  *fetch.Layer
	claims *fetch.Coordinator
}

func newRetrieval(t *testing.T, act *activity.Tracker, src engine.ChunkSource, local engine.LocalChunks) retrieval {
	t.Helper()
	r := retrieval{act: act, claims: fetch.NewCoordinator()}
	var err error
	if r.f, err = fetch.New(fetch.Config{}, fetch.Deps{Source: src, Local: local, Activity: act, Claims: r.claims}); err != nil {
		t.Fatal(err)
	}
	if r.layer, err = fetch.NewLayer(fetch.LayerConfig{}, fetch.LayerDeps{Local: local, Activity: act, Claims: r.claims, Fetcher: r.f}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.layer.Close(); r.f.Close(); r.claims.Close() })
	return r
}

// TestJournalDirectFetch (on the real server): a device
// whose store holds nothing of the journal reads every file of it on
// demand through engine/fetch, with the journal's chunk source as the
// remote and DirectFetch on. The index is built on demand (one listing,
// each pack downloaded once, nothing applied to the store), the fetched
// chunks are persisted, and an id no pack holds ends as remote-missing.
// With DirectFetch off the policy matrix is upstream's for a sequential
// replicator: no dispatch, reads end at once without waiting, and the
// journal sees no request.
func TestJournalDirectFetch(t *testing.T) {
	v := sendVault(t, journalsync.Config{})
	ctx := ctxT(t)
	all := chunkIDs(v.metas)

	t.Run("on", func(t *testing.T) {
		d2 := connectJournal(t, v.bucket, "device-2", v.settings)
		st := newMemoryStore(t)
		counted := &countingObjects{Objects: v.bucket}
		j := newJournal(t, journalsync.Config{Local: st, Remote: counted, Cipher: d2.cipher, Epoch: d2.epoch, DirectFetch: true})
		if !j.ChunkSource().CanFetchDirect() || j.ChunkSource().ThrottleKey() != v.bucket.ID() {
			t.Fatalf("chunk source: direct %v, throttle key %q", j.ChunkSource().CanFetchDirect(), j.ChunkSource().ThrottleKey())
		}
		if p := fetch.PolicyFor(j.ChunkSource().CanFetchDirect(), false); p != (fetch.Policy{Dispatch: true, Wait: true}) {
			t.Fatalf("policy with DirectFetch: %+v", p)
		}
		act := activity.New(nil)
		defer act.Close()
		r := newRetrieval(t, act, j.ChunkSource(), st)

		// Every file is opened at once, as a vault scan does.
		var mu sync.Mutex
		got := map[string][]byte{}
		var wg sync.WaitGroup
		for path, m := range v.metas {
			wg.Go(func() {
				data, err := readThroughLayer(ctx, r.layer, m)
				if err != nil {
					t.Errorf("%s: %v", path, err)
					return
				}
				mu.Lock()
				got[path] = data
				mu.Unlock()
			})
		}
		wg.Wait()
		sameFiles(t, got, v.inputs)

		js, fs := j.Stats(), r.f.Stats()
		t.Logf("%d chunks in %d packs: journal %+v, %d bucket requests; fetcher %d requests", len(all), len(v.packs), js, counted.lists.Load()+counted.gets.Load(), fs.Requests)
		if js.Lists != 1 || js.PacksDownloaded != int64(len(v.packs)) || js.ChunksFound != int64(len(all)) || js.ChunksMissing != 0 {
			t.Errorf("journal stats %+v; want 1 listing, each of the %d packs downloaded once, %d chunks found", js, len(v.packs), len(all))
		}
		if counted.lists.Load() != js.Lists || counted.gets.Load() != js.PacksDownloaded || counted.puts.Load() != 0 {
			t.Errorf("bucket saw %d lists, %d gets, %d puts; the journal counted %+v", counted.lists.Load(), counted.gets.Load(), counted.puts.Load(), js)
		}
		if fs.Delivered != uint64(len(all)) {
			t.Errorf("fetcher delivered %d chunks, want %d", fs.Delivered, len(all))
		}
		if local, err := st.GetChunks(ctx, all); err != nil || len(local) != len(all) {
			t.Errorf("after reading, %d of %d chunks are local (%v)", len(local), len(all), err)
		}
		if metas := localFileMetas(t, st); len(metas) != 0 {
			t.Errorf("direct fetch applied %d metadata documents to the store; it must apply none", len(metas))
		}

		// An id no pack holds: listed again, answered missing, and after
		// the retry step a current final probe ends it.
		res, err := r.layer.Get(ctx, []string{"h:notinthejournal"}, fetch.ReadOptions{})
		if err != nil || res[0].OK || !errors.Is(res[0].Err, fetch.ErrRemoteMissing) {
			t.Fatalf("unknown id: %+v, %v; want ErrRemoteMissing", res, err)
		}
	})

	t.Run("off", func(t *testing.T) {
		d3 := connectJournal(t, v.bucket, "device-3", v.settings)
		st := newMemoryStore(t)
		counted := &countingObjects{Objects: v.bucket}
		j := newJournal(t, journalsync.Config{Local: st, Remote: counted, Cipher: d3.cipher, Epoch: d3.epoch})
		src := j.ChunkSource()
		if src.CanFetchDirect() {
			t.Fatal("DirectFetch is off by default, but the chunk source can fetch direct")
		}
		// Upstream's matrix for a remote without fetch by id
		// (computeChunkRetrievalMethod): no dispatch; wait only when the
		// call site asks for it.
		for _, c := range []struct {
			waitForReady bool
			want         fetch.Policy
		}{{false, fetch.Policy{}}, {true, fetch.Policy{Wait: true}}} {
			if p := fetch.PolicyFor(src.CanFetchDirect(), c.waitForReady); p != c.want {
				t.Errorf("PolicyFor(journal, waitForReady=%v) = %+v, want %+v", c.waitForReady, p, c.want)
			}
		}
		act := activity.New(nil)
		defer act.Close()
		r := newRetrieval(t, act, src, st)
		for _, c := range []struct {
			opts fetch.ReadOptions
			want error
		}{{fetch.ReadOptions{}, fetch.ErrLocalOnly}, {fetch.ReadOptions{WaitForReady: true}, fetch.ErrNoProducer}} {
			res, err := r.layer.Get(ctx, all, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			for i, rr := range res {
				if rr.OK || !errors.Is(rr.Err, c.want) {
					t.Fatalf("read %s with %+v: %+v; want %v", all[i], c.opts, rr, c.want)
				}
			}
		}
		if n := counted.lists.Load() + counted.gets.Load(); n != 0 || j.Stats().Requests() != 0 || r.f.Stats().Requests != 0 {
			t.Errorf("with DirectFetch off the journal made %d bucket requests (stats %+v, fetcher %d)", n, j.Stats(), r.f.Stats().Requests)
		}
	})
}

// arrivalLog records the chunk ids a journal reports as arrived.
type arrivalLog struct {
	mu  sync.Mutex
	ids []string
}

func (a *arrivalLog) ChunksArrived(ids []engine.ChunkID) {
	a.mu.Lock()
	a.ids = append(a.ids, ids...)
	a.mu.Unlock()
}

// TestJournalActivity (sending and receiving are finite replications):
// with an activity.Tracker, every pack a Receive applies
// is applied inside one finite replication (the tracker's state read
// from the Progress callback), the tracker is quiescent again when it
// returns, and a read that waits for a chunk of a later pack is answered
// by the Receive, without a direct fetch. Send runs bounded but not
// finite (it delivers nothing locally); Sync is one finite run around
// both.
func TestJournalActivity(t *testing.T) {
	v := sendVault(t, journalsync.Config{MaxPackRecords: 60})
	if len(v.packs) < 4 {
		t.Fatalf("device 1 sent %d packs, want several", len(v.packs))
	}
	ctx := ctxT(t)
	d2 := connectJournal(t, v.bucket, "device-2", v.settings)
	st := newMemoryStore(t)
	act := activity.New(nil)
	defer act.Close()

	// A chunk of the last pack: it reaches the store only at the end.
	last, err := v.bucket.GetPack(ctx, v.packs[len(v.packs)-1], d2.cipher)
	if err != nil {
		t.Fatal(err)
	}
	target := ""
	for _, rec := range last {
		if rec.IsChunk() {
			target = rec.ID
			break
		}
	}
	if target == "" {
		t.Fatal("the last pack holds no chunk")
	}

	var (
		states []activity.State
		r      retrieval
		read   = make(chan fetch.Result, 1)
	)
	arrived := &arrivalLog{}
	j := newJournal(t, journalsync.Config{Local: st, Remote: v.bucket, Cipher: d2.cipher, Epoch: d2.epoch, Activity: act, Arrivals: arrived,
		Progress: func(p journalsync.Progress) {
			states = append(states, act.State())
			if p.Direction != journalsync.Receiving || p.Packs != 1 {
				return
			}
			// After the first pack: a reader opens a file whose chunk is
			// in the last pack, and waits for it.
			go func() {
				res, err := r.layer.Get(ctx, []string{target}, fetch.ReadOptions{WaitForReady: true})
				if err != nil {
					res = []fetch.Result{{Err: err}}
				}
				read <- res[0]
			}()
			for r.layer.Waiting() == 0 && ctx.Err() == nil && len(read) == 0 {
				runtime.Gosched()
			}
		}})
	r = newRetrieval(t, act, j.ChunkSource(), st)

	// Before the receive nothing can deliver it.
	if res, err := r.layer.Get(ctx, []string{target}, fetch.ReadOptions{WaitForReady: true}); err != nil || !errors.Is(res[0].Err, fetch.ErrNoProducer) {
		t.Fatalf("read before the receive: %+v, %v; want ErrNoProducer", res, err)
	}

	res, err := j.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.PacksReceived != len(v.packs) || len(states) != len(v.packs) {
		t.Fatalf("receive: %+v, %d progress reports; want %d packs", res, len(states), len(v.packs))
	}
	for i, s := range states {
		if s.Finite != 1 || s.Bounded != 1 || s.FiniteStarts != 1 {
			t.Errorf("pack %d applied with activity %+v; want inside one finite replication", i+1, s)
		}
	}
	if s := act.State(); s != (activity.State{FiniteStarts: 1}) {
		t.Errorf("after the receive activity is %+v, want quiescent", s)
	}
	select {
	case got := <-read:
		if !got.OK || got.Chunk.ID != target {
			t.Fatalf("the waiting read got %+v; want the chunk the receive delivered", got)
		}
	case <-ctx.Done():
		t.Fatal("the waiting read was not answered when the receive ended")
	}
	if r.f.Stats().Requests != 0 || j.Stats().Requests() != 0 {
		t.Errorf("the read was served by a direct fetch (fetcher %d requests, journal %+v)", r.f.Stats().Requests, j.Stats())
	}
	arrived.mu.Lock()
	if len(arrived.ids) != res.ChunksReceived || !slices.Contains(arrived.ids, target) {
		t.Errorf("Arrivals told of %d chunks, receive got %d", len(arrived.ids), res.ChunksReceived)
	}
	arrived.mu.Unlock()
	sameFiles(t, readLocalFiles(t, st), v.inputs)

	// Send: bounded, not finite.
	editFile(t, st, d2.codec, "tiny.md", []byte("edited while sending\n"))
	states = nil
	if res, err := j.Send(ctx); err != nil || res.PacksSent != 1 || len(states) != 1 {
		t.Fatalf("send: %+v, %v, %d progress reports", res, err, len(states))
	}
	if s := states[0]; s.Finite != 0 || s.Bounded != 1 || s.FiniteStarts != 1 {
		t.Errorf("send ran with activity %+v; want bounded only", s)
	}

	// Sync: receive and send inside one finite run.
	editFile(t, st, d2.codec, "empty.md", []byte("no longer empty\n"))
	states = nil
	res, err = j.Sync(ctx)
	if err != nil || res.PacksSent != 1 || len(states) != 1 {
		t.Fatalf("sync: %+v, %v, %d progress reports", res, err, len(states))
	}
	if s := states[0]; s.Finite != 1 || s.FiniteStarts != 2 {
		t.Errorf("sync sent with activity %+v; want inside its finite run", s)
	}
	if s := act.State(); s != (activity.State{FiniteStarts: 2}) {
		t.Errorf("after the sync activity is %+v", s)
	}
}
