package minio

import (
	"context"
	"crypto/x509"
	"errors"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	minio "github.com/minio/minio-go/v7"
)

// TestWrap classifies what minio-go returns: the stage decides retrying,
// the sentinels what the caller tests, the message what the user does.
func TestWrap(t *testing.T) {
	const secret = "s3cr3t-never-shown"
	b, err := New(Config{Endpoint: "https://minio.example:9000", Bucket: "vault", Region: "eu-west-3", AccessKey: "AK", SecretKey: secret})
	if err != nil {
		t.Fatal(err)
	}
	resp := func(code string, status int) error {
		return minio.ErrorResponse{Code: code, StatusCode: status, Message: "server text"}
	}
	for _, tc := range []struct {
		name     string
		err      error
		stage    engine.Stage
		is       []error
		isNot    []error
		contains []string
		setting  Setting // the *SettingError wrapped, if any
		want     string  // its Want
	}{
		{name: "unknown access key", err: resp("InvalidAccessKeyId", 403), stage: engine.StageAuth, contains: []string{"does not know the access key"}, setting: SettingAccessKey},
		{name: "wrong secret", err: resp("SignatureDoesNotMatch", 403), stage: engine.StageAuth, contains: []string{"signature does not match", "secret key"}, setting: SettingSecretKey},
		{name: "access denied", err: resp("AccessDenied", 403), stage: engine.StageAuth, contains: []string{"credentials", `"vault"`, "s3:ListBucket"}},
		{name: "bare 403 (HEAD)", err: resp("403 Forbidden", 403), stage: engine.StageAuth, contains: []string{"credentials"}},
		{name: "wrong region", err: minio.ErrorResponse{Code: "AuthorizationHeaderMalformed", StatusCode: 400, Region: "us-east-1"},
			stage: engine.StageAuth, contains: []string{`region "us-east-1", not "eu-west-3"`}, setting: SettingRegion, want: "us-east-1"},
		{name: "wrong region, none named", err: minio.ErrorResponse{Code: "AuthorizationHeaderMalformed", StatusCode: 400, Message: "bad header"},
			stage: engine.StageAuth, contains: []string{`signed for region "eu-west-3"`, "bad header"}, setting: SettingRegion},
		{name: "clock skew", err: resp("RequestTimeTooSkewed", 403), stage: engine.StageAuth, contains: []string{"clock"}},
		{name: "no such key", err: resp("NoSuchKey", 404), stage: engine.StageStorage, is: []error{engine.ErrNotFound}, isNot: []error{ErrNoBucket, engine.ErrNoDatabase}},
		{name: "no such bucket", err: resp("NoSuchBucket", 404), stage: engine.StageStorage, is: []error{engine.ErrNotFound, ErrNoBucket, engine.ErrNoDatabase},
			contains: []string{`bucket "vault" does not exist on https://minio.example:9000`, "create it"}},
		{name: "precondition", err: resp("PreconditionFailed", 412), stage: engine.StageStorage, is: []error{errPrecondition}},
		{name: "conditional conflict", err: resp("ConditionalRequestConflict", 409), stage: engine.StageStorage, is: []error{errPrecondition}},
		{name: "slow down", err: resp("SlowDown", 503), stage: engine.StageTransport},
		{name: "bare 503", err: resp("503 Service Unavailable", 503), stage: engine.StageTransport, contains: []string{"unavailable or busy", "HTTP 503"}},
		{name: "bare 429", err: resp("429 Too Many Requests", 429), stage: engine.StageTransport},
		{name: "internal error", err: resp("InternalError", 500), stage: engine.StageTransport},
		{name: "request timeout (400)", err: resp("RequestTimeout", 400), stage: engine.StageTransport},
		{name: "throttling (400)", err: resp("Throttling", 400), stage: engine.StageTransport},
		{name: "not S3", err: resp("400 Bad Request", 400), stage: engine.StageProtocol, contains: []string{"scheme"}},
		{name: "other S3 error", err: resp("InvalidObjectName", 400), stage: engine.StageStorage, contains: []string{"server text", "S3 InvalidObjectName, HTTP 400"}},
		{name: "connection refused", err: &url.Error{Op: "Get", URL: "https://minio.example:9000/vault/k", Err: syscall.ECONNREFUSED}, stage: engine.StageTransport},
		{name: "untrusted certificate", err: &url.Error{Op: "Get", URL: "https://minio.example:9000/vault/k", Err: x509.UnknownAuthorityError{}},
			stage: engine.StageProtocol, is: []error{ErrTLS}, contains: []string{"not trusted"}, setting: SettingCACert},
		{name: "https to a plain server", err: &url.Error{Op: "Get", URL: "https://minio.example:9000/", Err: errors.New("http: server gave HTTP response to HTTPS client")},
			stage: engine.StageProtocol, is: []error{ErrTLS}, contains: []string{"plain HTTP, not HTTPS"}, setting: SettingSecure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := b.wrap(context.Background(), "read object", "vault-prefix/k", tc.err)
			var e *engine.Error
			if !errors.As(err, &e) || e.Stage != tc.stage || e.Op != "read object" || e.DocID != "vault-prefix/k" {
				t.Fatalf("wrap = %#v (%v), want an *engine.Error with stage %s", err, err, tc.stage)
			}
			if transient(err) != (tc.stage == engine.StageTransport) {
				t.Errorf("transient = %v", transient(err))
			}
			for _, s := range tc.is {
				if !errors.Is(err, s) {
					t.Errorf("%v does not wrap %v", err, s)
				}
			}
			for _, s := range tc.isNot {
				if errors.Is(err, s) {
					t.Errorf("%v wraps %v", err, s)
				}
			}
			for _, s := range tc.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%q does not contain %q", err, s)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%q contains the secret key", err)
			}
			// Messages describe the problem; the typed error names the
			// field, so that callers can say it in their own words.
			if strings.Contains(err.Error(), "Config.") {
				t.Errorf("%q names a Go field", err)
			}
			var se *SettingError
			switch {
			case tc.setting == "" && errors.As(err, &se):
				t.Errorf("%v blames %s", err, se.Setting)
			case tc.setting != "" && !errors.As(err, &se):
				t.Errorf("%v wraps no *SettingError, want %s", err, tc.setting)
			case tc.setting != "" && (se.Setting != tc.setting || se.Want != tc.want):
				t.Errorf("blames %s (want %q), want %s (%q)", se.Setting, se.Want, tc.setting, tc.want)
			}
		})
	}
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := b.wrap(ctx, "read object", "k", &url.Error{Op: "Get", URL: "x", Err: context.Canceled})
		if !errors.Is(err, context.Canceled) || transient(err) {
			t.Fatalf("wrap = %v; want context.Canceled, not transient", err)
		}
	})
}
