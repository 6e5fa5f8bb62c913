package holdback

import (
	"context"

	"github.com/livesync-go/livesync-go/engine/store"
)

// GetRevs reads several revisions of one document from the inner store in
// one read; a held revision is missing (held revisions are not in the
// inner store's trees until released), as with Get.
func (s *Store) GetRevs(ctx context.Context, id string, opts store.RevsOptions) ([]store.RevDocs, error) {
	return s.inner.GetRevs(ctx, id, opts)
}
