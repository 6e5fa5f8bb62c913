package main

import (
	"context"

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
