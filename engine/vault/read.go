package vault

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/fetch"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// MissingChunksError says a file cannot be read because chunks are
// neither in the replica nor fetchable. It wraps engine.ErrMissingChunk
// (or, after a fetch, the first failure of a missing chunk).
type MissingChunksError struct {
	Path string
	// Missing of Total distinct chunks are not local.
	Missing, Total int
	// NoFetch names the attached remotes that cannot fetch chunks by id
	// (a journal without direct fetch); empty when none is attached.
	NoFetch []string
	// Fetched: remotes were asked, and did not have them (or failed:
	// Err).
	Fetched bool
	Err     error
}

func (e *MissingChunksError) Error() string {
	switch {
	case e.Fetched:
		return fmt.Sprintf("%d of %d chunks of %q are neither local nor on the remotes: %v", e.Missing, e.Total, e.Path, e.Unwrap())
	case len(e.NoFetch) > 0:
		return fmt.Sprintf("%d of %d chunks of %q are not in the local replica, and %s cannot fetch chunks by id: %v",
			e.Missing, e.Total, e.Path, strings.Join(e.NoFetch, ", "), engine.ErrMissingChunk)
	}
	return fmt.Sprintf("%d of %d chunks of %q are not in the local replica: %v", e.Missing, e.Total, e.Path, engine.ErrMissingChunk)
}

func (e *MissingChunksError) Unwrap() error {
	if e.Err != nil {
		return e.Err
	}
	return engine.ErrMissingChunk
}

// fetchMissing reads the chunks ids of m through the fetch layer: local
// ones from the replica, the others from the attached remotes, kept in
// the replica on arrival. Without a remote that can fetch by id, the
// read waits while a finite sync of the vault runs (it may bring them),
// as upstream's readers wait for an observable producer. A held file
// read whole is released.
func (v *Vault) fetchMissing(ctx context.Context, m livesync.Meta, ids []string, local int) (map[string]engine.Chunk, error) {
	direct := v.fetcher.CanFetchDirect()
	if !direct && v.act.State().Finite == 0 {
		return nil, &MissingChunksError{Path: m.Path, Missing: len(ids) - local, Total: len(ids), NoFetch: v.noFetchRemotes()}
	}
	res, err := v.layer.Get(ctx, ids, fetch.ReadOptions{WaitForReady: true})
	if err != nil {
		return nil, err
	}
	out := make(map[string]engine.Chunk, len(ids))
	missing := 0
	var firstErr error
	for i, r := range res {
		if r.OK {
			out[ids[i]] = r.Chunk
			continue
		}
		var ee *engine.Error
		if errors.As(r.Err, &ee) && (ee.Stage == engine.StageTransport || ee.Stage == engine.StageAuth) {
			return nil, r.Err
		}
		missing++
		if firstErr == nil {
			firstErr = r.Err
		}
	}
	if missing > 0 {
		if !direct {
			return nil, &MissingChunksError{Path: m.Path, Missing: missing, Total: len(ids), NoFetch: v.noFetchRemotes(), Err: firstErr}
		}
		return nil, &MissingChunksError{Path: m.Path, Missing: missing, Total: len(ids), Fetched: true, Err: firstErr}
	}
	v.noteArrived(ctx, []string{m.ID})
	return out, nil
}
