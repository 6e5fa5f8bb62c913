package holdback

import (
	"context"

	"github.com/livesync-go/livesync-go/engine/store"
)

// The store.BatchReader methods: reads of many documents go to the inner
// store in one batch when it can (store.GetRevsMany, store.GetWinners),
// else one read per document. Held revisions are not in the inner
// store, so they are missing, as for GetRevs and Get.

var (
	_ store.BatchReader = (*Store)(nil)
	_ store.BatchReader = (*Served)(nil)
	_ store.BatchReader = noClose{}
)

// GetRevsMany answers each request as GetRevs would.
func (s *Store) GetRevsMany(ctx context.Context, reqs []store.RevsRequest) ([][]store.RevDocs, error) {
	return store.GetRevsMany(ctx, s.inner, reqs)
}

// GetWinners reads the winning revision of each id, as Get would.
func (s *Store) GetWinners(ctx context.Context, ids []string, conflicts bool) ([]store.Winner, error) {
	return store.GetWinners(ctx, s.inner, ids, conflicts)
}

// GetRevsMany answers each request as GetRevs would.
func (v *Served) GetRevsMany(ctx context.Context, reqs []store.RevsRequest) ([][]store.RevDocs, error) {
	return v.cur.Load().GetRevsMany(ctx, reqs)
}

// GetWinners reads the winning revision of each id, as Get would.
func (v *Served) GetWinners(ctx context.Context, ids []string, conflicts bool) ([]store.Winner, error) {
	return v.cur.Load().GetWinners(ctx, ids, conflicts)
}

// GetRevsMany passes the batch to the wrapped store.
func (n noClose) GetRevsMany(ctx context.Context, reqs []store.RevsRequest) ([][]store.RevDocs, error) {
	return store.GetRevsMany(ctx, n.Store, reqs)
}

// GetWinners passes the batch to the wrapped store.
func (n noClose) GetWinners(ctx context.Context, ids []string, conflicts bool) ([]store.Winner, error) {
	return store.GetWinners(ctx, n.Store, ids, conflicts)
}
