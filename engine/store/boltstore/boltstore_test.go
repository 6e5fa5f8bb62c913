//go:build !js && !wasip1

package boltstore_test

import (
	"path/filepath"
	"strings"
	"testing"

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
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) })
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
