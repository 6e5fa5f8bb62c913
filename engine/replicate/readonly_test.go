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

// noWrites fails the test on any write to the endpoint.
type noWrites struct {
	*memEP
	t *testing.T
}

func (n noWrites) PutLocal(_ context.Context, id string, _ json.RawMessage) error {
	n.t.Errorf("ReadOnlyRemote wrote _local/%s on the remote", id)
	return nil
}

func (n noWrites) BulkDocs(context.Context, []json.RawMessage) ([]engine.BulkDocResult, error) {
	n.t.Error("ReadOnlyRemote wrote documents on the remote")
	return nil, nil
}

func TestReadOnlyRemoteNeverWritesTheRemote(t *testing.T) {
	remote, local := newMem("remote"), newMem("local")
	seedVault(remote, 30)
	r := newRep(t, replicate.Config{Local: local, Remote: noWrites{remote, t}, ReadOnlyRemote: true,
		BatchSize: 5, RemoteCheckpointBatches: 1})
	res, err := r.Pull(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Pull.DocsWritten == 0 {
		t.Fatal("nothing pulled")
	}
	// The local checkpoint alone resumes the pull.
	got := remote.bulkGetDocs
	if res, err = r.Pull(context.Background()); err != nil {
		t.Fatal(err)
	}
	if remote.bulkGetDocs != got || res.Pull.DocsRead != 0 {
		t.Errorf("rerun fetched %d documents; the local checkpoint was not used", remote.bulkGetDocs-got)
	}
	if _, err := r.Push(context.Background()); err == nil {
		t.Error("Push with ReadOnlyRemote succeeded")
	}
	if _, err := r.Sync(context.Background()); err == nil {
		t.Error("Sync with ReadOnlyRemote succeeded")
	}
}
