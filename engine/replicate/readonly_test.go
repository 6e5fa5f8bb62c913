package replicate_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

// readOnly refuses _local writes and reads as a reader-only CouchDB
// user's database would.
type readOnly struct{ *memEP }

var forbidden = &engine.Error{Op: "put local", Stage: engine.StageAuth, Err: errors.New("403 forbidden")}

func (r readOnly) PutLocal(context.Context, string, json.RawMessage) error { return forbidden }
func (r readOnly) GetLocal(context.Context, string) (json.RawMessage, error) {
	return nil, forbidden
}

func TestReadOnlySourceCheckpointsOnTarget(t *testing.T) {
	remote, local := newMem("remote"), newMem("local")
	seedVault(remote, 5)
	r := newRep(t, replicate.Config{Local: local, Remote: readOnly{remote}})
	if _, err := r.Pull(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := remote.bulkGetDocs
	res, err := r.Pull(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if remote.bulkGetDocs != got || res.Pull.DocsRead != 0 {
		t.Errorf("rerun fetched %d documents; the target's checkpoint was not used", remote.bulkGetDocs-got)
	}
}
