package minio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// retry runs f until it succeeds, fails with an error that is not
// transient (see transient), ctx ends, or r.MaxAttempts attempts have
// failed; it waits r.Delay(n) after the n-th failed attempt. It returns
// the last attempt's error, saying how many attempts were made when they
// ran out, or ctx.Err() wrapped (with the last attempt's error in the
// message) when ctx ended. r must have its defaults applied.
func retry(ctx context.Context, r Retry, log *slog.Logger, op, key string, f func() error) error {
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return cancelled(ctx, op, key, err)
		}
		if !transient(err) {
			return err
		}
		if attempt >= r.MaxAttempts {
			return gaveUp(err, attempt)
		}
		d := r.Delay(attempt)
		if log != nil {
			log.Warn("S3 request failed, retrying", "op", op, "key", key, "attempt", attempt, "delay", d, "stage", engine.StageTransport, "err", err)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return cancelled(ctx, op, key, err)
		case <-t.C:
		}
	}
}

func cancelled(ctx context.Context, op, key string, last error) error {
	if errors.Is(last, ctx.Err()) {
		return last
	}
	return fmt.Errorf("minio: %s %q: %w (the last attempt failed with: %v)", op, key, ctx.Err(), last)
}

// gaveUp adds the number of attempts to a transient error's message.
func gaveUp(err error, attempts int) error {
	var e *engine.Error
	if attempts < 2 || !errors.As(err, &e) {
		return err
	}
	return &engine.Error{Op: e.Op, DocID: e.DocID, Stage: e.Stage, Err: fmt.Errorf("%w; gave up after %d attempts", e.Err, attempts)}
}
