package decorate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journalsync"
)

// Policy is a retry policy. The zero value is the default policy: four
// attempts, waiting DefaultDelay between them, retrying what Retryable
// accepts.
type Policy struct {
	// MaxAttempts is the number of attempts of one operation, the first
	// included. 0 means DefaultMaxAttempts; 1 disables retrying.
	MaxAttempts int
	// Delay returns how long to wait after the attempt-th failed attempt
	// (1-based) before the next one; nil means DefaultDelay.
	Delay func(attempt int) time.Duration
	// Retryable decides which failures are tried again; nil means
	// Retryable. An error marked engine.Permanent and a cancelled context
	// are never retried, whatever it says.
	Retryable func(error) bool
	// OnRetry, if set, is told of every failure about to be retried,
	// before the wait.
	OnRetry func(Attempt)
}

// Attempt describes a failed attempt that is about to be retried.
type Attempt struct {
	Op, Key string        // the operation and the document or object concerned
	N       int           // the failed attempt, 1-based
	Delay   time.Duration // the wait before the next attempt
	Err     error         // the failure
}

// DefaultMaxAttempts is Policy.MaxAttempts when it is 0 (upstream's
// maxAttempts, commonlib MinioStorageAdapter.ts).
const DefaultMaxAttempts = 4

// DefaultDelay is Policy.Delay when it is nil: upstream's
// ConfiguredRetryStrategy delay, 100 ms + attempt × 1 s (1.1 s, 2.1 s,
// 3.1 s).
func DefaultDelay(attempt int) time.Duration {
	return 100*time.Millisecond + time.Duration(attempt)*time.Second
}

// WithDefaults returns p with its zero fields set to the defaults.
func (p Policy) WithDefaults() Policy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.Delay == nil {
		p.Delay = DefaultDelay
	}
	if p.Retryable == nil {
		p.Retryable = Retryable
	}
	return p
}

// Retryable is the default classification: a transport failure
// (*engine.Error with StageTransport, possibly wrapped) is worth another
// attempt, unless it is marked engine.Permanent or wraps a cancelled
// context, engine.ErrNotFound, engine.ErrDecrypt, engine.ErrMalformed or
// engine.ErrUnsupported. Every other error (authentication, decoding, a
// missing document, a plain error) is returned at once.
func Retryable(err error) bool {
	if err == nil || engine.IsPermanent(err) {
		return false
	}
	for _, target := range []error{context.Canceled, context.DeadlineExceeded, engine.ErrNotFound,
		engine.ErrDecrypt, engine.ErrMalformed, engine.ErrUnsupported} {
		if errors.Is(err, target) {
			return false
		}
	}
	var e *engine.Error
	return errors.As(err, &e) && e.Stage == engine.StageTransport
}

// Do runs f until it succeeds, fails with an error the policy does not
// retry, ctx ends, or the policy's attempts have failed; it waits
// p.Delay(n) after the n-th failed attempt. It returns the last attempt's
// error, saying how many attempts were made when they ran out, or
// ctx.Err() wrapped (with the last attempt's error in the message) when
// ctx ended. op and key name the operation in messages.
func Do(ctx context.Context, p Policy, op, key string, f func() error) error {
	p = p.WithDefaults()
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return cancelled(ctx, op, key, err)
		}
		if engine.IsPermanent(err) || !p.Retryable(err) {
			return err
		}
		if attempt >= p.MaxAttempts {
			return gaveUp(err, attempt)
		}
		d := p.Delay(attempt)
		if p.OnRetry != nil {
			p.OnRetry(Attempt{Op: op, Key: key, N: attempt, Delay: d, Err: err})
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

// do1 is Do for an operation with a result.
func do1[T any](ctx context.Context, p Policy, op, key string, f func() (T, error)) (T, error) {
	var v T
	err := Do(ctx, p, op, key, func() error {
		var err error
		v, err = f()
		return err
	})
	return v, err
}

func cancelled(ctx context.Context, op, key string, last error) error {
	if errors.Is(last, ctx.Err()) {
		return last
	}
	return fmt.Errorf("%s %q: %w (the last attempt failed with: %v)", op, key, ctx.Err(), last)
}

// gaveUp adds the number of attempts to a retried error's message.
func gaveUp(err error, attempts int) error {
	var e *engine.Error
	if attempts < 2 || !errors.As(err, &e) {
		return err
	}
	return &engine.Error{Op: e.Op, DocID: e.DocID, Stage: e.Stage, Err: fmt.Errorf("%w; gave up after %d attempts", e.Err, attempts)}
}

// RetrySource retries src's requests by p.
func RetrySource(src engine.ChunkSource, p Policy) engine.ChunkSource {
	return retrySource{ChunkSource: src, p: p}
}

type retrySource struct {
	engine.ChunkSource
	p Policy
}

func (s retrySource) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	return do1(ctx, s.p, "fetch chunks", s.ThrottleKey(), func() (engine.FetchResult, error) { return s.ChunkSource.FetchChunks(ctx, ids) })
}

// RetryObjects retries a journal's object requests by p. Put is safe to
// retry: an attempt whose answer was lost left the same body, which Put
// accepts.
func RetryObjects(o journalsync.Objects, p Policy) journalsync.Objects {
	return retryObjects{Objects: o, p: p}
}

type retryObjects struct {
	journalsync.Objects
	p Policy
}

func (o retryObjects) List(ctx context.Context, after string) ([]string, error) {
	return do1(ctx, o.p, "list objects", after, func() ([]string, error) { return o.Objects.List(ctx, after) })
}

func (o retryObjects) Get(ctx context.Context, key string) ([]byte, error) {
	return do1(ctx, o.p, "read object", key, func() ([]byte, error) { return o.Objects.Get(ctx, key) })
}

func (o retryObjects) Put(ctx context.Context, key string, body []byte) error {
	return Do(ctx, o.p, "write object", key, func() error { return o.Objects.Put(ctx, key, body) })
}

// RetryEndpoint retries an endpoint's requests by p. Every Endpoint
// request is safe to repeat (BulkDocs writes with new_edits=false).
func RetryEndpoint(ep engine.Endpoint, p Policy) engine.Endpoint {
	return retryEndpoint{ep: ep, p: p}
}

type retryEndpoint struct {
	ep engine.Endpoint
	p  Policy
}

func (e retryEndpoint) Info(ctx context.Context) (engine.EndpointInfo, error) {
	return do1(ctx, e.p, "info", "", func() (engine.EndpointInfo, error) { return e.ep.Info(ctx) })
}

func (e retryEndpoint) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	return do1(ctx, e.p, "changes", req.Since, func() (engine.ChangesPage, error) { return e.ep.Changes(ctx, req) })
}

func (e retryEndpoint) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	return do1(ctx, e.p, "revs diff", "", func() (map[string][]string, error) { return e.ep.RevsDiff(ctx, revs) })
}

func (e retryEndpoint) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	return do1(ctx, e.p, "bulk get", "", func() ([]json.RawMessage, error) { return e.ep.BulkGet(ctx, revs) })
}

func (e retryEndpoint) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	return do1(ctx, e.p, "bulk docs", "", func() ([]engine.BulkDocResult, error) { return e.ep.BulkDocs(ctx, docs) })
}

func (e retryEndpoint) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	return do1(ctx, e.p, "read local document", id, func() (json.RawMessage, error) { return e.ep.GetLocal(ctx, id) })
}

func (e retryEndpoint) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	return Do(ctx, e.p, "write local document", id, func() error { return e.ep.PutLocal(ctx, id, doc) })
}
