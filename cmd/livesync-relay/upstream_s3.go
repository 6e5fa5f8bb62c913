package main

import (
	"log/slog"
	"strings"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// openBucket opens a bucket upstream's bucket as a remote (tests replace
// it with an in-memory bucket).
var openBucket = func(cfg minio.Config, log *slog.Logger) (vault.Remote, error) {
	cfg.Logger = log
	r, err := minio.NewRemote(cfg, minio.RemoteOptions{})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// bucketThrottleKey is a bucket upstream's hunt throttle key and hold-back
// source: "endpoint,bucket,prefix" with endpoint "http(s)://host[:port]",
// one key per journal, its three parts kept apart. (It is not the
// journal's checkpoint identity, minio.Bucket.ID, which must stay
// byte-compatible with the plugin's.)
func bucketThrottleKey(spec upstreamSpec) string {
	return strings.Join([]string{minio.EndpointURL(spec.s3), spec.s3.Bucket, spec.s3.Prefix}, ",")
}
