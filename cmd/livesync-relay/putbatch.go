package main

import (
	"context"
	"encoding/json"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/holdback"
)

// PutBatch writes local edits of several documents atomically (a
// _bulk_docs request without new_edits=false), through the hold-back.
func (v *vaultStore) PutBatch(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	return write(v, func(s *holdback.Store) ([]engine.BulkDocResult, error) { return s.PutBatch(ctx, docs) })
}
