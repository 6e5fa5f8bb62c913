// Package journalsynctest holds checks of the journal
// (engine/journalsync) that every implementation of its bucket port,
// journalsync.Objects, runs against the journal itself: the in-memory
// bucket in journalsync's tests and an S3 server in adapters/minio's.
// The port's own conformance suite is enginetest.ObjectsSuite; these
// checks cover what the journal concludes from the port's answers.
package journalsynctest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// PackGoneAfterListing checks that a journal treats a pack deleted
// between the listing and its download as gone: Receive skips it and
// applies the others without an error, and the pack index (DirectFetch)
// answers its chunk ids Missing. bucket must be empty and written by no
// one else; remove deletes an object behind the port's back (another
// device, or a wipe of the bucket). The pack's absence must read as a
// missing object (engine.ErrNotFound), not as a missing bucket
// (engine.ErrNoDatabase), which fails a journal.
func PackGoneAfterListing(t *testing.T, bucket journalsync.Objects, remove func(key string)) {
	t.Helper()
	ctx := t.Context()
	writer := MemStore(t, "writer")
	var chunks []engine.Chunk
	var all []string
	for i := range 30 {
		c := engine.Chunk{ID: fmt.Sprintf("h:gone%02d", i), Data: fmt.Sprint("chunk ", i)}
		chunks = append(chunks, c)
		all = append(all, c.ID)
	}
	if err := writer.PutChunks(ctx, chunks); err != nil {
		t.Fatal(err)
	}
	w, err := journalsync.New(journalsync.Config{Local: writer, Remote: bucket, MaxPackRecords: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := w.Send(ctx); err != nil || res.PacksSent != 3 {
		t.Fatalf("send: %+v, %v", res, err)
	}
	keys, err := bucket.List(ctx, "")
	if err != nil || len(keys) != 3 {
		t.Fatalf("list: %q, %v", keys, err)
	}
	key := keys[1]
	body, err := bucket.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := journal.Open(key, body, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var goneIDs []string
	for _, r := range recs {
		goneIDs = append(goneIDs, r.ID)
	}
	slices.Sort(goneIDs)

	// vanish returns the bucket with key about to disappear, after
	// putting it back if an earlier check removed it.
	vanish := func(t *testing.T) *vanishing {
		if _, err := bucket.Get(ctx, key); errors.Is(err, engine.ErrNotFound) {
			if err := bucket.Put(ctx, key, body); err != nil {
				t.Fatal(err)
			}
		}
		return &vanishing{Objects: bucket, remove: remove, key: key}
	}
	t.Run("Receive", func(t *testing.T) {
		v := vanish(t)
		reader := MemStore(t, "reader")
		j, err := journalsync.New(journalsync.Config{Local: reader, Remote: v})
		if err != nil {
			t.Fatal(err)
		}
		res, err := j.Receive(ctx)
		if err != nil || !v.gone || res.PacksReceived != 2 || res.ChunksReceived != len(all)-len(goneIDs) || len(res.Quarantined) != 0 {
			t.Fatalf("receive: %+v, %v (removed: %v); want the two other packs and no error", res, err, v.gone)
		}
	})
	t.Run("FetchChunks", func(t *testing.T) {
		v := vanish(t)
		j, err := journalsync.New(journalsync.Config{Local: MemStore(t, "reader"), Remote: v, DirectFetch: true})
		if err != nil {
			t.Fatal(err)
		}
		res, err := j.ChunkSource().FetchChunks(ctx, all)
		missing := slices.Sorted(slices.Values(res.Missing))
		if err != nil || !v.gone || len(res.Found) != len(all)-len(goneIDs) || !slices.Equal(missing, goneIDs) {
			t.Fatalf("fetch: %d found, missing %q, %v (removed: %v); want the gone pack's ids missing", len(res.Found), missing, err, v.gone)
		}
	})
}

// vanishing is a bucket from which one object disappears after a listing
// named it and before the Get that downloads it, as when another device
// prunes the journal or the bucket is wiped while this one receives.
type vanishing struct {
	journalsync.Objects
	remove func(key string)

	mu   sync.Mutex
	key  string // removed at its first Get
	gone bool   // it was
}

func (v *vanishing) Get(ctx context.Context, key string) ([]byte, error) {
	v.mu.Lock()
	if key == v.key && !v.gone {
		v.remove(key)
		v.gone = true
	}
	v.mu.Unlock()
	return v.Objects.Get(ctx, key)
}

// MemStore returns an empty in-memory store named name (a device's
// replica), closed when the test ends.
func MemStore(t *testing.T, name string) store.Store {
	t.Helper()
	st, err := store.NewMemory(store.Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// PackIndexSource sends chunks to bucket as packs of at most 25 records
// from one device, and returns the pack-index chunk source of another
// device that has received nothing (DirectFetch): the source the chunk
// source conformance suite (enginetest.ChunkSourceSuite) runs against.
func PackIndexSource(t *testing.T, bucket journalsync.Objects, chunks []engine.Chunk) engine.ChunkSource {
	t.Helper()
	ctx := t.Context()
	if len(chunks) > 0 {
		writer := MemStore(t, "writer")
		if err := writer.PutChunks(ctx, chunks); err != nil {
			t.Fatal(err)
		}
		j, err := journalsync.New(journalsync.Config{Local: writer, Remote: bucket, MaxPackRecords: 25})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := j.Send(ctx); err != nil || res.RecordsSent != len(chunks) {
			t.Fatalf("send: %+v, %v", res, err)
		}
	}
	j, err := journalsync.New(journalsync.Config{Local: MemStore(t, "reader"), Remote: bucket, DirectFetch: true})
	if err != nil {
		t.Fatal(err)
	}
	return j.ChunkSource()
}
