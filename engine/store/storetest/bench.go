package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// BenchDocs is the number of documents of the shared benchmarks; each
// document carries about 1 KiB.
const BenchDocs = 10000

func benchDocs() ([]json.RawMessage, int64) {
	pad := strings.Repeat("x", 1024-80)
	docs := make([]json.RawMessage, BenchDocs)
	var n int64
	for i := range docs {
		docs[i] = json.RawMessage(fmt.Sprintf(`{"_id":"notes/doc%05d.md","_rev":"1-%032x","type":"plain","size":%d,"children":["h:%05d"],"pad":%q}`, i, i, i, i, pad))
		n += int64(len(docs[i]))
	}
	return docs, n
}

// BenchBulkDocs measures one BulkDocs of BenchDocs documents of 1 KiB
// (new_edits=false) into a fresh store per iteration.
func BenchBulkDocs(b *testing.B, open func(b *testing.B) store.Store) {
	docs, size := benchDocs()
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		st := open(b)
		b.StartTimer()
		if _, err := st.BulkDocs(b.Context(), docs); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		st.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(BenchDocs)*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
}

// BenchChanges measures a full changes scan over BenchDocs documents in
// pages of 1000, with selector if it is not empty.
func BenchChanges(b *testing.B, open func(b *testing.B) store.Store, selector string) {
	docs, size := benchDocs()
	st := open(b)
	defer st.Close()
	if _, err := st.BulkDocs(b.Context(), docs); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		since, n := "", 0
		for {
			req := engine.ChangesRequest{Since: since, Limit: 1000}
			if selector != "" {
				req.Selector = json.RawMessage(selector)
			}
			page, err := st.Changes(b.Context(), req)
			if err != nil {
				b.Fatal(err)
			}
			n += len(page.Results)
			since = page.LastSeq
			if len(page.Results) < 1000 {
				break
			}
		}
		if n != BenchDocs {
			b.Fatalf("%d changes, want %d", n, BenchDocs)
		}
	}
	b.ReportMetric(float64(BenchDocs)*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
}
