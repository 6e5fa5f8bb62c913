//go:build !js && !wasip1

package boltstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/livesync-go/livesync-go/engine/store"
)

// TestSnapshotWhileWriting copies a store while a writer goes on: the
// copy is a valid bbolt file holding every document written before it
// started, in the current format.
func TestSnapshotWhileWriting(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(filepath.Join(dir, "live.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	for i := range 200 {
		if _, err := st.Put(ctx, fmt.Appendf(nil, `{"_id":"before-%03d","pad":"%0400d"}`, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			if _, err := st.Put(ctx, fmt.Appendf(nil, `{"_id":"during-%05d","pad":"%0400d"}`, i, i)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	out := filepath.Join(dir, "copy.db")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	info, err := Snapshot(st, f)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, _ := os.Stat(out); fi.Size() != info.Size || info.Format != FormatVersion() {
		t.Fatalf("snapshot %+v, file size %d", info, fi.Size())
	}
	db, err := bolt.Open(out, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatalf("the copy is not consistent: %v", err)
	}
	cp, err := Open(out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	for i := range 200 {
		if _, err := cp.Get(ctx, fmt.Sprintf("before-%03d", i), store.GetOptions{}); err != nil {
			t.Fatalf("before-%03d: %v", i, err)
		}
	}
}

func TestSnapshotOtherStores(t *testing.T) {
	mem, _ := store.NewMemory(store.Options{})
	if _, err := Snapshot(mem, os.Stdout); !errors.Is(err, ErrNotBolt) {
		t.Fatalf("memory store: %v", err)
	}
}

// TestSnapshotFile copies a closed file read-only, and waits no longer
// than told for one a process has open.
func TestSnapshotFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(t.Context(), []byte(`{"_id":"a"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := SnapshotFile(path, new(countWriter), 100*time.Millisecond); err == nil {
		t.Fatal("copied a file open for writing")
	}
	st.Close()
	var w countWriter
	info, err := SnapshotFile(path, &w, 0)
	if err != nil || int64(w) != info.Size || info.Format != FormatVersion() {
		t.Fatalf("%+v %d %v", info, w, err)
	}
}

type countWriter int64

func (c *countWriter) Write(b []byte) (int, error) { *c += countWriter(len(b)); return len(b), nil }
