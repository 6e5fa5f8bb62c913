package journalsync_test

import (
	"errors"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/journalsync/journalsynctest"
)

// The journal bucket's port has one declaration per side of the import
// graph; they must not drift.
var (
	_ enginetest.Objects  = journalsync.Objects(nil)
	_ journalsync.Objects = enginetest.Objects(nil)
)

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
			return journalsynctest.PackIndexSource(t, enginetest.NewMemObjects("vault/", ""), chunks), nil
		},
		func(t *testing.T) (engine.ChunkSource, func()) {
			bucket := enginetest.NewMemObjects("vault/", "")
			bucket.FailList(func(int) error {
				return &engine.Error{Op: "list packs", Stage: engine.StageTransport, Err: errConnReset}
			})
			return journalsynctest.PackIndexSource(t, bucket, nil), nil
		})
}

var errConnReset = errors.New("connection reset by peer")
