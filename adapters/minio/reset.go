package minio

import (
	"context"
	"strings"

	"github.com/minio/minio-go/v7"
)

// Reset deletes every object under the prefix: packs, the sync
// parameters and the milestone. It is the bucket side of upstream's
// "rebuild remote" (tryResetRemoteDatabase on a journal remote), after
// which the next handshake writes a new salt. Objects outside the prefix
// are never touched; an empty prefix means the whole bucket. It returns
// how many objects it deleted.
func (b *Bucket) Reset(ctx context.Context) (int, error) {
	const op = "reset bucket"
	var keys []string
	err := b.do(ctx, op, b.prefix, func() error {
		keys = keys[:0]
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for o := range b.c.ListObjects(lctx, b.bucket, minio.ListObjectsOptions{Prefix: b.prefix, Recursive: true}) {
			if o.Err != nil {
				return b.wrap(ctx, op, b.prefix, o.Err)
			}
			if strings.HasPrefix(o.Key, b.prefix) {
				keys = append(keys, o.Key)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for i, key := range keys {
		err := b.do(ctx, op, key, func() error {
			if err := b.c.RemoveObject(ctx, b.bucket, key, minio.RemoveObjectOptions{}); err != nil {
				return b.wrap(ctx, op, key, err)
			}
			return nil
		})
		if err != nil {
			return i, err
		}
	}
	return len(keys), nil
}
