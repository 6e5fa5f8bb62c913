package minio

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	minio "github.com/minio/minio-go/v7"
)

// Sentinel errors, for errors.Is. Each is wrapped in an *engine.Error
// whose message also names the bucket or key concerned.
var (
	// ErrNoBucket means the bucket does not exist (S3 NoSuchBucket). The
	// adapter never creates buckets: create it on the server (or fix
	// Config.Bucket). It wraps engine.ErrNoDatabase, which tells it from
	// an absent object; errors wrapping it also wrap engine.ErrNotFound
	// and have StageStorage.
	ErrNoBucket error = noBucket{}
	// ErrTLS means the TLS connection could not be set up as configured:
	// the server's certificate is not trusted (give its CA in
	// Config.CACertPEM), or the endpoint does not speak the configured
	// scheme (http vs https). It is permanent. Errors wrapping it also
	// wrap a *SettingError naming SettingCACert or SettingSecure.
	ErrTLS = errors.New("minio: TLS misconfiguration")
	// ErrMilestoneRace means other clients kept rewriting the milestone
	// object while Handshake tried to register this node; run the
	// handshake again. It is negotiate.ErrMilestoneRace.
	ErrMilestoneRace = negotiate.ErrMilestoneRace
)

// noBucket is ErrNoBucket: this adapter's message over
// engine.ErrNoDatabase.
type noBucket struct{}

func (noBucket) Error() string { return "minio: the bucket does not exist" }
func (noBucket) Unwrap() error { return engine.ErrNoDatabase }

// Setting names the Config field an error blames: the setting to change.
// Its value is the field's name.
type Setting string

// The settings a *SettingError can name.
const (
	SettingEndpoint    Setting = "Endpoint"
	SettingSecure      Setting = "Secure" // the scheme: HTTPS or plain HTTP
	SettingBucket      Setting = "Bucket"
	SettingAccessKey   Setting = "AccessKey"
	SettingSecretKey   Setting = "SecretKey"
	SettingRegion      Setting = "Region"
	SettingPathStyle   Setting = "PathStyle"
	SettingVirtualHost Setting = "VirtualHost"
	SettingCACert      Setting = "CACertPEM"
	SettingTransport   Setting = "HTTPTransport"
	SettingRetry       Setting = "Retry"
)

// SettingError is an error that changing one Config setting can fix. It
// lets a caller tell its own user what to change in the caller's words (a
// command-line flag, a URL part, a configuration key) rather than in the
// field names of this package. Config.Validate and New return one;
// operations wrap one (find it with errors.As) under their *engine.Error
// when the server refused the access key (SettingAccessKey), the request
// signature (SettingSecretKey) or the signing region (SettingRegion), and
// when TLS failed (SettingCACert, SettingSecure; those also wrap ErrTLS).
// Its message describes the problem without naming the field.
type SettingError struct {
	// Setting is the field to change.
	Setting Setting
	// Want is the value the server asked for, when it said: the region
	// for SettingRegion. Empty otherwise.
	Want string
	// Problem says what is wrong, in words that do not name the field.
	Problem string
	// Err is the underlying cause or sentinel (ErrTLS); may be nil.
	Err error
}

func (e *SettingError) Error() string { return "minio: " + e.Problem }
func (e *SettingError) Unwrap() error { return e.Err }

// settingErr returns a *SettingError for s with a formatted problem.
func settingErr(s Setting, format string, args ...any) *SettingError {
	return &SettingError{Setting: s, Problem: fmt.Sprintf(format, args...)}
}

// errPrecondition marks a conditional PutObject that lost (HTTP 412
// PreconditionFailed, or 409 ConditionalRequestConflict).
var errPrecondition = errors.New("minio: the object changed since it was read")

// s3Error carries the S3 error code; it wraps a sentinel where one applies.
type s3Error struct {
	code, msg string
	status    int
	sentinel  []error
}

func (e *s3Error) Error() string {
	s := "minio: " + e.msg
	if e.code != "" || e.status != 0 {
		s += " ("
		if e.code != "" && !strings.HasPrefix(e.code, fmt.Sprint(e.status)) {
			s += "S3 " + e.code
			if e.status != 0 {
				s += ", "
			}
		}
		if e.status != 0 {
			s += fmt.Sprintf("HTTP %d", e.status)
		}
		s += ")"
	}
	return s
}

func (e *s3Error) Unwrap() []error { return e.sentinel }

// blame makes se the error's message and wraps it.
func (e *s3Error) blame(se *SettingError) {
	e.msg = se.Problem
	e.sentinel = append(e.sentinel, se)
}

// S3 error codes that mean "try again later" (minio-go's own retryable
// list, and the throttling and transient codes of the AWS SDK).
var transientCodes = map[string]bool{
	"RequestError": true, "RequestTimeout": true, "RequestTimeoutException": true,
	"Throttling": true, "ThrottlingException": true, "ThrottledException": true,
	"RequestLimitExceeded": true, "RequestThrottled": true, "RequestThrottledException": true,
	"TooManyRequestsException": true, "ProvisionedThroughputExceededException": true,
	"BandwidthLimitExceeded": true, "TransactionInProgressException": true,
	"InternalError": true, "ServiceUnavailable": true,
	"SlowDown": true, "SlowDownWrite": true, "SlowDownRead": true,
}

// HTTP statuses that mean "try again later".
func transientStatus(s int) bool {
	return s >= 500 || s == http.StatusTooManyRequests || s == http.StatusRequestTimeout || s == 499
}

// wrap turns a minio-go error into the adapter's error: an *engine.Error
// with the stage that decides retrying, and a message that says what to
// do. A cancelled ctx gives ctx.Err() wrapped, never a transport error.
func (b *Bucket) wrap(ctx context.Context, op, key string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("minio: %s %q: %w", op, key, ctx.Err())
	}
	if e := tlsError(err); e != nil {
		return &engine.Error{Op: op, DocID: key, Stage: engine.StageProtocol, Err: e}
	}
	r := minio.ToErrorResponse(err)
	if r.Code == "" && r.StatusCode == 0 {
		return &engine.Error{Op: op, DocID: key, Stage: engine.StageTransport, Err: fmt.Errorf("minio: %s: %w", b.endpointURL, err)}
	}
	e := &s3Error{code: r.Code, status: r.StatusCode, msg: r.Message}
	stage := engine.StageStorage
	switch {
	case r.Code == "InvalidAccessKeyId" || r.Code == "XAdminUserNotFound": // the latter: versitygw
		stage = engine.StageAuth
		e.blame(settingErr(SettingAccessKey, "the server does not know the access key: check the credentials"))
	case r.Code == "SignatureDoesNotMatch":
		stage = engine.StageAuth
		e.blame(settingErr(SettingSecretKey, "the request signature does not match: check the credentials (the secret key)"))
	case r.Code == "AuthorizationHeaderMalformed" || r.Code == "InvalidRegion":
		stage = engine.StageAuth
		if r.Region != "" {
			se := settingErr(SettingRegion, "the server expects requests signed for region %q, not %q", r.Region, b.region)
			se.Want = r.Region
			e.blame(se)
		} else {
			e.blame(settingErr(SettingRegion, "the server rejected the authorization header (signed for region %q): check the region and the credentials: %s", b.region, r.Message))
		}
	case r.Code == "RequestTimeTooSkewed":
		stage = engine.StageAuth
		e.msg = "this machine's clock differs from the server's by more than 15 minutes: set the clock right"
	case r.Code == "ExpiredToken" || r.Code == "InvalidToken" || r.Code == "TokenRefreshRequired":
		stage = engine.StageAuth
		e.msg = "the server rejected the session token: check the credentials"
	case r.Code == "AccessDenied" || r.StatusCode == http.StatusForbidden || r.StatusCode == http.StatusUnauthorized:
		stage = engine.StageAuth
		e.msg = fmt.Sprintf("access denied to bucket %q: check the credentials, and that the key may s3:ListBucket, s3:GetBucketLocation, s3:GetObject, s3:PutObject and s3:DeleteObject on it", b.bucket)
	case r.Code == "NoSuchKey":
		e.sentinel = []error{engine.ErrNotFound}
		e.msg = "no such object"
	case r.Code == "NoSuchBucket":
		e.sentinel = []error{ErrNoBucket, engine.ErrNotFound}
		e.msg = fmt.Sprintf("bucket %q does not exist on %s: create it (livesync-go never creates buckets), or fix the bucket name", b.bucket, b.endpointURL)
	case r.Code == "PreconditionFailed" || r.Code == "ConditionalRequestConflict":
		e.sentinel = []error{errPrecondition}
		e.msg = "the object changed since it was read"
	case transientCodes[r.Code] || transientStatus(r.StatusCode):
		stage = engine.StageTransport
		if e.msg == "" || strings.HasPrefix(r.Code, fmt.Sprint(r.StatusCode)) {
			e.msg = "the server is unavailable or busy"
		}
	case strings.HasPrefix(r.Code, fmt.Sprint(r.StatusCode)) && r.StatusCode != 0:
		// minio-go puts the HTTP status line in Code when the body is not
		// an S3 error document: not an S3 server, or the wrong scheme.
		stage = engine.StageProtocol
		e.msg = fmt.Sprintf("%s answered %s without an S3 error document: is it an S3 endpoint, and is the scheme (http or https) right?", b.endpointURL, r.Code)
	}
	if e.msg == "" {
		e.msg = "request failed"
	}
	return &engine.Error{Op: op, DocID: key, Stage: stage, Err: e}
}

// tlsError recognises a TLS misconfiguration: a certificate the client
// does not trust, or a scheme the endpoint does not speak.
func tlsError(err error) error {
	var (
		verr *tls.CertificateVerificationError
		uerr x509.UnknownAuthorityError
		herr x509.HostnameError
		ierr x509.CertificateInvalidError
		rerr tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &verr), errors.As(err, &uerr), errors.As(err, &herr), errors.As(err, &ierr):
		se := settingErr(SettingCACert, "TLS misconfiguration: the server's TLS certificate is not trusted (%v)", err)
		se.Err = fmt.Errorf("%w: %w", ErrTLS, err)
		return se
	case errors.As(err, &rerr), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		se := settingErr(SettingSecure, "TLS misconfiguration: the endpoint speaks plain HTTP, not HTTPS")
		se.Err = fmt.Errorf("%w: %w", ErrTLS, err)
		return se
	}
	return nil
}

// transient reports whether err is worth another attempt.
func transient(err error) bool {
	var e *engine.Error
	return errors.As(err, &e) && e.Stage == engine.StageTransport
}
