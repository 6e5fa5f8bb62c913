package replicate

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Live keeps the endpoints in sync in direction dir until ctx ends or
// Close: first a finite pull-only catch-up to the end of the remote feed
// (inside the finite activity boundary; skipped when dir has no Pull),
// then one follower per direction reading its source's feed with
// Wait=true — continuous, outside the finite boundary. Transport errors
// reconnect after a delay of MinBackoff doubling to MaxBackoff, reset by
// every successful batch; a failed bulk write shrinks the batches as in
// one-shot runs. Live returns ctx's error (or ErrClosed) after every
// goroutine it started has ended, or earlier with a permanent error
// (authentication, protocol, a bulk write failing at the smallest sizes).
func (r *Replicator) Live(ctx context.Context, dir Direction) error {
	if err := r.cfg.validateDirection(dir); err != nil {
		return err
	}
	ctx, done, err := r.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	if dir&Pull != 0 {
		if err := r.catchUp(ctx); err != nil {
			return r.liveErr(ctx, err)
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, d := range []Direction{Pull, Push} {
		if dir&d == 0 {
			continue
		}
		wg.Go(func() {
			if err := r.follow(ctx, d); err != nil && ctx.Err() == nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	return r.liveErr(ctx, context.Cause(ctx))
}

func (r *Replicator) liveErr(ctx context.Context, err error) error {
	if r.base.Err() != nil && ctx.Err() != nil {
		return ErrClosed
	}
	return err
}

// catchUp runs the pull-only one-shot that precedes the live channel,
// retrying transport failures with backoff; every attempt is a finite
// operation of its own.
func (r *Replicator) catchUp(ctx context.Context) error {
	bo := r.newBackoff()
	for {
		err := r.catchUpOnce(ctx)
		if err == nil || !IsTransport(err) || ctx.Err() != nil {
			return err
		}
		r.cfg.Log.Warn("replicate: catch-up failed; retrying", "delay", bo.d, "err", err)
		r.retrying(Retry{Direction: Pull, What: "catch-up", Delay: bo.d, Err: err})
		if err := bo.wait(ctx); err != nil {
			return err
		}
	}
}

func (r *Replicator) catchUpOnce(ctx context.Context) error {
	body := func(ctx context.Context) error {
		lg, err := r.leg(ctx, Pull)
		if err != nil {
			return err
		}
		var p Progress
		return r.runLeg(ctx, lg, &p)
	}
	if r.cfg.Activity == nil {
		return body(ctx)
	}
	return r.cfg.Activity.RunFinite(ctx, "replication catch-up", body)
}

// follow replicates one direction continuously.
func (r *Replicator) follow(ctx context.Context, dir Direction) error {
	bo := r.newBackoff()
	sz := sizes{batch: r.cfg.BatchSize, limit: r.cfg.BatchesLimit}
	for {
		var n int
		lg, err := r.leg(ctx, dir)
		if err == nil {
			var p Progress
			n, err = r.pass(ctx, lg, sz, true, &p)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if n > 0 {
			bo.reset()
		}
		var be *batchError
		switch {
		case errors.As(err, &be):
			next, ok := sz.shrink()
			if !ok {
				return be.err
			}
			r.cfg.Log.Warn("replicate: live bulk write failed; retrying with smaller batches",
				"direction", dir.String(), "batch_size", next.batch, "batches_limit", next.limit, "err", be.err)
			r.retrying(Retry{Direction: dir, What: "bulk write", Err: be.err})
			sz = next
		case IsTransport(err):
			r.cfg.Log.Warn("replicate: live feed failed; reconnecting", "direction", dir.String(), "delay", bo.d, "err", err)
			r.retrying(Retry{Direction: dir, What: "live feed", Delay: bo.d, Err: err})
			if err := bo.wait(ctx); err != nil {
				return err
			}
		case err != nil:
			return err
		}
		// err == nil: the source ended a feed that was to wait; reconnect.
	}
}

type backoff struct {
	min, max, d time.Duration
}

func (r *Replicator) newBackoff() *backoff {
	return &backoff{min: r.cfg.MinBackoff, max: r.cfg.MaxBackoff, d: r.cfg.MinBackoff}
}

func (b *backoff) reset() { b.d = b.min }

func (b *backoff) wait(ctx context.Context) error {
	t := time.NewTimer(b.d)
	defer t.Stop()
	b.d = min(2*b.d, b.max)
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
