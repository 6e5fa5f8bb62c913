package main

import (
	"context"
	"fmt"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/holdback"
)

// Revision history of the served databases: the store keeps
// earlier revisions' bodies (couchapi.StoreOptions, [compaction] in the
// configuration) until POST /{db}/_compact, and /{db}/_revs_limit bounds
// each branch. These are the store.Store methods for it on the relay's
// decorators.

// Compact drops earlier revisions' bodies and stems the documents
// (POST /{db}/_compact); held revisions are not touched.
func (v *vaultStore) Compact(ctx context.Context) error {
	_, err := write(v, func(s *holdback.Store) (struct{}, error) { return struct{}{}, s.Compact(ctx) })
	return err
}

// RevsLimit returns the database's _revs_limit.
func (v *vaultStore) RevsLimit(ctx context.Context) (int, error) {
	return v.cur.Load().RevsLimit(ctx)
}

// SetRevsLimit sets the database's _revs_limit.
func (v *vaultStore) SetRevsLimit(ctx context.Context, n int) error {
	_, err := write(v, func(s *holdback.Store) (struct{}, error) { return struct{}{}, s.SetRevsLimit(ctx, n) })
	return err
}

// Compact is not used by a journal: compaction is the database's own.
func (c *codecView) Compact(context.Context) error {
	return fmt.Errorf("the relay's journal view does not compact the database: %w", engine.ErrUnsupported)
}

// RevsLimit returns the database's revs limit.
func (c *codecView) RevsLimit(ctx context.Context) (int, error) { return c.v.RevsLimit(ctx) }

// SetRevsLimit is not used by a journal: the limit is the database's own.
func (c *codecView) SetRevsLimit(context.Context, int) error {
	return fmt.Errorf("the relay's journal view does not change the revs limit: %w", engine.ErrUnsupported)
}
