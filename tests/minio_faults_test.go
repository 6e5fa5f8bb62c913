package tests

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
)

// regionOrDefault is the region the proxied tests sign for: the server's
// when known (so minio-go sends no GetBucketLocation request and every
// request the proxy counts is an attempt of the operation), else
// us-east-1, which servers without a region accept.
func regionOrDefault(e s3Env) string {
	if e.region != "" {
		return e.region
	}
	return "us-east-1"
}

// viaProxy points a bucket's Config at a proxy in front of the server.
func viaProxy(hostPort string, useTLS bool, e s3Env, mod func(*minio.Config)) func(*minio.Config) {
	return func(c *minio.Config) {
		c.Endpoint, c.Secure, c.CACertPEM = "http://"+hostPort, false, nil
		if useTLS {
			c.Endpoint = "https://" + hostPort
		}
		c.Region = regionOrDefault(e)
		fastRetry(c)
		if mod != nil {
			mod(c)
		}
	}
}

func wantStage(t *testing.T, what string, err error, stage engine.Stage, contains ...string) {
	t.Helper()
	var e *engine.Error
	if !errors.As(err, &e) || e.Stage != stage {
		t.Fatalf("%s: %v, want a %s-stage *engine.Error", what, err, stage)
	}
	for _, s := range contains {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: message %q does not contain %q", what, err, s)
		}
	}
}

// TestS3RetryTransient runs operations through a real HTTP proxy that
// answers 503 SlowDown to the first N requests: with N < 4 they succeed
// after exactly N+1 requests, with N >= 4 they fail after exactly 4 with a
// transport error that says so, and nothing is written.
func TestS3RetryTransient(t *testing.T) {
	b, e := freshBucket(t)
	ctx := ctxT(t)
	p := startS3FaultProxy(t, e, false)
	var mu sync.Mutex
	var delays []int
	pb := s3Bucket(t, e, b.Name(), b.Prefix(), viaProxy(p.hostPort(), false, e, func(c *minio.Config) {
		c.Retry.Delay = func(attempt int) time.Duration {
			mu.Lock()
			delays = append(delays, attempt)
			mu.Unlock()
			return time.Millisecond
		}
	}))
	body := []byte("a pack body")
	const t0 = 1700000000000
	key := journal.PackKey(b.Prefix(), t0)
	var round int64
	ops := []struct {
		name string
		f    func() error
	}{
		// Put is create-only: every round creates a key of its own.
		{"put", func() error { return pb.Put(ctx, journal.PackKey(b.Prefix(), t0+round), body) }},
		{"get", func() error {
			got, err := pb.Get(ctx, key)
			if err == nil && !bytes.Equal(got, body) {
				return fmt.Errorf("got %q", got)
			}
			return err
		}},
		{"list", func() error {
			keys, err := pb.List(ctx, "")
			if want := []string{key, journal.PackKey(b.Prefix(), t0+1), journal.PackKey(b.Prefix(), t0+2), journal.PackKey(b.Prefix(), t0+3)}; err == nil && !slices.Equal(keys, want) {
				return fmt.Errorf("listed %v", keys)
			}
			return err
		}},
	}
	for _, op := range ops {
		for n := range int64(4) {
			round = n
			p.fail.Store(n)
			before := p.requests.Load()
			mu.Lock()
			delays = nil
			mu.Unlock()
			if err := op.f(); err != nil {
				t.Fatalf("%s after %d 503s: %v", op.name, n, err)
			}
			if got := p.requests.Load() - before; got != n+1 {
				t.Errorf("%s after %d 503s: %d requests, want %d", op.name, n, got, n+1)
			}
			mu.Lock()
			if want := []int{1, 2, 3}[:n]; !slices.Equal(delays, want) {
				t.Errorf("%s after %d 503s: waited after attempts %v, want %v", op.name, n, delays, want)
			}
			mu.Unlock()
		}
	}

	// Four 503s: the attempts run out.
	other := journal.PackKey(b.Prefix(), t0+4)
	p.fail.Store(100)
	before := p.requests.Load()
	err := pb.Put(ctx, other, body)
	wantStage(t, "put through four 503s", err, engine.StageTransport, "gave up after 4 attempts", "SlowDown", "HTTP 503")
	if got := p.requests.Load() - before; got != 4 {
		t.Errorf("put through 503s: %d requests, want 4", got)
	}
	p.fail.Store(0)
	if _, err := b.Get(ctx, other); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the refused put left an object: %v", err)
	}
}

// TestS3PermanentErrors: wrong credentials and a missing bucket fail
// after one request with a message that says what to do; a missing key is
// engine.ErrNotFound after one request.
func TestS3PermanentErrors(t *testing.T) {
	b, e := freshBucket(t)
	ctx := ctxT(t)
	p := startS3FaultProxy(t, e, false)
	key := b.Prefix() + "1700000000000-docs.jsonl.gz"
	if err := b.Put(ctx, key, []byte("x")); err != nil {
		t.Fatal(err)
	}
	badSecret := s3Bucket(t, e, b.Name(), b.Prefix(), viaProxy(p.hostPort(), false, e, func(c *minio.Config) { c.SecretKey = "wrong-" + e.secret }))
	badAccess := s3Bucket(t, e, b.Name(), b.Prefix(), viaProxy(p.hostPort(), false, e, func(c *minio.Config) { c.AccessKey = "lsgo-nobody" }))
	missing := newBucketName(e) + "-missing"
	noBucket := s3Bucket(t, e, missing, b.Prefix(), viaProxy(p.hostPort(), false, e, nil))
	good := s3Bucket(t, e, b.Name(), b.Prefix(), viaProxy(p.hostPort(), false, e, nil))

	type opFunc func(*minio.Bucket) error
	ops := map[string]opFunc{
		"get": func(x *minio.Bucket) error {
			_, err := x.Get(ctx, x.Prefix()+"1700000000000-docs.jsonl.gz")
			return err
		},
		"put":  func(x *minio.Bucket) error { return x.Put(ctx, x.Prefix()+"1700000000002-docs.jsonl.gz", []byte("y")) },
		"list": func(x *minio.Bucket) error { _, err := x.List(ctx, ""); return err },
	}
	for name, op := range ops {
		for _, tc := range []struct {
			who   string
			b     *minio.Bucket
			check func(error)
		}{
			{"wrong secret", badSecret, func(err error) {
				wantStage(t, name+" with a wrong secret", err, engine.StageAuth, "check the credentials")
			}},
			{"unknown access key", badAccess, func(err error) {
				wantStage(t, name+" with an unknown access key", err, engine.StageAuth, "check the credentials")
			}},
			{"missing bucket", noBucket, func(err error) {
				wantStage(t, name+" on a missing bucket", err, engine.StageStorage, fmt.Sprintf("bucket %q does not exist", missing), "create it")
				if !errors.Is(err, minio.ErrNoBucket) || !errors.Is(err, engine.ErrNotFound) {
					t.Errorf("%s on a missing bucket: %v does not wrap ErrNoBucket and ErrNotFound", name, err)
				}
			}},
		} {
			before := p.requests.Load()
			err := op(tc.b)
			tc.check(err)
			if strings.Contains(err.Error(), e.secret) {
				t.Errorf("%s, %s: the message contains the secret key", name, tc.who)
			}
			if got := p.requests.Load() - before; got != 1 {
				t.Errorf("%s, %s: %d requests, want 1 (no retry)", name, tc.who, got)
			}
		}
	}
	before := p.requests.Load()
	if _, err := good.Get(ctx, b.Prefix()+"1700000000009-docs.jsonl.gz"); !errors.Is(err, engine.ErrNotFound) || errors.Is(err, minio.ErrNoBucket) {
		t.Errorf("missing key: %v, want ErrNotFound only", err)
	}
	if got := p.requests.Load() - before; got != 1 {
		t.Errorf("missing key: %d requests, want 1", got)
	}
	if keys := allObjects(t, b); !slices.Equal(keys, []string{key}) {
		t.Errorf("objects after the refused writes: %v, want only %s", keys, key)
	}
}

// TestS3InterruptedPut cuts the TCP connection in the middle of a large
// PutObject: no attempt leaves a partial object behind (the key is absent
// from listings and reads), and when only the first connection is cut the
// retry stores the whole body.
func TestS3InterruptedPut(t *testing.T) {
	b, e := freshBucket(t)
	ctx := ctxT(t)
	body := make([]byte, 8<<20)
	_, _ = rand.Read(body)
	key := b.Prefix() + "1700000000000-docs.jsonl.gz"
	through := func(cut *s3CutProxy) *minio.Bucket {
		return s3Bucket(t, e, b.Name(), b.Prefix(), viaProxy(cut.hostPort(), e.secure, e, func(c *minio.Config) {
			// TLS passes through the TCP proxy; the certificate names the
			// server, not 127.0.0.1:<proxy port> (test only).
			c.InsecureSkipVerify = e.secure
		}))
	}

	always := startS3CutProxy(t, e, 1<<20, -1)
	err := through(always).Put(ctx, key, body)
	wantStage(t, "put cut after 1 MiB", err, engine.StageTransport, "gave up after 4 attempts")
	if got := always.cutDone.Load(); got != 4 {
		t.Errorf("%d connections cut, want 4 (one per attempt)", got)
	}
	if keys, err := b.List(ctx, ""); err != nil || len(keys) != 0 {
		t.Fatalf("List after the cut uploads: %v, %v; want no pack", keys, err)
	}
	if all := allObjects(t, b); len(all) != 0 {
		t.Fatalf("objects after the cut uploads: %v, want none", all)
	}
	if _, err := b.Get(ctx, key); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Get after the cut uploads: %v, want ErrNotFound", err)
	}

	once := startS3CutProxy(t, e, 1<<20, 1)
	if err := through(once).Put(ctx, key, body); err != nil {
		t.Fatalf("put with the first connection cut: %v", err)
	}
	if got := once.cutDone.Load(); got != 1 {
		t.Errorf("%d connections cut, want 1", got)
	}
	got, err := b.Get(ctx, key)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("Get after the retried put: %d bytes, %v; want the %d bytes sent", len(got), err, len(body))
	}
	if keys, err := b.List(ctx, ""); err != nil || !slices.Equal(keys, []string{key}) {
		t.Fatalf("List: %v, %v", keys, err)
	}
}
