package journalsync

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/store"
)

const (
	benchDocs     = 10_000
	benchDocBytes = 1024
)

// benchNote is the 1 KiB text of note i: random words whose letters
// follow a skewed distribution, so packs compress about as prose does
// (1.8:1), neither as repeated bytes nor as random data.
func benchNote(i int) string {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	b := make([]byte, 0, benchDocBytes+16)
	for len(b) < benchDocBytes {
		for range 2 + r.IntN(8) {
			b = append(b, "etaoinshrdlucmfwypvbgkjqxz"[min(r.IntN(26), r.IntN(26))])
		}
		b = append(b, ' ')
	}
	return string(b[:benchDocBytes])
}

type benchJournal struct {
	bucket *enginetest.MemObjects
	chunks []string // every chunk id
}

// benchBucket holds 10,000 notes of 1 KiB, one chunk each, packed as
// upstream sends them (each note's chunk, then its metadata; packs of
// 251 records): 80 packs.
var benchBucket = sync.OnceValue(func() benchJournal {
	bucket := newMemObjects("bench/")
	var recs []journal.Record
	var ids []string
	n := 0
	flush := func() {
		obj, err := journal.Seal(recs, nil)
		if err != nil {
			panic(err)
		}
		bucket.Set(journal.PackKey("bench/", t0+int64(n)), obj)
		n++
		recs = recs[:0]
	}
	for i := range benchDocs {
		id := fmt.Sprintf("h:bench%05d", i)
		path := fmt.Sprintf("notes/%05d.md", i)
		ids = append(ids, id)
		recs = append(recs, journal.Record{ID: id, ChunkData: benchNote(i)})
		if len(recs) > DefaultMaxPackRecords {
			flush()
		}
		doc := fmt.Sprintf(`{"children":[%q],"path":%q,"ctime":1700000000000,"mtime":1700000060000,"size":%d,"type":"plain","eden":{},"_id":%q,"_rev":"1-%032x","_revisions":{"start":1,"ids":["%032x"]}}`,
			id, path, benchDocBytes, path, i, i)
		recs = append(recs, journal.Record{ID: path, Doc: []byte(doc)})
		if len(recs) > DefaultMaxPackRecords {
			flush()
		}
	}
	if len(recs) > 0 {
		flush()
	}
	return benchJournal{bucket: bucket, chunks: ids}
})

// countingStore counts the bytes written to _local documents (the
// checkpoint).
type countingStore struct {
	store.Store
	localBytes atomic.Int64
}

func (c *countingStore) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	c.localBytes.Add(int64(len(doc)))
	return c.Store.PutLocal(ctx, id, doc)
}

// BenchmarkReceive: a fresh store receives 10,000 notes of 1 KiB (one
// chunk each) from 80 upstream-sized packs, checkpointing after every
// pack. Bytes are note bytes; checkpoint-bytes/op is what the
// checkpoint saves wrote in all.
func BenchmarkReceive(b *testing.B) {
	bj := benchBucket()
	ctx := context.Background()
	b.SetBytes(benchDocs * benchDocBytes)
	b.ReportAllocs()
	var written int64
	for b.Loop() {
		st := &countingStore{Store: newStore(b)}
		j := newJournal(b, Config{Local: st, Remote: bj.bucket})
		res, err := j.Receive(ctx)
		if err != nil || res.DocsWritten != benchDocs || res.PacksReceived != 80 {
			b.Fatalf("%+v %v", res, err)
		}
		written += st.localBytes.Load()
		st.Close()
	}
	b.ReportMetric(float64(benchDocs*b.N)/b.Elapsed().Seconds(), "docs/s")
	b.ReportMetric(float64(written)/float64(b.N), "checkpoint-bytes/op")
}

// BenchmarkSend: 10,000 notes of 1 KiB are packed and uploaded from a
// store (80 packs).
func BenchmarkSend(b *testing.B) {
	bj := benchBucket()
	ctx := context.Background()
	src := newStore(b)
	if _, err := newJournal(b, Config{Local: src, Remote: bj.bucket}).Receive(ctx); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchDocs * benchDocBytes)
	for b.Loop() {
		// A fresh checkpoint under another journal id: everything is new.
		out := newMemObjects(fmt.Sprintf("out%d/", b.N))
		j := newJournal(b, Config{Local: src, Remote: out})
		res, err := j.Send(ctx)
		if err != nil || res.PacksSent != 80 {
			b.Fatalf("%+v %v", res, err)
		}
		b.StopTimer()
		if err := src.PutLocal(ctx, j.CheckpointID(), []byte(`{"version":1}`)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(benchDocs*b.N)/b.Elapsed().Seconds(), "docs/s")
}

// BenchmarkCheckpointSave: one checkpoint save after a pack of 251
// records was received into a journal of 10,000 notes (20,000 known
// keys, 80 packs in the index), to a memory store. saved-bytes/op is
// what the save wrote (a segment and the head; now and then a new base),
// stored-bytes the size of the whole checkpoint.
func BenchmarkCheckpointSave(b *testing.B) {
	bj := benchBucket()
	ctx := context.Background()
	st := &countingStore{Store: newStore(b)}
	j := newJournal(b, Config{Local: st, Remote: bj.bucket})
	if _, err := j.Receive(ctx); err != nil {
		b.Fatal(err)
	}
	j.mu.Lock()
	stored := len(encodeSegment(j.st, offsets{}))
	j.mu.Unlock()
	st.localBytes.Store(0)
	n := 0
	for b.Loop() {
		j.mu.Lock()
		name := fmt.Sprintf("%d-docs.jsonl.gz", t0+1_000_000+int64(n))
		ids := make([]string, 125)
		for i := range ids {
			ids[i] = fmt.Sprintf("h:new%08d", n*125+i)
			j.st.knownIDs.add(ids[i])
			j.st.knownIDs.add(fmt.Sprintf("notes/new%08d.md-1-%032x", n*125+i, i))
		}
		j.st.addIndex(name, ids)
		j.st.addReceived(name)
		j.mu.Unlock()
		n++
		if err := j.save(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.localBytes.Load())/float64(n), "saved-bytes/op")
	b.ReportMetric(float64(stored), "stored-bytes")
}

// BenchmarkFetchRandom: 1,000 random chunks of the 10,000-note journal
// fetched through the pack index (built by a Receive) by a cold journal,
// one id per request or 100 per request, with the default 32 MiB cache
// or a 1 MiB one. requests/chunk is bucket requests per chunk served.
func BenchmarkFetchRandom(b *testing.B) {
	bj := benchBucket()
	ctx := context.Background()
	st := newStore(b)
	if _, err := newJournal(b, Config{Local: st, Remote: bj.bucket}).Receive(ctx); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		cache int64
		batch int
	}{
		{"cache32MiB/batch1", 0, 1},
		{"cache32MiB/batch100", 0, 100},
		{"cache1MiB/batch1", 1 << 20, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			var requests, served int64
			for b.Loop() {
				j := newJournal(b, Config{Local: st, Remote: bj.bucket, DirectFetch: true, PackCacheBytes: bc.cache})
				src := j.ChunkSource()
				ids := make([]engine.ChunkID, 0, bc.batch)
				for i := range 1000 {
					ids = append(ids, bj.chunks[r.IntN(len(bj.chunks))])
					if len(ids) < bc.batch && i < 999 {
						continue
					}
					res, err := src.FetchChunks(ctx, uniq(ids))
					if err != nil || len(res.Missing) != 0 {
						b.Fatalf("%d missing, %v", len(res.Missing), err)
					}
					ids = ids[:0]
				}
				s := j.Stats()
				requests += s.Requests()
				served += s.ChunksFound
			}
			b.ReportMetric(float64(requests)/float64(served), "requests/chunk")
			b.ReportMetric(float64(served)/b.Elapsed().Seconds(), "chunks/s")
		})
	}
}

func uniq(ids []engine.ChunkID) []engine.ChunkID {
	seen := make(map[engine.ChunkID]bool, len(ids))
	out := ids[:0:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
