package store_test

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// The benchmarks of this file measure the store's per-document work on
// LiveSync documents of about 1 KiB, in memory (no fsync), as a pull
// writes them (BulkDocs new_edits=false, in the form a server's _bulk_get
// returns them) and as a server reads them back for a pull (GetRevs with
// history, BulkGet, the changes feed). Kinds: "chunk" (plaintext chunk),
// "chunk-e2ee" (encrypted chunk: "%=…" data and e_), "meta" (a note's
// metadata) and "meta-e2ee" (obfuscated id and encrypted path).

const benchN = 2000

func benchRev(kind string, i int) (string, string) {
	sum := md5.Sum(fmt.Appendf(nil, "%s/%d", kind, i))
	h := hex.EncodeToString(sum[:])
	return "1-" + h, h
}

// benchDoc returns document i of kind as a server serves it.
func benchDoc(kind string, i int) json.RawMessage {
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	rev, h := benchRev(kind, i)
	head := func(id string) string {
		return fmt.Sprintf(`{"_id":%q,"_rev":%q,"_revisions":{"start":1,"ids":[%q]},`, id, rev, h)
	}
	words := []string{"the", "vault", "note", "LiveSync", "\"quoted\"", "tab\there", "ユニコード", "- [ ] task", "# Heading", "link:"}
	text := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(8) == 0 {
				b.WriteString("\n")
			} else {
				b.WriteString(" ")
			}
		}
		return b.String()
	}
	children := func(prefix string) string {
		ids := make([]string, 12)
		for k := range ids {
			ids[k] = fmt.Sprintf("%q", fmt.Sprintf("h:%s%013x", prefix, rng.Uint64()>>12))
		}
		return "[" + strings.Join(ids, ",") + "]"
	}
	enc := func(n int) string {
		b := make([]byte, n)
		for k := range b {
			b[k] = byte(rng.Uint32())
		}
		return "%=" + base64.StdEncoding.EncodeToString(b)
	}
	var doc string
	switch kind {
	case "chunk":
		data, _ := json.Marshal(text(1000))
		doc = head(fmt.Sprintf("h:%013x", rng.Uint64()>>12)) + `"data":` + string(data) + `,"type":"leaf"}`
	case "chunk-e2ee":
		doc = head(fmt.Sprintf("h:+%013x", rng.Uint64()>>12)) + `"data":"` + enc(760) + `","e_":true,"type":"leaf"}`
	case "meta":
		path := fmt.Sprintf("notes/folder %d/note %d.md", i%37, i)
		doc = head(path) + fmt.Sprintf(`"children":%s,"ctime":1700000000000,"deleted":false,"eden":{},"mtime":%d,"path":%q,"size":%d,"type":"plain"}`,
			children(""), 1700000000000+i, path, 12000+i)
	case "meta-e2ee":
		doc = head(fmt.Sprintf("f:%x", md5.Sum(fmt.Appendf(nil, "%d", i)))) + fmt.Sprintf(`"children":%s,"ctime":0,"eden":{},"mtime":0,"path":"/\\:%s","size":0,"type":"plain"}`,
			children("+"), enc(300))
	}
	if !json.Valid([]byte(doc)) {
		panic(doc)
	}
	return json.RawMessage(doc)
}

var benchKinds = []string{"chunk", "chunk-e2ee", "meta", "meta-e2ee"}

func benchDocsOf(kind string) ([]json.RawMessage, int64) {
	docs := make([]json.RawMessage, benchN)
	var size int64
	for i := range docs {
		docs[i] = benchDoc(kind, i)
		size += int64(len(docs[i]))
	}
	return docs, size
}

func openBench(b *testing.B) store.Store {
	st, err := store.Open(store.NewMemoryBackend(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// BenchmarkBulkDocsNewEditsFalse writes benchN documents in calls of 100
// into a new store per iteration, as a pull writes its pages.
func BenchmarkBulkDocsNewEditsFalse(b *testing.B) {
	for _, kind := range benchKinds {
		b.Run(kind, func(b *testing.B) {
			docs, size := benchDocsOf(kind)
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				st := openBench(b)
				b.StartTimer()
				for i := 0; i < len(docs); i += 100 {
					if _, err := st.BulkDocs(context.Background(), docs[i:min(i+100, len(docs))]); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				st.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}

// loadedBench returns a store holding the documents of kind, and their
// ids and revisions.
func loadedBench(b *testing.B, kind string) (store.Store, []engine.DocRev, int64) {
	docs, size := benchDocsOf(kind)
	st := openBench(b)
	res, err := st.BulkDocs(context.Background(), docs)
	if err != nil {
		b.Fatal(err)
	}
	drs := make([]engine.DocRev, len(res))
	for i, r := range res {
		if r.Error != "" {
			b.Fatal(r)
		}
		drs[i] = engine.DocRev{ID: r.ID, Rev: r.Rev}
	}
	return st, drs, size
}

// BenchmarkGetRevs reads each document's revision with its history, as a
// server answers a pull's _bulk_get one document at a time.
func BenchmarkGetRevs(b *testing.B) {
	for _, kind := range benchKinds {
		b.Run(kind, func(b *testing.B) {
			st, drs, size := loadedBench(b, kind)
			defer st.Close()
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				for _, dr := range drs {
					res, err := st.GetRevs(context.Background(), dr.ID, store.RevsOptions{Revs: []string{dr.Rev}, History: true, Latest: true})
					if err != nil || len(res) != 1 || len(res[0].Docs) != 1 {
						b.Fatal(res, err)
					}
				}
			}
			b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}

// BenchmarkBulkGet reads the documents 100 at a time with BulkGet, as a
// push reads a local replica.
func BenchmarkBulkGet(b *testing.B) {
	for _, kind := range benchKinds {
		b.Run(kind, func(b *testing.B) {
			st, drs, size := loadedBench(b, kind)
			defer st.Close()
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				for i := 0; i < len(drs); i += 100 {
					docs, err := st.BulkGet(context.Background(), drs[i:min(i+100, len(drs))])
					if err != nil || len(docs) != min(100, len(drs)-i) {
						b.Fatal(len(docs), err)
					}
				}
			}
			b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}

// BenchmarkChangesFeed lists the store's changes in pages of 100.
func BenchmarkChangesFeed(b *testing.B) {
	for _, kind := range []string{"chunk", "meta"} {
		b.Run(kind, func(b *testing.B) {
			st, _, _ := loadedBench(b, kind)
			defer st.Close()
			b.ReportAllocs()
			for b.Loop() {
				since, n := "", 0
				for {
					page, err := st.Changes(context.Background(), engine.ChangesRequest{Since: since, Limit: 100})
					if err != nil {
						b.Fatal(err)
					}
					n += len(page.Results)
					since = page.LastSeq
					if len(page.Results) < 100 {
						break
					}
				}
				if n != benchN {
					b.Fatal(n)
				}
			}
			b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
		})
	}
}

// BenchmarkPutChunks writes benchN chunks of about 1 KiB in calls of 100
// into a new store per iteration, as an import stores a vault's files.
func BenchmarkPutChunks(b *testing.B) {
	chunks := make([]engine.Chunk, benchN)
	var size int64
	for i := range chunks {
		var c struct {
			ID   string `json:"_id"`
			Data string `json:"data"`
		}
		_ = json.Unmarshal(benchDoc("chunk", i), &c)
		chunks[i] = engine.Chunk{ID: c.ID, Data: c.Data}
		size += int64(len(c.Data))
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		st := openBench(b)
		b.StartTimer()
		for i := 0; i < len(chunks); i += 100 {
			if err := st.PutChunks(context.Background(), chunks[i:min(i+100, len(chunks))]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		st.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
}
