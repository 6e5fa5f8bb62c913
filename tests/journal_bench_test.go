package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
	minioclient "github.com/minio/minio-go/v7"
)

// Benchmarks: receiving a journal of 10,000 notes from the local S3
// server, and fetching 1,000 random chunks by id through the pack index.
//
//	. tests/s3server/start.sh && s3server_start && \
//	  go test -run '^$' -bench Journal -benchtime 1x ./tests/; s3server_stop

// s3EnvTB is s3Server for benchmarks: the server named by the
// environment; without one it fails under CI and skips otherwise.
func s3EnvTB(tb testing.TB) s3Env {
	tb.Helper()
	e := s3Env{endpoint: os.Getenv("LIVESYNC_TEST_S3_ENDPOINT"), access: os.Getenv("LIVESYNC_TEST_S3_ACCESS_KEY"),
		secret: os.Getenv("LIVESYNC_TEST_S3_SECRET_KEY"), bucketPrefix: os.Getenv("LIVESYNC_TEST_S3_BUCKET_PREFIX"),
		region: os.Getenv("LIVESYNC_TEST_S3_REGION")}
	if e.endpoint == "" {
		if os.Getenv("CI") != "" {
			tb.Fatal("LIVESYNC_TEST_S3_ENDPOINT is not set but CI is: start tests/s3server")
		}
		tb.Skip("LIVESYNC_TEST_S3_ENDPOINT not set; start tests/s3server (see the comment above)")
	}
	if e.bucketPrefix == "" {
		e.bucketPrefix = "lsgo-test-"
	}
	e.secure = strings.HasPrefix(e.endpoint, "https://") || os.Getenv("LIVESYNC_TEST_S3_SECURE") == "1"
	if f := os.Getenv("LIVESYNC_TEST_S3_CA_FILE"); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		e.caPEM = pem
	}
	return e
}

// benchBucket creates a fresh bucket, removed with its objects when the
// benchmark ends.
func benchBucket(tb testing.TB) *minio.Bucket {
	tb.Helper()
	e := s3EnvTB(tb)
	name := newBucketName(e)
	b, err := minio.New(e.config(name, "bench-vault/"))
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	if err := b.Client().MakeBucket(ctx, name, minioclient.MakeBucketOptions{Region: e.region}); err != nil {
		tb.Fatalf("make bucket %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		c := b.Client()
		objs := c.ListObjects(ctx, name, minioclient.ListObjectsOptions{Recursive: true})
		for re := range c.RemoveObjects(ctx, name, objs, minioclient.RemoveObjectsOptions{}) {
			tb.Logf("remove %s: %v", re.ObjectName, re.Err)
		}
		if err := c.RemoveBucket(ctx, name); err != nil {
			tb.Logf("remove bucket %s: %v", name, err)
		}
	})
	return b
}

// noteWords is the vocabulary of the generated notes.
var noteWords = strings.Fields(`the a of to and in is that for it as with on was be by this are or from at
an have not but which one all were we when your can there use more been if will other how about would
meeting project idea plan note daily review journal task todo done next week today tomorrow read book
chapter summary question answer draft write code test build release deploy server client sync vault
obsidian markdown link tag folder file backup phone laptop garden recipe travel budget health habit`)

// benchNote returns the i-th generated note: Markdown of 700 to 1,400
// bytes (a title, a tag line, paragraphs, a task list), deterministic in
// i.
func benchNote(i int) (path string, data []byte) {
	r := rand.New(rand.NewPCG(uint64(i), 0x6a6f75726e616c))
	size := 700 + r.IntN(701)
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Note %d\n\ntags: #%s #%s\n\n", i, noteWords[r.IntN(len(noteWords))], noteWords[r.IntN(len(noteWords))])
	for sb.Len() < size {
		switch r.IntN(4) {
		case 0:
			fmt.Fprintf(&sb, "- [%s] %s %s %s\n", map[bool]string{true: "x", false: " "}[r.IntN(2) == 0],
				noteWords[r.IntN(len(noteWords))], noteWords[r.IntN(len(noteWords))], noteWords[r.IntN(len(noteWords))])
		default:
			n := 12 + r.IntN(30)
			for w := range n {
				if w > 0 {
					sb.WriteByte(' ')
				}
				sb.WriteString(noteWords[r.IntN(len(noteWords))])
			}
			sb.WriteString(".\n\n")
		}
	}
	return fmt.Sprintf("Journal/%03d/Note %05d.md", i/100, i), []byte(sb.String())
}

// benchJournal is a journal of notes a device sent to a fresh bucket.
type benchJournal struct {
	bucket      *minio.Bucket
	client      journalClient
	sender      store.Store       // the sending device's store (its checkpoint holds the pack index)
	chunks      map[string]string // every chunk id -> data
	docs        int
	packs       int
	objectBytes int64 // bytes of every pack object
}

// setupBenchJournal writes n generated notes into a store and sends them
// with the engine's Send, with upstream's pack limits (251 records or
// 10 MiB) and E2EE on (path obfuscation too), to a fresh bucket.
func setupBenchJournal(b *testing.B, n int) benchJournal {
	b.Helper()
	ctx := context.Background()
	bucket := benchBucket(b)
	s := livesync.Settings{Encrypt: true, PathObfuscation: true, Passphrase: "bench-passphrase"}
	cl := connectJournal(b, bucket, "bench-sender", s)
	sender, err := store.NewMemory(store.Options{Name: "sender"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sender.Close() })
	bj := benchJournal{bucket: bucket, client: cl, sender: sender, chunks: map[string]string{}, docs: n}
	for i := range n {
		path, data := benchNote(i)
		m, chunks, err := cl.codec.FileDocs(path, data, 1700000000000, 1700000000000+int64(i))
		if err != nil {
			b.Fatal(err)
		}
		if err := sender.PutChunks(ctx, chunks); err != nil {
			b.Fatal(err)
		}
		for _, c := range chunks {
			bj.chunks[c.ID] = c.Data
		}
		doc, _ := json.Marshal(m.Doc())
		if _, err := sender.Put(ctx, doc); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	res, err := newJournal(b, journalsync.Config{Local: sender, Remote: bucket, Cipher: cl.cipher, Epoch: cl.epoch}).Send(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if res.RecordsSent != n+len(bj.chunks) {
		b.Fatalf("sent %d records, want %d notes + %d chunks", res.RecordsSent, n, len(bj.chunks))
	}
	bj.packs, bj.objectBytes = res.PacksSent, res.BytesSent
	b.Logf("setup: %d notes, %d chunks (%.2f per note), %d packs, %.1f MB of objects, sent in %v",
		n, len(bj.chunks), float64(len(bj.chunks))/float64(n), bj.packs, float64(bj.objectBytes)/1e6, time.Since(start).Round(time.Millisecond))
	return bj
}

// BenchmarkJournalReceive10k: a fresh store (memory, bbolt) receives a
// journal of 10,000 notes. Reported: documents per second, object bytes
// per second (SetBytes: the pack objects downloaded by one receive), and
// requests (listings + downloads) per receive.
func BenchmarkJournalReceive10k(b *testing.B) {
	const n = 10000
	bj := setupBenchJournal(b, n)
	for _, sk := range []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"memory", func(b *testing.B) store.Store {
			st, err := store.NewMemory(store.Options{Name: "receiver"})
			if err != nil {
				b.Fatal(err)
			}
			return st
		}},
		{"bolt", func(b *testing.B) store.Store {
			st, err := boltstore.Open(filepath.Join(b.TempDir(), "vault.db"), boltstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return st
		}},
	} {
		b.Run(sk.name, func(b *testing.B) {
			ctx := context.Background()
			b.SetBytes(bj.objectBytes)
			var requests int64
			for b.Loop() {
				b.StopTimer()
				st := sk.open(b)
				counted := &countingObjects{Objects: bj.bucket}
				j := newJournal(b, journalsync.Config{Local: st, Remote: counted, Cipher: bj.client.cipher, Epoch: bj.client.epoch})
				b.StartTimer()
				res, err := j.Receive(ctx)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if res.DocsWritten != n || res.ChunksReceived != len(bj.chunks) || res.PacksReceived != bj.packs || counted.bytesGot.Load() != bj.objectBytes {
					b.Fatalf("receive: %+v, %d bytes downloaded; want %d notes, %d chunks, %d packs, %d bytes",
						res, counted.bytesGot.Load(), n, len(bj.chunks), bj.packs, bj.objectBytes)
				}
				requests += counted.lists.Load() + counted.gets.Load()
				st.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "docs/s")
			b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
		})
	}
}

// BenchmarkJournalFetch1000: 1,000 random chunks fetched by id, one at a
// time, through the chunk source of a fresh Journal over the sending
// device's store (whose checkpoint holds the pack index, so no listing is
// needed), with the default decoded-pack cache (32 MiB) and with the
// cache off. Reported: requests per chunk and chunks per second.
func BenchmarkJournalFetch1000(b *testing.B) {
	const n, fetches = 10000, 1000
	bj := setupBenchJournal(b, n)
	ids := make([]string, 0, len(bj.chunks))
	for id := range bj.chunks {
		ids = append(ids, id)
	}
	slices.Sort(ids) // reproducible whatever the map order
	r := rand.New(rand.NewPCG(1, 2))
	pick := make([]string, fetches)
	for i := range pick {
		pick[i] = ids[r.IntN(len(ids))]
	}
	for _, c := range []struct {
		name  string
		cache int64
	}{{"cache=default", 0}, {"cache=off", -1}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			var stats journalsync.Stats
			for b.Loop() {
				b.StopTimer()
				j := newJournal(b, journalsync.Config{Local: bj.sender, Remote: bj.bucket, Cipher: bj.client.cipher, Epoch: bj.client.epoch,
					DirectFetch: true, PackCacheBytes: c.cache})
				src := j.ChunkSource()
				b.StartTimer()
				for _, id := range pick {
					res, err := src.FetchChunks(ctx, []engine.ChunkID{id})
					if err != nil {
						b.Fatal(err)
					}
					if len(res.Found) != 1 || res.Found[0].Data != bj.chunks[id] {
						b.Fatalf("fetch %s: %+v", id, res)
					}
				}
				b.StopTimer()
				s := j.Stats()
				stats.Lists += s.Lists
				stats.PacksDownloaded += s.PacksDownloaded
				stats.CacheHits += s.CacheHits
				b.StartTimer()
			}
			if stats.Lists != 0 {
				b.Errorf("%d listings: the index of the sender's checkpoint was not used", stats.Lists)
			}
			chunks := float64(fetches * b.N)
			b.ReportMetric(float64(stats.Requests())/chunks, "requests/chunk")
			b.ReportMetric(chunks/b.Elapsed().Seconds(), "chunks/s")
			b.ReportMetric(float64(stats.CacheHits)/chunks, "cachehits/chunk")
		})
	}
}
