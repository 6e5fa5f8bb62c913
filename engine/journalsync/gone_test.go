package journalsync_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/journalsync/journalsynctest"
)

// TestPackGoneAfterListing: a pack deleted between the listing and its
// download is skipped by Receive and answered Missing by the pack index,
// not taken for a missing bucket (the in-memory bucket answers an absent
// key with StageStorage, as S3 does).
func TestPackGoneAfterListing(t *testing.T) {
	bucket := enginetest.NewMemObjects("vault/", "")
	journalsynctest.PackGoneAfterListing(t, bucket, bucket.Remove)
}

// TestBucketGoneFails: a missing bucket (engine.ErrNoDatabase) is not a
// missing pack: Receive and the pack index fail with the error.
func TestBucketGoneFails(t *testing.T) {
	ctx := t.Context()
	bucket := enginetest.NewMemObjects("vault/", "")
	writer := journalsynctest.MemStore(t, "writer")
	if err := writer.PutChunks(ctx, []engine.Chunk{{ID: "h:a", Data: "a"}}); err != nil {
		t.Fatal(err)
	}
	w, err := journalsync.New(journalsync.Config{Local: writer, Remote: bucket})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Send(ctx); err != nil {
		t.Fatal(err)
	}
	keys := bucket.PackKeys()
	noBucket := &engine.Error{Op: "get object", DocID: keys[0], Stage: engine.StageStorage,
		Err: fmt.Errorf("fake: %w: %w", engine.ErrNoDatabase, engine.ErrNotFound)}
	bucket.FailGet(keys[0], noBucket)
	j, err := journalsync.New(journalsync.Config{Local: journalsynctest.MemStore(t, "reader"), Remote: bucket, DirectFetch: true})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := j.Receive(ctx); !errors.Is(err, engine.ErrNoDatabase) || res.PacksReceived != 0 {
		t.Fatalf("receive: %+v, %v; want the missing bucket's error", res, err)
	}
	if res, err := j.ChunkSource().FetchChunks(ctx, []string{"h:a"}); !errors.Is(err, engine.ErrNoDatabase) {
		t.Fatalf("fetch: %+v, %v; want the missing bucket's error", res, err)
	}
}
