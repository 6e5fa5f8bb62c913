package holdback

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine/store"
)

// benchBatch is one push of 50 notes of one 1 KiB chunk each: chunks
// first, as the plugin sends them, or metadata first.
func benchBatch(n int, metaFirst bool) ([]json.RawMessage, []json.RawMessage, int64) {
	pad := strings.Repeat("x", 1000)
	var metas, chunks []json.RawMessage
	var size int64
	for i := range 50 {
		c := fmt.Sprintf("h:b%d-%d", n, i)
		m := meta(fmt.Sprintf("notes/b%d-%d.md", n, i), "1-a", c)
		ch, _ := json.Marshal(map[string]any{"_id": c, "_rev": "1-c", "type": "leaf", "data": pad})
		metas, chunks = append(metas, m), append(chunks, ch)
		size += int64(len(m) + len(ch))
	}
	return metas, chunks, size
}

func memStore(b *testing.B) store.Store {
	st, err := store.NewMemory(store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// benchPush measures pushes of 100 documents (50 notes and their chunks)
// into st; with metaFirst, the metadata comes in its own batch before
// the chunks, so every note is held and then released.
func benchPush(b *testing.B, st store.Store, metaFirst bool) {
	_, _, size := benchBatch(0, false)
	b.SetBytes(size)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		b.StopTimer()
		metas, chunks, _ := benchBatch(n, metaFirst)
		n++
		b.StartTimer()
		if metaFirst {
			if _, err := st.BulkDocs(b.Context(), metas); err != nil {
				b.Fatal(err)
			}
			if _, err := st.BulkDocs(b.Context(), chunks); err != nil {
				b.Fatal(err)
			}
			if s, ok := st.(*Store); ok {
				for s.Stats().Released < uint64(50*n) {
					runtime.Gosched() // the purgatory's driver releases them
				}
			}
		} else if _, err := st.BulkDocs(b.Context(), append(chunks, metas...)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(50*b.N)/b.Elapsed().Seconds(), "notes/s")
}

func BenchmarkPushMemoryInner(b *testing.B) {
	st := memStore(b)
	defer st.Close()
	benchPush(b, st, false)
}

func BenchmarkPushMemoryWrittenThrough(b *testing.B) {
	s, err := New(Config{}, Deps{Inner: memStore(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchPush(b, s, false)
}

func BenchmarkPushMemoryHeldThenReleased(b *testing.B) {
	s, err := New(Config{}, Deps{Inner: memStore(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchPush(b, s, true)
}
