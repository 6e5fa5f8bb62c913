package journalsync_test

import (
	"errors"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// The journal bucket's port has one declaration per side of the import
// graph; they must not drift.
var (
	_ enginetest.Objects  = journalsync.Objects(nil)
	_ journalsync.Objects = enginetest.Objects(nil)
)

// packIndexSource sends chunks to bucket as packs of at most 25 records
// from one device, and returns the pack-index chunk source of another
// device that has received nothing (DirectFetch).
func packIndexSource(t *testing.T, bucket journalsync.Objects, chunks []engine.Chunk) engine.ChunkSource {
	t.Helper()
	ctx := t.Context()
	if len(chunks) > 0 {
		writer, err := store.NewMemory(store.Options{Name: "writer"})
		if err != nil {
			t.Fatal(err)
		}
		defer writer.Close()
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
	reader, err := store.NewMemory(store.Options{Name: "reader"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	j, err := journalsync.New(journalsync.Config{Local: reader, Remote: bucket, DirectFetch: true})
	if err != nil {
		t.Fatal(err)
	}
	return j.ChunkSource()
}

func TestObjectsSuiteMemObjects(t *testing.T) {
	enginetest.ObjectsSuite(t, func(t *testing.T) (enginetest.Objects, func(string), func()) {
		m := enginetest.NewMemObjects("vault/", "")
		return m, m.Remove, nil
	})
}

// TestChunkSourceSuitePackIndex holds the journal's chunk source (fetch
// by id through the pack index) to the port's contract; the same suite
// runs over an S3 server in adapters/minio.
func TestChunkSourceSuitePackIndex(t *testing.T) {
	enginetest.ChunkSourceSuite(t,
		func(t *testing.T, chunks []engine.Chunk) (engine.ChunkSource, func()) {
			return packIndexSource(t, enginetest.NewMemObjects("vault/", ""), chunks), nil
		},
		func(t *testing.T) (engine.ChunkSource, func()) {
			bucket := enginetest.NewMemObjects("vault/", "")
			bucket.FailList(func(int) error {
				return &engine.Error{Op: "list packs", Stage: engine.StageTransport, Err: errConnReset}
			})
			return packIndexSource(t, bucket, nil), nil
		})
}

var errConnReset = errors.New("connection reset by peer")
