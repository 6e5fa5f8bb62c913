//go:build !js && !wasip1

package boltstore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
	"github.com/livesync-go/livesync-go/engine/store/storetest"
)

func openTemp(t testing.TB) store.Store {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "test.db"), boltstore.Options{Options: store.Options{Name: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, opts store.Options) store.Store {
		opts.Name = "test"
		st, err := boltstore.Open(filepath.Join(t.TempDir(), "test.db"), boltstore.Options{Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

func TestAtomic(t *testing.T) {
	storetest.RunAtomic(t, func(t *testing.T) store.Backend {
		b, err := boltstore.OpenBackend(filepath.Join(t.TempDir(), "atomic.db"), boltstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := st.Put(t.Context(), []byte(`{"_id":"a","v":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutLocal(t.Context(), "cp", []byte(`{"last_seq":"1"}`)); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, err := st.Get(t.Context(), "a", store.GetOptions{})
	if err != nil || !contains(string(d), rev) {
		t.Fatalf("after reopen: %s, %v", d, err)
	}
	if _, err := st.GetLocal(t.Context(), "cp"); err != nil {
		t.Fatal(err)
	}
	// Sequences continue after a reopen.
	if _, err := st.Put(t.Context(), []byte(`{"_id":"b"}`)); err != nil {
		t.Fatal(err)
	}
	info, _ := st.Info(t.Context())
	if info.UpdateSeq != "2" || info.DocCount != 2 {
		t.Fatalf("Info after reopen = %+v", info)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func BenchmarkBulkDocs(b *testing.B) {
	storetest.BenchBulkDocs(b, func(b *testing.B) store.Store { return openTemp(b) })
}

func BenchmarkChanges(b *testing.B) {
	storetest.BenchChanges(b, func(b *testing.B) store.Store { return openTemp(b) }, "")
}

func BenchmarkChangesSelector(b *testing.B) {
	storetest.BenchChanges(b, func(b *testing.B) store.Store { return openTemp(b) }, `{"type":{"$ne":"leaf"}}`)
}

// freePages opens the closed bbolt file at path and returns its free
// pages (free and pending), its page size and the file's size.
func freePages(t *testing.T, path string) (free, pageSize int, size int64) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := db.Stats()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.FreePageN + st.PendingPageN, db.Info().PageSize, fi.Size()
}

// writeHistory writes edits revisions of each of docs documents with a
// body of about bodySize bytes, through a store that keeps every body.
func writeHistory(t *testing.T, path string, docs, edits, bodySize int, tag string) {
	t.Helper()
	st, err := boltstore.Open(path, boltstore.Options{Options: store.Options{KeepBodies: store.KeepAllBodies}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	filler := strings.Repeat("x", bodySize)
	for d := range docs {
		id := fmt.Sprintf("%s-%03d", tag, d)
		rev := ""
		for e := range edits {
			doc := fmt.Sprintf(`{"_id":%q,"e":%d,"data":%q}`, id, e, filler)
			if rev != "" {
				doc = fmt.Sprintf(`{"_id":%q,"_rev":%q,"e":%d,"data":%q}`, id, rev, e, filler)
			}
			if rev, err = st.Put(t.Context(), []byte(doc)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Compaction frees the pages that earlier revisions' bodies took: bbolt
// files never shrink, so the measure is the file's free pages, and the
// proof that they are reused is that the same history written again
// does not grow the file.
func TestCompactFreesPages(t *testing.T) {
	const docs, edits, bodySize = 40, 25, 8 << 10
	path := filepath.Join(t.TempDir(), "h.db")
	writeHistory(t, path, docs, edits, bodySize, "a")
	free0, pageSize, size0 := freePages(t, path)

	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	st.Close()
	free1, _, size1 := freePages(t, path)
	history := docs * (edits - 1) * bodySize
	t.Logf("file %d bytes; free pages %d before Compact, %d after (%d bytes freed; earlier bodies were %d bytes); file %d bytes after",
		size0, free0, free1, (free1-free0)*pageSize, history, size1)
	if (free1-free0)*pageSize < history*9/10 {
		t.Fatalf("Compact freed %d pages (%d bytes), want at least 90%% of the %d bytes of earlier bodies", free1-free0, (free1-free0)*pageSize, history)
	}

	writeHistory(t, path, docs, edits, bodySize, "b")
	_, _, size2 := freePages(t, path)
	t.Logf("the same history written again: file %d bytes (was %d)", size2, size1)
	if size2 > size1+size1/5 {
		t.Fatalf("file grew from %d to %d bytes: the freed pages were not reused", size1, size2)
	}
}
