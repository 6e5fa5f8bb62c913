package decorate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
)

var (
	errTransport = &engine.Error{Op: "read object", DocID: "k", Stage: engine.StageTransport, Err: errors.New("the server is unavailable or busy (S3 SlowDown, HTTP 503)")}
	errAuth      = &engine.Error{Op: "read object", DocID: "k", Stage: engine.StageAuth, Err: errors.New("check the credentials")}
	errMissing   = &engine.Error{Op: "read object", DocID: "k", Stage: engine.StageStorage, Err: fmt.Errorf("no such object: %w", engine.ErrNotFound)}
	errDecode    = &engine.Error{Op: "read object", DocID: "k", Stage: engine.StageTransport, Err: fmt.Errorf("torn: %w", engine.ErrMalformed)}
)

func ms(v ...int) []time.Duration {
	d := make([]time.Duration, len(v))
	for i, x := range v {
		d[i] = time.Duration(x) * time.Millisecond
	}
	return d
}

// TestDoSchedule checks the attempts of one operation at exact virtual
// times: the default policy waits 1.1 s, 2.1 s and 3.1 s between four
// attempts, and only retryable errors are retried.
func TestDoSchedule(t *testing.T) {
	for _, tc := range []struct {
		name      string
		p         Policy
		errs      []error // returned by successive attempts; nil after the list
		wantAt    []time.Duration
		wantErr   error // errors.Is target; nil means success
		wantStage engine.Stage
		wantMsg   string
	}{
		{name: "success at once", wantAt: ms(0)},
		{name: "three 503s then success", errs: []error{errTransport, errTransport, errTransport}, wantAt: ms(0, 1100, 3200, 6300)},
		{name: "four 503s: gives up", errs: []error{errTransport, errTransport, errTransport, errTransport, nil},
			wantAt: ms(0, 1100, 3200, 6300), wantErr: errTransport.Err, wantStage: engine.StageTransport, wantMsg: "gave up after 4 attempts"},
		{name: "wrapped transport error is retried", errs: []error{fmt.Errorf("list: %w", errTransport)}, wantAt: ms(0, 1100)},
		{name: "permanent transport error: one attempt", errs: []error{engine.Permanent(errTransport), nil}, wantAt: ms(0), wantErr: errTransport},
		{name: "auth: one attempt", errs: []error{errAuth, nil}, wantAt: ms(0), wantErr: errAuth, wantStage: engine.StageAuth},
		{name: "not found: one attempt", errs: []error{errMissing, nil}, wantAt: ms(0), wantErr: engine.ErrNotFound},
		{name: "malformed in transport: one attempt", errs: []error{errDecode, nil}, wantAt: ms(0), wantErr: engine.ErrMalformed},
		{name: "plain error: one attempt", errs: []error{errors.New("boom"), nil}, wantAt: ms(0), wantMsg: "boom"},
		{name: "transient then auth", errs: []error{errTransport, errAuth, nil}, wantAt: ms(0, 1100), wantErr: errAuth},
		{name: "MaxAttempts 1 disables retrying", p: Policy{MaxAttempts: 1}, errs: []error{errTransport, nil}, wantAt: ms(0), wantErr: errTransport},
		{name: "custom delay", p: Policy{MaxAttempts: 3, Delay: func(n int) time.Duration { return time.Duration(n) * 10 * time.Millisecond }},
			errs: []error{errTransport, errTransport, errTransport, nil}, wantAt: ms(0, 10, 30), wantErr: errTransport.Err, wantMsg: "gave up after 3 attempts"},
		{name: "custom classification", p: Policy{Retryable: func(err error) bool { return err.Error() == "boom" }},
			errs: []error{errors.New("boom"), errTransport}, wantAt: ms(0, 1100), wantErr: errTransport},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var at []time.Duration
				err := Do(t.Context(), tc.p, "read object", "k", func() error {
					at = append(at, time.Since(start))
					if i := len(at) - 1; i < len(tc.errs) {
						return tc.errs[i]
					}
					return nil
				})
				if fmt.Sprint(at) != fmt.Sprint(tc.wantAt) {
					t.Errorf("attempts at %v, want %v", at, tc.wantAt)
				}
				checkErr(t, err, tc.wantErr, tc.wantStage, tc.wantMsg)
			})
		})
	}
}

func checkErr(t *testing.T, err, want error, stage engine.Stage, msg string) {
	t.Helper()
	switch {
	case want == nil && msg == "":
		if err != nil {
			t.Fatalf("err = %v, want success", err)
		}
		return
	case err == nil:
		t.Fatal("err = nil, want an error")
	case want != nil && !errors.Is(err, want):
		t.Errorf("err = %v, want one wrapping %v", err, want)
	}
	if stage != "" {
		var e *engine.Error
		if !errors.As(err, &e) || e.Stage != stage {
			t.Errorf("err = %v, want stage %s", err, stage)
		}
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("err = %q, want it to contain %q", err, msg)
	}
}

// TestDoContext: a context that ends during a wait stops the loop at that
// instant with ctx.Err() (wrapped), and a cancelled context is never
// retried.
func TestDoContext(t *testing.T) {
	t.Run("cancelled while waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(500*time.Millisecond, cancel)
			start := time.Now()
			calls := 0
			err := Do(ctx, Policy{}, "read object", "k", func() error { calls++; return errTransport })
			if !errors.Is(err, context.Canceled) || calls != 1 || time.Since(start) != 500*time.Millisecond {
				t.Fatalf("err %v after %d calls at %v; want context.Canceled after 1 call at 500ms", err, calls, time.Since(start))
			}
			if !strings.Contains(err.Error(), "SlowDown") {
				t.Errorf("err %q does not say what the last attempt met", err)
			}
		})
	})
	t.Run("an attempt that fails because ctx ended is not retried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			calls := 0
			err := Do(ctx, Policy{}, "read object", "k", func() error { calls++; cancel(); return errTransport })
			if !errors.Is(err, context.Canceled) || calls != 1 {
				t.Fatalf("err %v after %d calls; want context.Canceled after 1", err, calls)
			}
		})
	})
	t.Run("OnRetry sees each retried failure", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var seen []Attempt
			p := Policy{MaxAttempts: 3, OnRetry: func(a Attempt) { seen = append(seen, a) }}
			_ = Do(t.Context(), p, "read object", "k", func() error { return errTransport })
			if len(seen) != 2 || seen[0].N != 1 || seen[1].Delay != 2100*time.Millisecond || seen[0].Key != "k" {
				t.Fatalf("OnRetry saw %+v", seen)
			}
		})
	})
}

// flaky fails its first n calls of each method with err.
type flaky struct {
	mu    sync.Mutex
	n     int
	err   error
	calls map[string]int
}

func (f *flaky) call(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[op]++
	if f.calls[op] <= f.n {
		return f.err
	}
	return nil
}

// TestRetryDecorators: each decorated method is retried by the policy.
func TestRetryDecorators(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		src := &fakeSource{key: "k", have: map[string]string{"h:a": "A"}, fl: &flaky{n: 2, err: errTransport}}
		res, err := RetrySource(src, Policy{}).FetchChunks(ctx, []string{"h:a", "h:b"})
		if err != nil || len(res.Found) != 1 || len(res.Missing) != 1 || src.fl.calls["fetch"] != 3 {
			t.Fatalf("source: %+v, %v after %d calls", res, err, src.fl.calls["fetch"])
		}
		// The first call of each method fails. The hooks run one call at
		// a time here: Put's and List's under the bucket's lock, Get's
		// before it.
		obj := enginetest.NewMemObjects("", "fake")
		calls := map[string]int{}
		failFirst := func(op string) error {
			if calls[op]++; calls[op] == 1 {
				return errTransport
			}
			return nil
		}
		obj.FailPut(func(string) error { return failFirst("put") })
		obj.FailList(func(int) error { return failFirst("list") })
		obj.OnGet(func(key string) { obj.FailGet(key, failFirst("get")) })
		o := RetryObjects(obj, Policy{})
		if err := o.Put(ctx, "p1", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if b, err := o.Get(ctx, "p1"); err != nil || string(b) != "x" {
			t.Fatalf("get: %q %v", b, err)
		}
		if keys, err := o.List(ctx, ""); err != nil || len(keys) != 1 {
			t.Fatalf("list: %v %v", keys, err)
		}
		for _, op := range []string{"put", "get", "list"} {
			if calls[op] != 2 {
				t.Errorf("%s: %d calls, want 2", op, calls[op])
			}
		}
		ep := &fakeEndpoint{fl: &flaky{n: 1, err: errTransport}}
		exerciseEndpoint(t, RetryEndpoint(ep, Policy{}))
		for op, n := range ep.fl.calls {
			if n != 2 {
				t.Errorf("endpoint %s: %d calls, want 2", op, n)
			}
		}
		if len(ep.fl.calls) != 7 {
			t.Errorf("endpoint methods called: %v", ep.fl.calls)
		}
	})
}
