package main

import (
	"log/slog"
	"strings"

	"github.com/livesync-go/livesync-go/adapters/minio"
	ebridge "github.com/livesync-go/livesync-go/engine/bridge"
)

// bucketRemote is what a bucket upstream needs of its bucket: the
// journal's objects and the sync parameters. *minio.Bucket implements
// it (and ebridge.MilestoneBucket, so its settings are reconciled).
type bucketRemote = ebridge.Bucket

// openBucket opens a bucket upstream's bucket (tests replace it with an
// in-memory bucket).
var openBucket = func(cfg minio.Config, log *slog.Logger) (bucketRemote, error) {
	cfg.Logger = log
	return minio.New(cfg)
}

// bucketThrottleKey is a bucket upstream's hunt throttle key and hold-back
// source: "endpoint,bucket,prefix" with endpoint "http(s)://host[:port]",
// one key per journal, its three parts kept apart. (It is not the
// journal's checkpoint identity, minio.Bucket.ID, which must stay
// byte-compatible with the plugin's.)
func bucketThrottleKey(spec upstreamSpec) string {
	ep := spec.s3.Endpoint
	if !strings.Contains(ep, "://") {
		ep = "http://" + ep
		if spec.s3.Secure {
			ep = "https://" + spec.s3.Endpoint
		}
	}
	return strings.Join([]string{strings.TrimSuffix(ep, "/"), spec.s3.Bucket, spec.s3.Prefix}, ",")
}
