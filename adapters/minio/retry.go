package minio

import (
	"context"
	"log/slog"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/decorate"
)

// retry runs f by the Bucket's retry policy r (its defaults applied):
// decorate.Do with the adapter's classification, transient, so only
// *engine.Error values with StageTransport are tried again, and a warning
// logged before each wait. It returns what decorate.Do returns: the last
// attempt's error (saying how many attempts were made when they ran out)
// or ctx.Err() wrapped when ctx ended.
func retry(ctx context.Context, r Retry, log *slog.Logger, op, key string, f func() error) error {
	p := decorate.Policy{MaxAttempts: r.MaxAttempts, Delay: r.Delay, Retryable: transient}
	if log != nil {
		p.OnRetry = func(a decorate.Attempt) {
			log.Warn("S3 request failed, retrying", "op", a.Op, "key", a.Key, "attempt", a.N, "delay", a.Delay,
				"stage", engine.StageTransport, "err", a.Err)
		}
	}
	return decorate.Do(ctx, p, "minio: "+op, key, f)
}
