package journalsync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/activity"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/fetch"
	"github.com/livesync-go/livesync-go/engine/journal"
)

// chunkBucket fills a bucket with n packs of per chunks each (chunk ids
// "h:p<pack>c<i>") and returns the ids per pack.
func chunkBucket(t testing.TB, bucket *enginetest.MemObjects, from, n, per int, c journal.Cipher) [][]string {
	t.Helper()
	var out [][]string
	for p := from; p < from+n; p++ {
		var recs []journal.Record
		var ids []string
		for i := range per {
			id := fmt.Sprintf("h:p%03dc%03d", p, i)
			recs = append(recs, journal.Record{ID: id, ChunkData: "data of " + id})
			ids = append(ids, id)
		}
		obj, err := journal.Seal(recs, c)
		if err != nil {
			t.Fatal(err)
		}
		bucket.Set(journal.PackKey(bucket.Prefix(), t0+int64(p)*1000), obj)
		out = append(out, ids)
	}
	return out
}

// checkPartition checks the ChunkSource contract: every requested id
// exactly once, in Found (with its data) or in Missing.
func checkPartition(t *testing.T, ids []string, res engine.FetchResult, wantMissing []string) {
	t.Helper()
	seen := map[string]int{}
	for _, c := range res.Found {
		seen[c.ID]++
		if c.Data != "data of "+c.ID {
			t.Errorf("%s: data %q", c.ID, c.Data)
		}
	}
	for _, id := range res.Missing {
		seen[id]++
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("%s answered %d times", id, seen[id])
		}
	}
	if len(seen) != len(ids) {
		t.Errorf("%d ids answered, %d asked", len(seen), len(ids))
	}
	got := slices.Clone(res.Missing)
	slices.Sort(got)
	want := slices.Clone(wantMissing)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("missing %v, want %v", got, want)
	}
}

// TestChunkSourceOnDemand: ids the index does not know make the source
// list the bucket after the newest indexed pack, download and index the
// new packs (not applying them), then answer; unknown ids are Missing;
// decoded packs are served from the cache; the index persists.
func TestChunkSourceOnDemand(t *testing.T) {
	ctx := t.Context()
	bucket := newMemObjects("c/")
	packs := chunkBucket(t, bucket, 0, 4, 5, nil)
	st := newStore(t)
	j := newJournal(t, Config{Local: st, Remote: bucket, DirectFetch: true})
	src := j.ChunkSource()

	ids := []string{packs[0][1], packs[2][3], packs[2][0], "h:nope"}
	res, err := src.FetchChunks(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	checkPartition(t, ids, res, []string{"h:nope"})
	if s := j.Stats(); s.Lists != 1 || s.PacksDownloaded != 4 || s.CacheHits != 0 || s.ChunksFound != 3 || s.ChunksMissing != 1 {
		t.Fatalf("stats %+v", s)
	}
	if got, _ := st.GetChunks(ctx, ids); len(got) != 0 {
		t.Fatal("indexing applied chunks to the store")
	}

	// Another pack: no request (cache); unknown again: one listing, no
	// download.
	ids = []string{packs[3][4], packs[1][0]}
	res, err = src.FetchChunks(ctx, ids)
	checkPartition(t, ids, res, nil)
	if s := j.Stats(); err != nil || s.Requests() != 5 || s.CacheHits != 2 {
		t.Fatalf("stats %+v %v", s, err)
	}
	res, err = src.FetchChunks(ctx, []string{"h:nope"})
	checkPartition(t, []string{"h:nope"}, res, []string{"h:nope"})
	if s := j.Stats(); err != nil || s.Lists != 2 || s.PacksDownloaded != 4 {
		t.Fatalf("stats %+v %v", s, err)
	}

	// A new pack appears: only it is downloaded.
	more := chunkBucket(t, bucket, 4, 1, 5, nil)
	ids = []string{more[0][2], packs[0][0]}
	res, err = src.FetchChunks(ctx, ids)
	checkPartition(t, ids, res, nil)
	if s := j.Stats(); err != nil || s.Lists != 3 || s.PacksDownloaded != 5 || bucket.Gets(journal.PackKey("c/", t0+4000)) != 1 {
		t.Fatalf("stats %+v %v", s, err)
	}

	// The index is in the checkpoint: a new Journal on the same store
	// downloads only the pack it needs, without listing.
	j2 := newJournal(t, Config{Local: st, Remote: bucket, DirectFetch: true})
	ids = []string{packs[1][1]}
	res, err = j2.ChunkSource().FetchChunks(ctx, ids)
	checkPartition(t, ids, res, nil)
	if s := j2.Stats(); err != nil || s.Lists != 0 || s.PacksDownloaded != 1 {
		t.Fatalf("stats %+v %v", s, err)
	}
	// Receive still applies the packs indexed on demand.
	if r, err := j2.Receive(ctx); err != nil || r.PacksReceived != 5 || r.ChunksReceived != 25 {
		t.Fatalf("receive: %+v %v", r, err)
	}
}

// TestChunkSourceIndexFromSync: packs received and packs sent are
// indexed as they pass; fetching from them needs no listing.
func TestChunkSourceIndexFromSync(t *testing.T) {
	ctx := t.Context()
	bucket := newMemObjects("")
	packs := chunkBucket(t, bucket, 0, 3, 4, nil)
	st := newStore(t)
	m := putFile(t, st, "mine.md", "a note of mine")
	j := newJournal(t, Config{Local: st, Remote: bucket, Now: stepClock(t0 + 10_000)})
	if _, err := j.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	ids := []string{packs[1][2], m.Children[0]}
	res, err := j.ChunkSource().FetchChunks(ctx, ids)
	if err != nil || len(res.Found) != 2 || len(res.Missing) != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if s := j.Stats(); s.Lists != 0 || s.PacksDownloaded != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// TestChunkSourceCache: the decoded-pack cache is an LRU bounded by
// bytes; a cache too small for a pack makes every fetch download.
func TestChunkSourceCache(t *testing.T) {
	ctx := t.Context()
	bucket := newMemObjects("")
	packs := chunkBucket(t, bucket, 0, 2, 3, nil)
	for _, tc := range []struct {
		bytes     int64
		downloads int64
	}{{0, 2}, {-1, 7}, {10, 7}} {
		j := newJournal(t, Config{Local: newStore(t), Remote: bucket, PackCacheBytes: tc.bytes})
		for range 3 {
			for _, p := range packs {
				if _, err := j.ChunkSource().FetchChunks(ctx, []string{p[0]}); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The first fetch indexes both packs by listing (2 downloads) and
		// answers from what it downloaded; without a cache every later
		// fetch downloads its pack.
		if s := j.Stats(); s.PacksDownloaded != tc.downloads {
			t.Errorf("cache %d: %+v", tc.bytes, s)
		}
	}

	c := newPackCache(100)
	c.put("a", nil, 40)
	c.put("b", nil, 40)
	c.get("a")
	c.put("c", nil, 40) // evicts b, the least recently used
	_, a := c.get("a")
	_, b := c.get("b")
	_, cc := c.get("c")
	c.put("d", nil, 101) // too big: not cached, nothing evicted
	_, d := c.get("d")
	if !a || b || !cc || d || c.size != 80 {
		t.Fatalf("a %v b %v c %v d %v size %d", a, b, cc, d, c.size)
	}
}

// TestChunkSourceErrors: transport and authentication failures are
// errors; a pack that is gone or does not open makes its ids Missing.
func TestChunkSourceErrors(t *testing.T) {
	ctx := t.Context()
	bucket := newMemObjects("")
	packs := chunkBucket(t, bucket, 0, 3, 2, nil)
	keys := bucket.PackKeys()
	st := newStore(t)
	if _, err := newJournal(t, Config{Local: st, Remote: bucket}).Receive(ctx); err != nil {
		t.Fatal(err)
	}
	j := newJournal(t, Config{Local: st, Remote: bucket, PackCacheBytes: -1})
	src := j.ChunkSource()

	bucket.FailGet(keys[0], transportErr(keys[0]))
	if _, err := src.FetchChunks(ctx, []string{packs[0][0]}); !IsTransportErr(err) {
		t.Fatalf("transport: %v", err)
	}
	bucket.FailGet(keys[0], nil)
	bucket.Set(keys[1], []byte("garbage"))
	bucket.Remove(keys[2])
	ids := []string{packs[0][0], packs[1][0], packs[2][1]}
	res, err := src.FetchChunks(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	checkPartition(t, ids, res, []string{packs[1][0], packs[2][1]})
	// Unreadable packs are not downloaded again.
	if _, err := src.FetchChunks(ctx, ids); err != nil || bucket.Gets(keys[1]) != 2 || bucket.Gets(keys[2]) != 2 { // one each by Receive
		t.Fatalf("%v: downloads %d %d", err, bucket.Gets(keys[1]), bucket.Gets(keys[2]))
	}
	bucket.FailList(func(int) error {
		return &engine.Error{Op: "list", Stage: engine.StageAuth, Err: errors.New("fake: 403")}
	})
	if _, err := src.FetchChunks(ctx, []string{"h:unknown"}); stageOf(err) != engine.StageAuth {
		t.Fatalf("auth: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := src.FetchChunks(cctx, []string{packs[0][1]}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestChunkSourceConcurrent: concurrent fetches share one listing and
// one download per pack. synctest.Wait makes sure every fetch is in
// flight before the bucket answers.
func TestChunkSourceConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		bucket := newMemObjects("")
		packs := chunkBucket(t, bucket, 0, 4, 10, nil)
		st := newStore(t)
		fetchAll := func(j *Journal) {
			release := make(chan struct{})
			bucket.OnGet(func(string) { <-release })
			var wg sync.WaitGroup
			errs := make(chan error, 40)
			for i := range 40 {
				wg.Go(func() {
					ids := []string{packs[i%4][i%10], packs[(i+1)%4][(i+3)%10]}
					res, err := j.ChunkSource().FetchChunks(ctx, ids)
					if err == nil && len(res.Found) != 2 {
						err = fmt.Errorf("found %d", len(res.Found))
					}
					errs <- err
				})
			}
			synctest.Wait() // all 40 are waiting for the first answer
			close(release)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		// Nothing indexed: one listing indexes every pack.
		j := newJournal(t, Config{Local: st, Remote: bucket, DirectFetch: true})
		fetchAll(j)
		if s := j.Stats(); s.Lists != 1 || s.PacksDownloaded != 4 || s.ChunksFound != 80 {
			t.Fatalf("stats %+v", s)
		}
		// Indexed, nothing cached: one download per pack.
		j = newJournal(t, Config{Local: st, Remote: bucket, DirectFetch: true})
		fetchAll(j)
		if s := j.Stats(); s.Lists != 0 || s.PacksDownloaded != 4 || s.ChunksFound != 80 {
			t.Fatalf("stats %+v", s)
		}
	})
}

// TestChunkSourcePolicy: with Config.DirectFetch off (the default) the
// journal is upstream's sequential replicator, and engine/fetch's policy
// matrix gives the MinIO rows: no direct fetch, waiting only with
// waitForReady; a read never reaches the bucket. With the flag on it is
// fetched from by id like CouchDB.
func TestChunkSourcePolicy(t *testing.T) {
	bucket := newMemObjects("p/")
	packs := chunkBucket(t, bucket, 0, 1, 3, nil)
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("DirectFetch=%v", direct), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				st := newStore(t)
				j := newJournal(t, Config{Local: st, Remote: bucket, DirectFetch: direct})
				src := j.ChunkSource()
				if src.CanFetchDirect() != direct || src.ThrottleKey() != bucket.ID() {
					t.Fatalf("CanFetchDirect %v ThrottleKey %q", src.CanFetchDirect(), src.ThrottleKey())
				}
				for _, wfr := range []bool{false, true} {
					want := fetch.Policy{Dispatch: direct, Wait: direct || wfr}
					if got := fetch.PolicyFor(src.CanFetchDirect(), wfr); got != want {
						t.Errorf("waitForReady %v: %+v, want %+v", wfr, got, want)
					}
				}

				act := activity.New(nil)
				claims := fetch.NewCoordinator()
				f, err := fetch.New(fetch.Config{}, fetch.Deps{Source: src, Local: st, Activity: act, Claims: claims})
				if err != nil {
					t.Fatal(err)
				}
				layer, err := fetch.NewLayer(fetch.LayerConfig{}, fetch.LayerDeps{Local: st, Activity: act, Claims: claims, Fetcher: f})
				if err != nil {
					t.Fatal(err)
				}
				defer func() { layer.Close(); f.Close(); claims.Close(); act.Close() }()
				res, err := layer.Get(ctx, []string{packs[0][1]}, fetch.ReadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case direct && (!res[0].OK || res[0].Chunk.Data != "data of "+packs[0][1]):
					t.Fatalf("direct: %+v", res[0])
				case !direct && !errors.Is(res[0].Err, fetch.ErrLocalOnly):
					t.Fatalf("sequential: %+v", res[0])
				}
				if n := j.Stats().Requests(); (n > 0) != direct {
					t.Fatalf("%d requests to the bucket", n)
				}
			})
		})
	}
}
