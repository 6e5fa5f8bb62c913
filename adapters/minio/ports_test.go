package minio

import "github.com/livesync-go/livesync-go/engine/journalsync"

// Bucket is the object store of engine/journalsync.
var _ journalsync.Objects = (*Bucket)(nil)
