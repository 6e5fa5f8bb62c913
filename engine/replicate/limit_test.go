package replicate_test

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"

	"github.com/livesync-go/livesync-go/engine/replicate"
)

// TestBatchesLimitBoundsReadAhead: while the first batch's write is
// stuck, at most BatchesLimit pages of changes have been listed.
func TestBatchesLimitBoundsReadAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		remote, local := newMem("remote"), newMem("local")
		seedVault(remote, 20) // 40 documents, 20 pages of 2
		release := make(chan struct{})
		first := true
		local.onBulkDocs = func([]json.RawMessage) error {
			if first {
				first = false
				<-release
			}
			return nil
		}
		r := newRep(t, replicate.Config{Local: local, Remote: remote, BatchSize: 2, BatchesLimit: 3})
		done := make(chan error, 1)
		go func() { _, err := r.Pull(context.Background()); done <- err }()
		synctest.Wait()
		remote.mu.Lock()
		n := 0
		for _, l := range remote.limits {
			n += l
		}
		remote.mu.Unlock()
		if n != 6 {
			t.Errorf("%d changes listed while the first write is stuck, want 6 (batches_limit pages of 2)", n)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		sameDocs(t, remote, local)
	})
}
