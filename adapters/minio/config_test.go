package minio

import (
	"crypto/tls"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestConfigEndpoint(t *testing.T) {
	for _, tc := range []struct {
		endpoint   string
		secure     bool
		wantHost   string
		wantSecure bool
		wantErr    string
	}{
		{endpoint: "127.0.0.1:9000", wantHost: "127.0.0.1:9000"},
		{endpoint: "minio.example:9000", secure: true, wantHost: "minio.example:9000", wantSecure: true},
		{endpoint: "s3.amazonaws.com", secure: true, wantHost: "s3.amazonaws.com", wantSecure: true},
		{endpoint: "http://127.0.0.1:9000", wantHost: "127.0.0.1:9000"},
		{endpoint: "https://minio.example:9000", wantHost: "minio.example:9000", wantSecure: true},
		{endpoint: "https://minio.example/", wantHost: "minio.example", wantSecure: true},
		{endpoint: " https://[::1]:9000 ", wantHost: "[::1]:9000", wantSecure: true},
		{endpoint: "https://minio.example", secure: true, wantHost: "minio.example", wantSecure: true},
		{endpoint: "", wantErr: "endpoint is required"},
		{endpoint: "http://minio.example", secure: true, wantErr: "plain HTTP but HTTPS is asked for"},
		{endpoint: "ftp://minio.example", wantErr: `scheme "ftp"`},
		{endpoint: "https://minio.example/bucket", wantErr: "no path"},
		{endpoint: "https://minio.example?x=1", wantErr: "no path or query"},
		{endpoint: "https://", wantErr: "has no host"},
		{endpoint: "https://user:hunter2@minio.example", wantErr: "holds credentials"},
		{endpoint: "user:hunter2@minio.example", wantErr: "want host[:port]"},
		{endpoint: "minio.example/bucket", wantErr: "want host[:port]"},
	} {
		t.Run(tc.endpoint, func(t *testing.T) {
			host, secure, err := Config{Endpoint: tc.endpoint, Secure: tc.secure}.endpoint()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("error %q echoes the password", err)
				}
				var se *SettingError
				want := SettingEndpoint
				if tc.secure && strings.HasPrefix(tc.endpoint, "http://") {
					want = SettingSecure // the endpoint contradicts Secure
				}
				if !errors.As(err, &se) || se.Setting != want {
					t.Errorf("error %v does not blame %s", err, want)
				}
				return
			}
			if err != nil || host != tc.wantHost || secure != tc.wantSecure {
				t.Fatalf("= %q, %v, %v; want %q, %v", host, secure, err, tc.wantHost, tc.wantSecure)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	ok := Config{Endpoint: "127.0.0.1:9000", Bucket: "vault"}
	for _, tc := range []struct {
		name    string
		mod     func(*Config)
		wantErr string
	}{
		{name: "minimal", mod: func(*Config) {}},
		{name: "no bucket", mod: func(c *Config) { c.Bucket = "" }, wantErr: "bucket name is required"},
		{name: "invalid bucket name", mod: func(c *Config) { c.Bucket = "v" }, wantErr: `bucket name "v"`},
		{name: "both styles", mod: func(c *Config) { c.PathStyle, c.VirtualHost = true, true }, wantErr: "exclusive"},
		{name: "virtual host on an IP", mod: func(c *Config) { c.VirtualHost = true }, wantErr: "needs a DNS name"},
		{name: "virtual host on a name", mod: func(c *Config) { c.VirtualHost, c.Endpoint = true, "localhost:9000" }},
		{name: "virtual host with a dotted bucket", mod: func(c *Config) { c.VirtualHost, c.Endpoint, c.Bucket = true, "s3.example", "my.vault" }, wantErr: "contains dots"},
		{name: "CA on https", mod: func(c *Config) { c.Endpoint, c.CACertPEM = "https://127.0.0.1:9000", caPEM }},
		{name: "CA on http", mod: func(c *Config) { c.CACertPEM = caPEM }, wantErr: "apply to HTTPS"},
		{name: "CA not PEM", mod: func(c *Config) { c.Secure, c.CACertPEM = true, []byte("not a cert") }, wantErr: "no PEM certificate"},
		{name: "insecure with custom round tripper", mod: func(c *Config) {
			c.Secure, c.InsecureSkipVerify = true, true
			c.HTTPTransport = roundTripperFunc(http.DefaultTransport.RoundTrip)
		}, wantErr: "standard library's"},
		{name: "insecure with http.Transport", mod: func(c *Config) { c.Secure, c.InsecureSkipVerify, c.HTTPTransport = true, true, &http.Transport{} }},
		{name: "negative attempts", mod: func(c *Config) { c.Retry.MaxAttempts = -1 }, wantErr: "maximum number of attempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			err := c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := New(c); err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate = %v, want %q", err, tc.wantErr)
			}
			if se := (*SettingError)(nil); !errors.As(err, &se) || se.Setting == "" {
				t.Errorf("Validate = %v, want a *SettingError", err)
			}
			if _, err := New(c); err == nil {
				t.Fatal("New accepted what Validate refused")
			}
		})
	}
}

// TestConfigTransport: the TLS options reach the transport, on a clone of
// the caller's *http.Transport (left untouched), and the CA given is
// trusted for real by a TLS handshake.
func TestConfigTransport(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	if rt, err := (Config{Endpoint: "127.0.0.1:1", Bucket: "b"}).transport(false); rt != nil || err != nil {
		t.Fatalf("no TLS options: %v, %v; want nil (minio-go's default)", rt, err)
	}
	mine := &http.Transport{MaxIdleConns: 7}
	rt, err := Config{Endpoint: srv.URL, Bucket: "b", CACertPEM: caPEM, HTTPTransport: mine}.transport(true)
	if err != nil {
		t.Fatal(err)
	}
	tr := rt.(*http.Transport)
	// (net/http itself may give mine a TLS config for HTTP/2; not roots.)
	if tr == mine || (mine.TLSClientConfig != nil && mine.TLSClientConfig.RootCAs != nil) || tr.MaxIdleConns != 7 {
		t.Fatal("the caller's transport was modified or not cloned")
	}
	if tr.TLSClientConfig.MinVersion != tls.VersionTLS12 || tr.TLSClientConfig.InsecureSkipVerify {
		t.Fatalf("TLS config %+v", tr.TLSClientConfig)
	}
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatalf("GET with the CA trusted: %v", err)
	}
	resp.Body.Close()

	def, err := Config{Endpoint: srv.URL, Bucket: "b"}.transport(true)
	if err != nil || def != nil {
		t.Fatal(def, err)
	}
	plain, _ := Config{Endpoint: srv.URL, Bucket: "b", HTTPTransport: &http.Transport{}}.transport(true)
	if _, err := (&http.Client{Transport: plain}).Get(srv.URL); err == nil || tlsError(err) == nil {
		t.Fatalf("GET without the CA: %v, want a certificate error", err)
	}
	insecure, _ := Config{Endpoint: srv.URL, Bucket: "b", InsecureSkipVerify: true}.transport(true)
	resp, err = (&http.Client{Transport: insecure}).Get(srv.URL)
	if err != nil {
		t.Fatalf("GET with InsecureSkipVerify: %v", err)
	}
	resp.Body.Close()
}

func TestID(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Endpoint: "https://minio.example:9000", Bucket: "vault", Prefix: "alice/", Region: "eu-west-1", AccessKey: "AK", SecretKey: "SK"},
			"https://minio.example:9000,vaultalice/,eu-west-1"},
		{Config{Endpoint: "127.0.0.1:9000", Bucket: "vault"}, "http://127.0.0.1:9000,vault,"},
		{Config{Endpoint: "s3.amazonaws.com", Secure: true, Bucket: "vault", Prefix: "p/", Region: "us-east-1"}, "https://s3.amazonaws.com,vaultp/,us-east-1"},
	} {
		b, err := New(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.ID(); got != tc.want {
			t.Errorf("ID() = %q, want %q", got, tc.want)
		}
		if strings.Contains(b.ID(), "SK") || strings.Contains(b.ID(), "AK") {
			t.Errorf("ID() %q contains credentials", b.ID())
		}
	}
}

// FuzzEndpoint: any Endpoint string either fails Validate or gives a host
// that minio-go accepts and an ID without user info.
func FuzzEndpoint(f *testing.F) {
	for _, s := range []string{"127.0.0.1:9000", "https://minio.example:9000/", "http://u:p@h", "h/p", "https://[::1]:1", "", "https://", "a@b"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, endpoint string, secure bool) {
		c := Config{Endpoint: endpoint, Secure: secure, Bucket: "vault"}
		host, sec, err := c.endpoint()
		if err != nil {
			return
		}
		if strings.ContainsAny(host, "/@?#") {
			t.Fatalf("host %q from %q", host, endpoint)
		}
		if secure && !sec {
			t.Fatalf("%q with Secure gave plain HTTP", endpoint)
		}
		b, err := New(c)
		if err != nil {
			return // minio-go refused the host: an error, not a panic
		}
		u, err := url.Parse(strings.Split(b.ID(), ",")[0])
		if err != nil || u.User != nil || (u.Path != "" && u.Path != "/") {
			t.Fatalf("ID %q from %q", b.ID(), endpoint)
		}
	})
}
