package store_test

import (
	"testing"

	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/storetest"
)

func openMemory(t testing.TB) store.Store {
	st, err := store.NewMemory(store.Options{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, opts store.Options) store.Store {
		opts.Name = "test"
		st, err := store.NewMemory(opts)
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

func TestMemoryAtomic(t *testing.T) {
	storetest.RunAtomic(t, func(t *testing.T) store.Backend { return store.NewMemoryBackend() })
}

func BenchmarkMemoryBulkDocs(b *testing.B) {
	storetest.BenchBulkDocs(b, func(b *testing.B) store.Store { return openMemory(b) })
}

func BenchmarkMemoryChanges(b *testing.B) {
	storetest.BenchChanges(b, func(b *testing.B) store.Store { return openMemory(b) }, "")
}

func BenchmarkMemoryChangesSelector(b *testing.B) {
	storetest.BenchChanges(b, func(b *testing.B) store.Store { return openMemory(b) }, `{"type":{"$ne":"leaf"}}`)
}
