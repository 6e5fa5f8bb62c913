package tests

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
)

// roundTrip puts, gets and lists one pack through x.
func roundTrip(t *testing.T, what string, x *minio.Bucket, name string) {
	t.Helper()
	ctx := ctxT(t)
	key := x.Prefix() + name
	body := []byte("pack through " + what)
	if err := x.Put(ctx, key, body); err != nil {
		t.Fatalf("%s: put: %v", what, err)
	}
	if got, err := x.Get(ctx, key); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("%s: get: %q, %v", what, got, err)
	}
	if keys, err := x.List(ctx, ""); err != nil || !slices.Contains(keys, key) {
		t.Fatalf("%s: list: %v, %v", what, keys, err)
	}
}

// TestS3TLS talks HTTPS to the server through a TLS-terminating proxy with
// a self-signed certificate: trusted through CACertPEM (the endpoint given
// as an https:// URL), refused without it (ErrTLS, one attempt, no HTTP
// request), accepted with InsecureSkipVerify; a scheme that does not match
// the endpoint gives a protocol error that says which scheme to use.
func TestS3TLS(t *testing.T) {
	b, e := freshBucket(t)
	ctx := ctxT(t)
	p := startS3FaultProxy(t, e, true)
	mk := func(mod func(*minio.Config)) *minio.Bucket {
		return s3Bucket(t, e, b.Name(), b.Prefix(), viaProxy(p.hostPort(), true, e, mod))
	}

	trusted := mk(func(c *minio.Config) { c.CACertPEM = p.caPEM() })
	roundTrip(t, "TLS with the CA", trusted, "1700000000000-docs.jsonl.gz")
	if n := p.tlsSeen.Load(); n < 3 || n != p.requests.Load() {
		t.Errorf("%d of %d requests arrived over TLS, want all and at least 3", n, p.requests.Load())
	}
	if !strings.HasPrefix(trusted.ID(), "https://"+p.hostPort()+",") {
		t.Errorf("ID() = %q", trusted.ID())
	}

	before := p.requests.Load()
	_, err := mk(nil).Get(ctx, b.Prefix()+"1700000000000-docs.jsonl.gz")
	wantStage(t, "untrusted certificate", err, engine.StageProtocol, "not trusted")
	if se := (*minio.SettingError)(nil); !errors.As(err, &se) || se.Setting != minio.SettingCACert {
		t.Errorf("untrusted certificate: %v does not blame the CA certificates", err)
	}
	if !errors.Is(err, minio.ErrTLS) {
		t.Errorf("untrusted certificate: %v does not wrap ErrTLS", err)
	}
	if got := p.requests.Load() - before; got != 0 {
		t.Errorf("untrusted certificate: %d HTTP requests reached the proxy, want 0", got)
	}

	roundTrip(t, "TLS with InsecureSkipVerify", mk(func(c *minio.Config) { c.InsecureSkipVerify = true }), "1700000000001-docs.jsonl.gz")

	plain := startS3FaultProxy(t, e, false)
	_, err = s3Bucket(t, e, b.Name(), b.Prefix(), viaProxy(plain.hostPort(), true, e, nil)).Get(ctx, b.Prefix()+"1700000000000-docs.jsonl.gz")
	wantStage(t, "https:// to a plain HTTP endpoint", err, engine.StageProtocol, "plain HTTP")
	if se := (*minio.SettingError)(nil); !errors.As(err, &se) || se.Setting != minio.SettingSecure {
		t.Errorf("https:// to plain HTTP: %v does not blame the scheme", err)
	}
	if !errors.Is(err, minio.ErrTLS) {
		t.Errorf("https:// to plain HTTP: %v does not wrap ErrTLS", err)
	}
	before = p.requests.Load()
	_, err = s3Bucket(t, e, b.Name(), b.Prefix(), viaProxy(p.hostPort(), false, e, nil)).Get(ctx, b.Prefix()+"1700000000000-docs.jsonl.gz")
	wantStage(t, "http:// to an HTTPS endpoint", err, engine.StageProtocol, "scheme")
	if got := p.requests.Load() - before; got != 0 {
		t.Errorf("http:// to HTTPS: %d requests reached the handler, want 0", got)
	}
}

// TestS3VirtualHost sends virtual-host-style requests (Host:
// <bucket>.<domain>:<port>, the key as the path) to a server that serves
// them, with a dialer that resolves the domain and its subdomains to the
// server, and checks every connection went to the bucket's host name.
func TestS3VirtualHost(t *testing.T) {
	e := s3Server(t)
	domain := requireS3Setting(t, e.virtualDomain, "LIVESYNC_TEST_S3_VIRTUAL_DOMAIN",
		"virtual-host requests need a server that serves <bucket>.<domain> (versitygw --virtual-domain, MinIO MINIO_DOMAIN)")
	b, _ := freshBucket(t)
	_, port, err := net.SplitHostPort(e.hostPort())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var dialed []string
	d := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{DisableCompression: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		if h, _, err := net.SplitHostPort(addr); err == nil && (h == domain || strings.HasSuffix(h, "."+domain)) {
			addr = e.hostPort()
		}
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	scheme := "http://"
	if e.secure {
		scheme = "https://"
	}
	vb := s3Bucket(t, e, b.Name(), b.Prefix(), func(c *minio.Config) {
		c.Endpoint, c.PathStyle, c.VirtualHost, c.HTTPTransport = scheme+net.JoinHostPort(domain, port), false, true, tr
	})
	roundTrip(t, "virtual host", vb, "1700000000000-docs.jsonl.gz")
	if _, _, err := vb.Handshake(ctxT(t), minio.HandshakeOptions{NodeID: "vhost", Settings: tweaks(t, false)}); err != nil {
		t.Fatalf("handshake over virtual-host requests: %v", err)
	}
	mu.Lock()
	want := net.JoinHostPort(b.Name()+"."+domain, port)
	if len(dialed) == 0 || slices.ContainsFunc(dialed, func(a string) bool { return a != want }) {
		t.Errorf("dialed %v, want only %s", dialed, want)
	}
	dialed = nil
	mu.Unlock()

	ps := s3Bucket(t, e, b.Name(), b.Prefix(), func(c *minio.Config) {
		c.Endpoint, c.HTTPTransport = scheme+net.JoinHostPort(domain, port), tr
	})
	roundTrip(t, "path style on the same host", ps, "1700000000001-docs.jsonl.gz")
	mu.Lock()
	if want := net.JoinHostPort(domain, port); len(dialed) == 0 || slices.ContainsFunc(dialed, func(a string) bool { return a != want }) {
		t.Errorf("path style dialed %v, want only %s", dialed, want)
	}
	mu.Unlock()
}

// TestS3Region: requests signed for the server's region work, an empty
// Region asks the server (GetBucketLocation), and requests signed for
// another region fail once, with the server's region in the message.
func TestS3Region(t *testing.T) {
	e := s3Server(t)
	region := requireS3Setting(t, e.region, "LIVESYNC_TEST_S3_REGION",
		"the test needs the region the server enforces (versitygw --region, MinIO MINIO_SITE_REGION)")
	b, _ := freshBucket(t)
	ctx := ctxT(t)
	roundTrip(t, "the server's region", b, "1700000000000-docs.jsonl.gz")
	if !strings.HasSuffix(b.ID(), ","+region) {
		t.Errorf("ID() = %q, want the region last", b.ID())
	}
	auto := s3Bucket(t, e, b.Name(), b.Prefix(), func(c *minio.Config) { c.Region = "" })
	roundTrip(t, "a region asked from the server", auto, "1700000000001-docs.jsonl.gz")
	if loc, err := auto.Client().GetBucketLocation(ctx, b.Name()); err != nil || loc != region {
		t.Errorf("GetBucketLocation = %q, %v; want %q", loc, err, region)
	}

	p := startS3FaultProxy(t, e, false)
	const elsewhere = "lsgo-elsewhere-1"
	wrong := s3Bucket(t, e, b.Name(), b.Prefix(), viaProxy(p.hostPort(), false, e, func(c *minio.Config) { c.Region = elsewhere }))
	for name, op := range map[string]func() error{
		"get":  func() error { _, err := wrong.Get(ctx, b.Prefix()+"1700000000000-docs.jsonl.gz"); return err },
		"put":  func() error { return wrong.Put(ctx, b.Prefix()+"1700000000002-docs.jsonl.gz", []byte("x")) },
		"list": func() error { _, err := wrong.List(ctx, ""); return err },
		"handshake": func() error {
			_, _, err := wrong.Handshake(ctx, minio.HandshakeOptions{NodeID: "n", Settings: tweaks(t, false)})
			return err
		},
	} {
		before := p.requests.Load()
		err := op()
		// The server's region is named (quoted by us, or in the server's
		// own words when its answer has no Region element).
		wantStage(t, name+" signed for another region", err, engine.StageAuth, region, `"`+elsewhere+`"`)
		if se := (*minio.SettingError)(nil); !errors.As(err, &se) || se.Setting != minio.SettingRegion || (se.Want != "" && se.Want != region) {
			t.Errorf("%s signed for another region: %v does not blame the region (or names another)", name, err)
		}
		if got := p.requests.Load() - before; got != 1 {
			t.Errorf("%s signed for another region: %d requests, want 1", name, got)
		}
	}
	if _, err := b.GetSyncParameters(ctx); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("a handshake signed for another region wrote the sync parameters: %v", err)
	}
}
