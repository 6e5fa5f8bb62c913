package minio

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	minio "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// Config names the bucket and how to reach it. Endpoint and Bucket are
// required; the zero value of every other field is the documented
// default.
type Config struct {
	// Endpoint is the S3 server: "host[:port]" (Secure chooses http or
	// https) or a URL "http://host[:port]" / "https://host[:port]" whose
	// scheme sets Secure. A URL has no user info, path, query or fragment.
	// AWS S3 is "s3.amazonaws.com" or a regional "s3.<region>.amazonaws.com".
	Endpoint string
	// Bucket is the bucket name. The bucket must exist: the adapter never
	// creates one.
	Bucket string
	// Prefix is the LiveSync bucket prefix (upstream's bucketPrefix, e.g.
	// "my-vault/"); it is prepended to every key. Empty means the bucket
	// root.
	Prefix    string
	AccessKey string
	SecretKey string
	// Region is the region requests are signed for. Empty means: ask the
	// server once per bucket (GetBucketLocation, which needs
	// s3:GetBucketLocation) and use its answer. A server that enforces
	// its region rejects requests signed for another one (StageAuth, the
	// message names the expected region).
	Region string
	// Secure selects HTTPS for a "host[:port]" Endpoint. With a URL
	// Endpoint the scheme decides, and Secure must not contradict it.
	Secure bool
	// PathStyle forces path-style requests (https://host/bucket/key,
	// needed by most self-hosted servers); VirtualHost forces
	// virtual-host-style requests (https://bucket.host/key; the endpoint
	// must be a DNS name and the server must serve bucket subdomains).
	// With neither, minio-go picks: virtual host for AWS S3 and a few
	// other clouds, path style for every other endpoint. Setting both is
	// an error.
	PathStyle   bool
	VirtualHost bool
	// CACertPEM are PEM certificates trusted in addition to the system's
	// roots, for a server with a self-signed certificate or a private CA.
	CACertPEM []byte
	// InsecureSkipVerify disables the verification of the server's TLS
	// certificate. It makes the connection open to interception; use it
	// only for tests, and prefer CACertPEM.
	InsecureSkipVerify bool
	// HTTPTransport replaces minio-go's default transport when not nil
	// (a custom dialer, a proxy, the js/wasm fetch transport). With
	// CACertPEM or InsecureSkipVerify it must be an *http.Transport, which
	// is cloned and given the TLS settings.
	HTTPTransport http.RoundTripper
	// Retry is the retry policy of every operation.
	Retry Retry
	// Logger receives a warning for each retried attempt (keys op, key,
	// attempt, stage, err); nil means discard. Nothing secret is logged.
	Logger *slog.Logger
	// Now returns the time used for pack keys; time.Now when nil.
	Now func() time.Time
}

// Validate reports whether c can be used: Endpoint and Bucket are set and
// well formed, and no two settings contradict each other.
func (c Config) Validate() error {
	if _, _, err := c.endpoint(); err != nil {
		return err
	}
	if c.Bucket == "" {
		return settingErr(SettingBucket, "the bucket name is required")
	}
	if err := s3utils.CheckValidBucketName(c.Bucket); err != nil {
		return settingErr(SettingBucket, "bucket name %q: %v", c.Bucket, err)
	}
	if c.PathStyle && c.VirtualHost {
		return settingErr(SettingVirtualHost, "path-style and virtual-host-style addressing are exclusive")
	}
	if c.VirtualHost {
		host, _, _ := c.endpoint()
		h := host
		if sh, _, err := net.SplitHostPort(host); err == nil {
			h = sh
		}
		if net.ParseIP(strings.Trim(h, "[]")) != nil {
			return settingErr(SettingVirtualHost, "virtual-host-style addressing needs a DNS name as the endpoint (bucket.%s is not a host name); use path-style addressing for an IP address", h)
		}
		if strings.Contains(c.Bucket, ".") {
			// The bucket becomes a DNS label; a dotted bucket breaks
			// wildcard certificates.
			return settingErr(SettingVirtualHost, "virtual-host-style addressing cannot reach bucket %q, which contains dots; use path-style addressing", c.Bucket)
		}
	}
	if c.HTTPTransport != nil && c.tlsOptions() {
		if _, ok := c.HTTPTransport.(*http.Transport); !ok {
			return settingErr(SettingTransport, "extra CA certificates and skipping TLS verification need the HTTP transport to be the standard library's (or none); put the TLS settings in your own transport instead")
		}
	}
	if len(c.CACertPEM) > 0 && !x509.NewCertPool().AppendCertsFromPEM(c.CACertPEM) {
		return settingErr(SettingCACert, "the CA certificates hold no PEM certificate")
	}
	if len(c.CACertPEM) > 0 || c.InsecureSkipVerify {
		if _, secure, _ := c.endpoint(); !secure {
			return settingErr(SettingSecure, "CA certificates and skipping TLS verification apply to HTTPS, but the endpoint is plain HTTP")
		}
	}
	return c.Retry.validate()
}

func (c Config) tlsOptions() bool { return len(c.CACertPEM) > 0 || c.InsecureSkipVerify }

// endpoint parses Endpoint into minio-go's host[:port] and the scheme.
func (c Config) endpoint() (host string, secure bool, err error) {
	e := strings.TrimSpace(c.Endpoint)
	if e == "" {
		return "", false, settingErr(SettingEndpoint, "the endpoint is required")
	}
	if !strings.Contains(e, "://") {
		if strings.ContainsAny(e, "/?#@") {
			return "", false, settingErr(SettingEndpoint, "endpoint %q: want host[:port] or http(s)://host[:port]", redactEndpoint(e))
		}
		if _, err := url.Parse("http://" + e); err != nil {
			return "", false, settingErr(SettingEndpoint, "endpoint %q: want host[:port] or http(s)://host[:port]", redactEndpoint(e))
		}
		return e, c.Secure, nil
	}
	u, err := url.Parse(e)
	if err != nil {
		return "", false, settingErr(SettingEndpoint, "endpoint %q is not a URL: want host[:port] or http(s)://host[:port]", redactEndpoint(e))
	}
	switch {
	case u.User != nil:
		return "", false, settingErr(SettingEndpoint, "the endpoint URL holds credentials: give the access and secret keys as settings of their own, not in the endpoint")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", false, settingErr(SettingEndpoint, "endpoint scheme %q: want http or https", u.Scheme)
	case u.Host == "":
		return "", false, settingErr(SettingEndpoint, "endpoint %q has no host", e)
	case strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "":
		return "", false, settingErr(SettingEndpoint, "endpoint %q: an S3 endpoint has no path or query; give the bucket and the prefix as settings of their own", e)
	case u.Scheme == "http" && c.Secure:
		return "", false, settingErr(SettingSecure, "endpoint %q is plain HTTP but HTTPS is asked for", e)
	}
	return u.Host, u.Scheme == "https", nil
}

// redactEndpoint drops anything before an "@" so that a malformed
// endpoint with credentials in it is not echoed in an error.
func redactEndpoint(e string) string {
	if i := strings.LastIndex(e, "@"); i >= 0 {
		return "…@" + e[i+1:]
	}
	return e
}

// lookup maps PathStyle/VirtualHost to minio-go's bucket lookup.
func (c Config) lookup() minio.BucketLookupType {
	switch {
	case c.PathStyle:
		return minio.BucketLookupPath
	case c.VirtualHost:
		return minio.BucketLookupDNS
	}
	return minio.BucketLookupAuto
}

// transport returns the RoundTripper for minio-go: nil (minio-go's
// default) unless HTTPTransport or TLS options are set.
func (c Config) transport(secure bool) (http.RoundTripper, error) {
	if !c.tlsOptions() {
		return c.HTTPTransport, nil
	}
	var tr *http.Transport
	if c.HTTPTransport != nil {
		tr = c.HTTPTransport.(*http.Transport).Clone()
	} else {
		var err error
		if tr, err = minio.DefaultTransport(secure); err != nil {
			return nil, err
		}
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if tr.TLSClientConfig != nil {
		tc = tr.TLSClientConfig.Clone()
		tc.MinVersion = max(tc.MinVersion, tls.VersionTLS12)
	}
	if len(c.CACertPEM) > 0 {
		pool := tc.RootCAs
		if pool == nil {
			if pool, _ = x509.SystemCertPool(); pool == nil {
				pool = x509.NewCertPool()
			}
		} else {
			pool = pool.Clone()
		}
		pool.AppendCertsFromPEM(c.CACertPEM)
		tc.RootCAs = pool
	}
	tc.InsecureSkipVerify = c.InsecureSkipVerify
	tr.TLSClientConfig = tc
	return tr, nil
}

// Retry is the retry policy of a Bucket's operations. Only transient
// failures are retried (*engine.Error with StageTransport: network
// errors, HTTP 5xx, 408, 429, and the S3 codes SlowDown, RequestTimeout,
// Throttling, InternalError, ServiceUnavailable and their kin); never
// authentication failures, a missing bucket or object, a TLS
// misconfiguration, or a cancelled context. minio-go's own retry loop is
// switched off (MaxRetries 1), so this is the whole policy, with one
// remnant: after a transient failure minio-go v7.4.1 still sleeps a random
// 0–200 ms (its first backoff step) before returning it, so the real gap
// between two attempts is Delay(n) plus up to 200 ms.
type Retry struct {
	// MaxAttempts is the number of attempts of one operation, the first
	// included. 0 means 4 (upstream's maxAttempts, commonlib
	// MinioStorageAdapter.ts); 1 disables retrying.
	MaxAttempts int
	// Delay returns how long to wait after the attempt-th failed attempt
	// (1-based) before the next one. nil means upstream's
	// ConfiguredRetryStrategy delay, 100 ms + attempt × 1 s: 1.1 s, 2.1 s,
	// 3.1 s.
	Delay func(attempt int) time.Duration
}

// DefaultMaxAttempts is Retry.MaxAttempts when it is 0.
const DefaultMaxAttempts = 4

// DefaultDelay is Retry.Delay when it is nil: 100 ms + attempt × 1 s.
func DefaultDelay(attempt int) time.Duration {
	return 100*time.Millisecond + time.Duration(attempt)*time.Second
}

func (r Retry) validate() error {
	if r.MaxAttempts < 0 {
		return settingErr(SettingRetry, "the retry policy's maximum number of attempts must not be negative")
	}
	return nil
}

func (r Retry) withDefaults() Retry {
	if r.MaxAttempts == 0 {
		r.MaxAttempts = DefaultMaxAttempts
	}
	if r.Delay == nil {
		r.Delay = DefaultDelay
	}
	return r
}
