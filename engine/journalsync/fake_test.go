package journalsync

import (
	"errors"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
)

// newMemObjects returns the shared in-memory bucket under prefix, with
// an ID shaped like the S3 adapter's.
func newMemObjects(prefix string) *enginetest.MemObjects {
	return enginetest.NewMemObjects(prefix, "http://127.0.0.1:9000,bucket"+prefix+",auto")
}

var _ Objects = (*enginetest.MemObjects)(nil)

// transportErr is what an adapter returns after its own retries failed.
func transportErr(key string) error {
	return &engine.Error{Op: "get object", DocID: key, Stage: engine.StageTransport, Err: errors.New("fake: connection reset")}
}
