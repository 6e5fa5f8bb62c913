// Package minio stores a Self-hosted LiveSync journal (FORMAT.md §6) in an
// S3-compatible bucket (AWS S3, MinIO, Cloudflare R2, versitygw, ...)
// through minio-go v7.
//
// New returns a *Bucket with
//
//   - GetSyncParameters / EnsureSyncParameters for the never-encrypted
//     sync-parameters object (the bucket's PBKDF2 salt). A new salt is
//     written only when the object is proven absent (NoSuchKey); any other
//     failure to read it is returned as an error, never a reason to write.
//   - GetMilestone / PutMilestone for the milestone object (raw JSON).
//   - List, the pack keys after a given key, paginating past 1,000
//     objects and ordered as upstream orders them (journal.ComparePackKeys);
//     names starting with "_" are skipped.
//   - PutPack / GetPack, a pack sealed with journal.Seal / opened with
//     journal.Open.
//
// S3 has no atomic rename, so a pack cannot be written to a temporary key
// and renamed; a single PutObject is atomic instead: readers see either no
// object or the whole body, never a partial one. PutPack therefore uploads
// each pack with exactly one PutObject under its final key.
//
// Errors are *engine.Error: StageAuth for 403, InvalidAccessKeyId,
// SignatureDoesNotMatch and AccessDenied (permanent); StageTransport for
// network failures and 5xx (retryable); engine.ErrNotFound is wrapped for
// NoSuchKey and NoSuchBucket; other S3 errors are StageStorage. Messages
// never contain the secret key or object contents. minio-go itself retries
// transient failures (network errors, 5xx, throttling) with backoff before
// an error reaches the caller.
package minio

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
	minio "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Config names the bucket and how to reach it.
type Config struct {
	Endpoint  string // host[:port], without scheme
	Bucket    string
	Prefix    string // the LiveSync bucket prefix; prepended to every key
	AccessKey string
	SecretKey string
	Region    string // may be empty (auto)
	Secure    bool   // HTTPS
	// PathStyle forces path-style requests (needed by most self-hosted
	// servers); VirtualHost forces virtual-host-style requests
	// (bucket.endpoint). With neither, minio-go picks the style from the
	// endpoint (BucketLookupAuto). Setting both is an error.
	PathStyle   bool
	VirtualHost bool
	// HTTPTransport replaces the default transport when not nil.
	HTTPTransport http.RoundTripper
	// Now returns the time used for pack keys; time.Now when nil.
	Now func() time.Time
}

// Bucket is a journal stored in one bucket under one prefix. It is safe
// for concurrent use.
type Bucket struct {
	c      *minio.Client
	bucket string
	prefix string
	now    func() time.Time
}

// New returns a Bucket for cfg. It does not contact the server.
func New(cfg Config) (*Bucket, error) {
	if cfg.Endpoint == "" || cfg.Bucket == "" {
		return nil, &engine.Error{Op: "open bucket", Stage: engine.StageProtocol, Err: errors.New("minio: Endpoint and Bucket are required")}
	}
	lookup := minio.BucketLookupAuto
	switch {
	case cfg.PathStyle && cfg.VirtualHost:
		return nil, &engine.Error{Op: "open bucket", Stage: engine.StageProtocol, Err: errors.New("minio: PathStyle and VirtualHost are exclusive")}
	case cfg.PathStyle:
		lookup = minio.BucketLookupPath
	case cfg.VirtualHost:
		lookup = minio.BucketLookupDNS
	}
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:       cfg.Secure,
		Region:       cfg.Region,
		BucketLookup: lookup,
		Transport:    cfg.HTTPTransport,
	})
	if err != nil {
		return nil, &engine.Error{Op: "open bucket", Stage: engine.StageProtocol, Err: fmt.Errorf("minio: %w", err)}
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Bucket{c: c, bucket: cfg.Bucket, prefix: cfg.Prefix, now: now}, nil
}

// Client returns the underlying minio-go client (for bucket administration
// in tests and tools).
func (b *Bucket) Client() *minio.Client { return b.c }

// Name returns the bucket name.
func (b *Bucket) Name() string { return b.bucket }

// Prefix returns the bucket prefix.
func (b *Bucket) Prefix() string { return b.prefix }

// SyncParameters is the body of the sync-parameters object (FORMAT.md §1.7).
type SyncParameters struct {
	ID              string `json:"_id"`
	Type            string `json:"type"`
	ProtocolVersion int    `json:"protocolVersion"`
	PBKDF2Salt      string `json:"pbkdf2salt"`
}

// Salt decodes PBKDF2Salt.
func (p SyncParameters) Salt() ([]byte, error) {
	s, err := base64.StdEncoding.DecodeString(p.PBKDF2Salt)
	if err != nil || len(s) == 0 {
		return nil, &engine.Error{Op: "read sync parameters", DocID: journal.SyncParametersKey, Stage: engine.StageDecode, Err: fmt.Errorf("minio: pbkdf2salt is not base64 of a salt: %w", engine.ErrMalformed)}
	}
	return s, nil
}

// GetSyncParameters reads the sync-parameters object. A missing object is
// an error wrapping engine.ErrNotFound.
func (b *Bucket) GetSyncParameters(ctx context.Context) (SyncParameters, error) {
	const op = "read sync parameters"
	body, err := b.get(ctx, op, journal.SyncParametersKey)
	if err != nil {
		return SyncParameters{}, err
	}
	var p SyncParameters
	if err := json.Unmarshal(body, &p); err != nil {
		return SyncParameters{}, &engine.Error{Op: op, DocID: b.prefix + journal.SyncParametersKey, Stage: engine.StageDecode, Err: fmt.Errorf("minio: %w: %v", engine.ErrMalformed, err)}
	}
	return p, nil
}

// EnsureSyncParameters returns the sync parameters with a salt. Only when
// the object is proven absent (NoSuchKey) or holds an empty salt does it
// write one (32 random bytes, protocolVersion 2), then re-reads it. Any
// other read failure (auth, network, a missing bucket, a malformed body)
// is returned and nothing is written.
func (b *Bucket) EnsureSyncParameters(ctx context.Context) (SyncParameters, error) {
	p, err := b.GetSyncParameters(ctx)
	if err == nil && p.PBKDF2Salt != "" {
		return p, nil
	}
	if err != nil && !b.isNoSuchKey(err) {
		return SyncParameters{}, err
	}
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return SyncParameters{}, &engine.Error{Op: "write sync parameters", Stage: engine.StageEncrypt, Err: err}
	}
	p = SyncParameters{ID: "_local/obsidian_livesync_sync_parameters", Type: "sync-parameters", ProtocolVersion: 2, PBKDF2Salt: base64.StdEncoding.EncodeToString(salt)}
	body, _ := json.Marshal(p)
	if err := b.put(ctx, "write sync parameters", journal.SyncParametersKey, body, "application/json"); err != nil {
		return SyncParameters{}, err
	}
	return b.GetSyncParameters(ctx)
}

// GetMilestone returns the raw milestone JSON; a missing object is an
// error wrapping engine.ErrNotFound.
func (b *Bucket) GetMilestone(ctx context.Context) ([]byte, error) {
	return b.get(ctx, "read milestone", journal.MilestoneKey)
}

// PutMilestone uploads the milestone JSON (never encrypted).
func (b *Bucket) PutMilestone(ctx context.Context, body []byte) error {
	return b.put(ctx, "write milestone", journal.MilestoneKey, body, "application/json")
}

// List returns the keys (including the prefix) of the objects under the
// prefix that come after the key after (empty: all), skipping names that
// start with "_" (journal.IsPackListingCandidate), ordered by
// journal.ComparePackKeys. The server lists lexically from after
// (StartAfter) and minio-go follows the continuation tokens, so listings
// longer than one page (1,000 keys) are complete.
func (b *Bucket) List(ctx context.Context, after string) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var keys []string
	for o := range b.c.ListObjects(ctx, b.bucket, minio.ListObjectsOptions{Prefix: b.prefix, Recursive: true, StartAfter: after}) {
		if o.Err != nil {
			return nil, b.wrap("list packs", "", o.Err)
		}
		name := strings.TrimPrefix(o.Key, b.prefix)
		if !journal.IsPackListingCandidate(name) {
			continue
		}
		keys = append(keys, o.Key)
	}
	sort.SliceStable(keys, func(i, j int) bool { return journal.ComparePackKeys(keys[i], keys[j]) < 0 })
	return keys, nil
}

// PutPack seals records (journal.Seal with c; nil means plain) and uploads
// them with one PutObject under journal.PackKey(prefix, now). It returns
// the key.
func (b *Bucket) PutPack(ctx context.Context, records []journal.Record, c journal.Cipher) (string, error) {
	body, err := journal.Seal(records, c)
	if err != nil {
		return "", err
	}
	name := strings.TrimPrefix(journal.PackKey(b.prefix, b.now().UnixMilli()), b.prefix)
	if err := b.put(ctx, "write pack", name, body, "application/octet-stream"); err != nil {
		return "", err
	}
	return b.prefix + name, nil
}

// PutObject uploads body under prefix+name as it is (for tools and tests
// that copy packs written elsewhere).
func (b *Bucket) PutObject(ctx context.Context, name string, body []byte) error {
	return b.put(ctx, "write object", name, body, "application/octet-stream")
}

// GetPack downloads the pack stored under key (as returned by List) and
// opens it with journal.Open.
func (b *Bucket) GetPack(ctx context.Context, key string, c journal.Cipher) ([]journal.Record, error) {
	body, err := b.getKey(ctx, "read pack", key)
	if err != nil {
		return nil, err
	}
	return journal.Open(key, body, c, 0)
}

func (b *Bucket) get(ctx context.Context, op, name string) ([]byte, error) {
	return b.getKey(ctx, op, b.prefix+name)
}

func (b *Bucket) getKey(ctx context.Context, op, key string) ([]byte, error) {
	o, err := b.c.GetObject(ctx, b.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, b.wrap(op, key, err)
	}
	defer o.Close()
	body, err := io.ReadAll(o)
	if err != nil {
		return nil, b.wrap(op, key, err)
	}
	return body, nil
}

func (b *Bucket) put(ctx context.Context, op, name string, body []byte, contentType string) error {
	key := b.prefix + name
	_, err := b.c.PutObject(ctx, b.bucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{ContentType: contentType})
	if err != nil {
		return b.wrap(op, key, err)
	}
	return nil
}

// isNoSuchKey reports whether err says the object (not the bucket) is
// absent.
func (b *Bucket) isNoSuchKey(err error) bool {
	var s3 *s3Error
	return errors.As(err, &s3) && s3.code == "NoSuchKey"
}

// s3Error carries the S3 error code; it wraps a sentinel where one applies.
type s3Error struct {
	code, msg string
	status    int
	sentinel  error
}

func (e *s3Error) Error() string {
	s := "minio: " + e.msg
	if e.code != "" {
		s += " (S3 " + e.code
		if e.status != 0 {
			s += fmt.Sprintf(", HTTP %d", e.status)
		}
		s += ")"
	}
	return s
}

func (e *s3Error) Unwrap() error { return e.sentinel }

func (b *Bucket) wrap(op, key string, err error) error {
	r := minio.ToErrorResponse(err)
	if r.Code == "" && r.StatusCode == 0 {
		return &engine.Error{Op: op, DocID: key, Stage: engine.StageTransport, Err: fmt.Errorf("minio: %w", err)}
	}
	e := &s3Error{code: r.Code, status: r.StatusCode, msg: r.Message}
	stage := engine.StageStorage
	switch {
	case r.Code == "InvalidAccessKeyId" || r.Code == "SignatureDoesNotMatch" || r.Code == "AccessDenied" || r.StatusCode == http.StatusForbidden || r.StatusCode == http.StatusUnauthorized:
		stage = engine.StageAuth
		e.msg = "the server rejected the credentials: check the access key and secret key"
	case r.Code == "NoSuchKey":
		e.sentinel = engine.ErrNotFound
		e.msg = "no such object"
	case r.Code == "NoSuchBucket":
		e.sentinel = engine.ErrNotFound
		e.msg = fmt.Sprintf("no such bucket %q", b.bucket)
	case r.StatusCode >= 500:
		stage = engine.StageTransport
	}
	if e.msg == "" {
		e.msg = "request failed"
	}
	return &engine.Error{Op: op, DocID: key, Stage: stage, Err: e}
}
