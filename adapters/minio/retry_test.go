package minio

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

var (
	errTransport = &engine.Error{Op: "read object", DocID: "k", Stage: engine.StageTransport, Err: errors.New("minio: the server is unavailable or busy (S3 SlowDown, HTTP 503)")}
	errAuth      = &engine.Error{Op: "read object", DocID: "k", Stage: engine.StageAuth, Err: errors.New("minio: check the credentials")}
	errMissing   = &engine.Error{Op: "read object", DocID: "k", Stage: engine.StageStorage, Err: fmt.Errorf("minio: no such object: %w", engine.ErrNotFound)}
	errNoBucket  = &engine.Error{Op: "read object", DocID: "k", Stage: engine.StageStorage, Err: fmt.Errorf("minio: %w: %w", ErrNoBucket, engine.ErrNotFound)}
	errPlain     = errors.New("boom")
)

// TestRetrySchedule checks what retry adds to decorate.Do (whose loop,
// waits and context handling engine/decorate's tests cover): the
// bucket's Retry policy, by default upstream's ConfiguredRetryStrategy(4,
// attempt => 100 + attempt * 1000), and the adapter's classification,
// which retries only transient (StageTransport) errors. Attempts are
// checked at exact virtual times.
func TestRetrySchedule(t *testing.T) {
	ms := func(v ...int) (d []time.Duration) {
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	for _, tc := range []struct {
		name    string
		retry   Retry
		errs    []error // returned by successive attempts; nil after the list
		wantAt  []time.Duration
		wantErr error // errors.Is target; nil means success
	}{
		{name: "success at once", wantAt: ms(0)},
		{name: "four 503s: gives up", errs: []error{errTransport, errTransport, errTransport, errTransport, nil},
			wantAt: ms(0, 1100, 3200, 6300), wantErr: errTransport.Err},
		{name: "wrapped transport error is retried", errs: []error{fmt.Errorf("list: %w", errTransport)}, wantAt: ms(0, 1100)},
		{name: "auth: one attempt", errs: []error{errAuth, nil}, wantAt: ms(0), wantErr: errAuth},
		{name: "no such key: one attempt", errs: []error{errMissing, nil}, wantAt: ms(0), wantErr: engine.ErrNotFound},
		{name: "no such bucket: one attempt", errs: []error{errNoBucket, nil}, wantAt: ms(0), wantErr: ErrNoBucket},
		{name: "plain error: one attempt", errs: []error{errPlain, nil}, wantAt: ms(0), wantErr: errPlain},
		{name: "MaxAttempts 1 disables retrying", retry: Retry{MaxAttempts: 1}, errs: []error{errTransport, nil},
			wantAt: ms(0), wantErr: errTransport},
		{name: "custom delay", retry: Retry{MaxAttempts: 3, Delay: func(n int) time.Duration { return time.Duration(n) * 10 * time.Millisecond }},
			errs: []error{errTransport, errTransport, errTransport, nil}, wantAt: ms(0, 10, 30), wantErr: errTransport.Err},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var at []time.Duration
				err := retry(t.Context(), tc.retry.withDefaults(), nil, "read object", "k", func() error {
					at = append(at, time.Since(start))
					if i := len(at) - 1; i < len(tc.errs) {
						return tc.errs[i]
					}
					return nil
				})
				if fmt.Sprint(at) != fmt.Sprint(tc.wantAt) {
					t.Errorf("attempts at %v, want %v", at, tc.wantAt)
				}
				if (err == nil) != (tc.wantErr == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
					t.Errorf("err = %v, want one wrapping %v", err, tc.wantErr)
				}
			})
		})
	}
}

// TestRetryDefaultDelay is upstream's delay function, attempt by attempt.
func TestRetryDefaultDelay(t *testing.T) {
	r := Retry{}.withDefaults()
	if r.MaxAttempts != 4 {
		t.Errorf("MaxAttempts = %d, want 4", r.MaxAttempts)
	}
	for n, want := range map[int]time.Duration{1: 1100 * time.Millisecond, 2: 2100 * time.Millisecond, 3: 3100 * time.Millisecond} {
		if got := r.Delay(n); got != want {
			t.Errorf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
}

// TestRetryContext: a context that ends during a wait stops the loop with
// ctx.Err(), in a message that names the adapter's operation.
func TestRetryContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(500*time.Millisecond, cancel)
		calls := 0
		err := retry(ctx, Retry{}.withDefaults(), nil, "read object", "k", func() error { calls++; return errTransport })
		if !errors.Is(err, context.Canceled) || calls != 1 {
			t.Fatalf("err %v after %d calls; want context.Canceled after 1 call", err, calls)
		}
		if !strings.Contains(err.Error(), `minio: read object "k"`) {
			t.Errorf("err %q does not name the operation", err)
		}
	})
}
