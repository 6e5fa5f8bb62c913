package main

import (
	"context"

	"github.com/livesync-go/livesync-go/engine/store"
)

// GetRevs reads several revisions of one document in one store read
// (open_revs, _bulk_get); a held revision is missing.
func (v *vaultStore) GetRevs(ctx context.Context, id string, opts store.RevsOptions) ([]store.RevDocs, error) {
	return v.cur.Load().GetRevs(ctx, id, opts)
}
