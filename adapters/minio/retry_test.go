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
)

func ms(v ...int) []time.Duration {
	d := make([]time.Duration, len(v))
	for i, x := range v {
		d[i] = time.Duration(x) * time.Millisecond
	}
	return d
}

// TestRetrySchedule checks the attempts of one operation at exact virtual
// times: upstream's ConfiguredRetryStrategy(4, attempt => 100 + attempt *
// 1000) waits 1.1 s, 2.1 s and 3.1 s between four attempts, and only
// transient (StageTransport) errors are retried.
func TestRetrySchedule(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retry     Retry
		errs      []error // returned by successive attempts; nil after the list
		wantAt    []time.Duration
		wantErr   error // errors.Is target; nil means success
		wantStage engine.Stage
		wantMsg   string
	}{
		{name: "success at once", wantAt: ms(0)},
		{name: "one 503 then success", errs: []error{errTransport}, wantAt: ms(0, 1100)},
		{name: "three 503s then success", errs: []error{errTransport, errTransport, errTransport}, wantAt: ms(0, 1100, 3200, 6300)},
		{name: "four 503s: gives up", errs: []error{errTransport, errTransport, errTransport, errTransport, nil},
			wantAt: ms(0, 1100, 3200, 6300), wantErr: errTransport.Err, wantStage: engine.StageTransport, wantMsg: "gave up after 4 attempts"},
		{name: "wrapped transport error is retried", errs: []error{fmt.Errorf("list: %w", errTransport)}, wantAt: ms(0, 1100)},
		{name: "auth: one attempt", errs: []error{errAuth, nil}, wantAt: ms(0), wantErr: errAuth, wantStage: engine.StageAuth},
		{name: "no such key: one attempt", errs: []error{errMissing, nil}, wantAt: ms(0), wantErr: engine.ErrNotFound, wantStage: engine.StageStorage},
		{name: "no such bucket: one attempt", errs: []error{errNoBucket, nil}, wantAt: ms(0), wantErr: ErrNoBucket, wantStage: engine.StageStorage},
		{name: "plain error: one attempt", errs: []error{errors.New("boom"), nil}, wantAt: ms(0), wantMsg: "boom"},
		{name: "transient then auth", errs: []error{errTransport, errAuth, nil}, wantAt: ms(0, 1100), wantErr: errAuth, wantStage: engine.StageAuth},
		{name: "MaxAttempts 1 disables retrying", retry: Retry{MaxAttempts: 1}, errs: []error{errTransport, nil},
			wantAt: ms(0), wantErr: errTransport, wantStage: engine.StageTransport},
		{name: "custom delay", retry: Retry{MaxAttempts: 3, Delay: func(n int) time.Duration { return time.Duration(n) * 10 * time.Millisecond }},
			errs: []error{errTransport, errTransport, errTransport, nil}, wantAt: ms(0, 10, 30), wantErr: errTransport.Err, wantMsg: "gave up after 3 attempts"},
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
				switch {
				case tc.wantErr == nil && tc.wantMsg == "":
					if err != nil {
						t.Fatalf("err = %v, want success", err)
					}
					return
				case err == nil:
					t.Fatal("err = nil, want an error")
				case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
					t.Errorf("err = %v, want one wrapping %v", err, tc.wantErr)
				}
				if tc.wantStage != "" {
					var e *engine.Error
					if !errors.As(err, &e) || e.Stage != tc.wantStage {
						t.Errorf("err = %v, want stage %s", err, tc.wantStage)
					}
				}
				if !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("err = %q, want it to contain %q", err, tc.wantMsg)
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

// TestRetryContext: a context that ends during a wait stops the loop at
// that instant with ctx.Err() (wrapped), and a cancelled context is never
// retried.
func TestRetryContext(t *testing.T) {
	t.Run("cancelled while waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(500*time.Millisecond, cancel)
			start := time.Now()
			calls := 0
			err := retry(ctx, Retry{}.withDefaults(), nil, "read object", "k", func() error { calls++; return errTransport })
			if !errors.Is(err, context.Canceled) || calls != 1 || time.Since(start) != 500*time.Millisecond {
				t.Fatalf("err %v after %d calls at %v; want context.Canceled after 1 call at 500ms", err, calls, time.Since(start))
			}
			if !strings.Contains(err.Error(), "SlowDown") {
				t.Errorf("err %q does not say what the last attempt met", err)
			}
		})
	})
	t.Run("deadline during the second wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			start := time.Now()
			var at []time.Duration
			err := retry(ctx, Retry{}.withDefaults(), nil, "read object", "k", func() error { at = append(at, time.Since(start)); return errTransport })
			if !errors.Is(err, context.DeadlineExceeded) || fmt.Sprint(at) != fmt.Sprint(ms(0, 1100)) || time.Since(start) != 2*time.Second {
				t.Fatalf("err %v, attempts at %v, returned at %v; want DeadlineExceeded, [0 1.1s], 2s", err, at, time.Since(start))
			}
		})
	})
	t.Run("an attempt that fails because ctx ended is not retried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			calls := 0
			err := retry(ctx, Retry{}.withDefaults(), nil, "read object", "k", func() error {
				calls++
				cancel()
				return errTransport // what a request cut by the cancel looks like
			})
			if !errors.Is(err, context.Canceled) || calls != 1 {
				t.Fatalf("err %v after %d calls; want context.Canceled after 1", err, calls)
			}
		})
	})
}
