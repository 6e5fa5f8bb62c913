package minio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	minio "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Bucket is a journal stored in one bucket under one prefix. It
// implements engine/journalsync.Objects and is safe for concurrent use.
type Bucket struct {
	c           *minio.Client
	bucket      string
	prefix      string
	endpointURL string // scheme://host[:port]
	region      string
	accessKey   string
	retry       Retry
	log         *slog.Logger
	now         func() time.Time
}

// New returns a Bucket for cfg (see Config.Validate for what is checked).
// It does not contact the server.
func New(cfg Config) (*Bucket, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	host, secure, _ := cfg.endpoint()
	tr, err := cfg.transport(secure)
	if err != nil {
		return nil, fmt.Errorf("minio: transport: %w", err)
	}
	c, err := minio.New(host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:       secure,
		Region:       cfg.Region,
		BucketLookup: cfg.lookup(),
		Transport:    tr,
		MaxRetries:   1, // the retry policy is Config.Retry's
	})
	if err != nil {
		return nil, fmt.Errorf("minio: %w", err)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	scheme := "http://"
	if secure {
		scheme = "https://"
	}
	return &Bucket{c: c, bucket: cfg.Bucket, prefix: cfg.Prefix, endpointURL: scheme + host, region: cfg.Region,
		accessKey: cfg.AccessKey, retry: cfg.Retry.withDefaults(), log: cfg.Logger, now: now}, nil
}

// Client returns the underlying minio-go client (for bucket administration
// in tests and tools). It does not retry: minio-go's retries are off.
func (b *Bucket) Client() *minio.Client { return b.c }

// Name returns the bucket name.
func (b *Bucket) Name() string { return b.bucket }

// Prefix returns the bucket prefix every key starts with (may be empty).
func (b *Bucket) Prefix() string { return b.prefix }

// ID identifies the journal without credentials: upstream's checkpoint
// identity [endpoint, bucket + prefix, region] joined
// with ",", where endpoint is "http(s)://host[:port]" and region is
// Config.Region as given (empty when it is asked from the server).
// Upstream stores its checkpoint under btoa(encodeURI(ID)).
func (b *Bucket) ID() string {
	return strings.Join([]string{b.endpointURL, b.bucket + b.prefix, b.region}, ",")
}

func (b *Bucket) do(ctx context.Context, op, key string, f func() error) error {
	return retry(ctx, b.retry, b.log, op, key, f)
}

// List returns the keys (including the prefix) of the objects under the
// prefix that come after the key after (empty: all), skipping names that
// start with "_" (journal.IsPackListingCandidate), ordered by
// journal.ComparePackKeys. The server lists lexically from after
// (StartAfter) and the continuation tokens are followed, so listings
// longer than one page (1,000 keys) are complete. A failed page restarts
// the listing (Config.Retry).
func (b *Bucket) List(ctx context.Context, after string) ([]string, error) {
	const op = "list packs"
	var keys []string
	err := b.do(ctx, op, b.prefix, func() error {
		keys = keys[:0]
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for o := range b.c.ListObjects(lctx, b.bucket, minio.ListObjectsOptions{Prefix: b.prefix, Recursive: true, StartAfter: after}) {
			if o.Err != nil {
				return b.wrap(ctx, op, b.prefix, o.Err)
			}
			if !strings.HasPrefix(o.Key, b.prefix) || !journal.IsPackListingCandidate(o.Key[len(b.prefix):]) {
				continue
			}
			keys = append(keys, o.Key)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(keys, func(i, j int) bool { return journal.ComparePackKeys(keys[i], keys[j]) < 0 })
	return keys, nil
}

// Get downloads the whole object stored under key (prefix included). An
// absent object wraps engine.ErrNotFound.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	if err := b.checkKey("read object", key); err != nil {
		return nil, err
	}
	body, _, err := b.getObject(ctx, "read object", key)
	return body, err
}

// Put creates the object key (prefix included) with body, with one
// PutObject, so that readers see either no object or all of it. Keys
// ending in ".json" are stored as application/json, others as
// application/octet-stream, as upstream does.
//
// Put is create-only (journalsync.Objects): the request carries
// If-None-Match: *, and when the key exists the server answers 412
// PreconditionFailed (or 409 ConditionalRequestConflict while another
// conditional write of the key is in flight); Put then returns an
// *engine.Error with StageStorage wrapping journalsync.ErrExists, and the
// stored object is unchanged. When an earlier attempt of the same call
// failed in transit (so it may have stored the object before its answer
// was lost), a 412 is checked with one GET: an object equal to body
// means that attempt succeeded, and Put returns nil. A server that
// ignores If-None-Match (see the package documentation) replaces the
// existing object as a plain PutObject does, so two devices sending in
// the same millisecond may lose one pack there, as upstream LiveSync
// always may. To replace an object, use PutObject.
func (b *Bucket) Put(ctx context.Context, key string, body []byte) error {
	if err := b.checkKey("write object", key); err != nil {
		return err
	}
	return b.create(ctx, "write object", key, body, contentType(key))
}

// create is a PutObject with If-None-Match: * whose lost precondition is
// journalsync.ErrExists (see Put).
func (b *Bucket) create(ctx context.Context, op, key string, body []byte, contentType string) error {
	_, err := b.putObject(ctx, op, key, body, contentType, put{ifAbsent: true})
	if !errors.Is(err, errPrecondition) {
		return err
	}
	if errors.Is(err, errRetried) {
		if stored, _, gerr := b.getObject(ctx, op, key); gerr == nil && bytes.Equal(stored, body) {
			return nil // an earlier attempt of this call stored it
		}
	}
	return &engine.Error{Op: op, DocID: key, Stage: engine.StageStorage,
		Err: fmt.Errorf("minio: the server refused to replace the existing object: %w", journalsync.ErrExists)}
}

func contentType(key string) string {
	if strings.HasSuffix(key, ".json") {
		return "application/json"
	}
	return "application/octet-stream"
}

func (b *Bucket) checkKey(op, key string) error {
	if !strings.HasPrefix(key, b.prefix) || len(key) == len(b.prefix) {
		return &engine.Error{Op: op, DocID: key, Stage: engine.StageProtocol,
			Err: fmt.Errorf("minio: the key is not an object under the prefix %q", b.prefix)}
	}
	return nil
}

// GetSyncParameters reads the sync-parameters object. A
// missing object wraps engine.ErrNotFound (and a missing bucket also
// ErrNoBucket); a malformed one is StageDecode.
func (b *Bucket) GetSyncParameters(ctx context.Context) (negotiate.SyncParameters, error) {
	p, _, err := b.readSyncParams(ctx)
	if err != nil {
		return negotiate.SyncParameters{}, err
	}
	return *p, nil
}

func (b *Bucket) readSyncParams(ctx context.Context) (*negotiate.SyncParameters, string, error) {
	const op = "read sync parameters"
	key := b.prefix + negotiate.JournalSyncParametersKey
	raw, etag, err := b.getObject(ctx, op, key)
	if err != nil {
		return nil, "", err
	}
	p, err := negotiate.ParseSyncParameters(raw)
	if err != nil {
		return nil, "", &engine.Error{Op: op, DocID: key, Stage: engine.StageDecode, Err: err}
	}
	return &p, etag, nil
}

// EnsureSyncParameters returns the sync parameters, creating the salt
// when the bucket has none (negotiate.EnsureSyncParameters): only when the
// object is proven absent (NoSuchKey) or holds an empty salt does it write
// one, with a conditional PutObject (If-None-Match: * when absent,
// If-Match its ETag when salt-less) so that of two clients creating it at
// once one wins; then it reads the object back and returns what is
// stored, which may be the other client's salt. Any other read failure
// (auth, network, a missing bucket, a malformed body) is returned and
// nothing is written.
func (b *Bucket) EnsureSyncParameters(ctx context.Context) (negotiate.SyncParameters, error) {
	return negotiate.EnsureSyncParameters(ctx, b.Negotiate(), false)
}

// GetMilestone returns the raw milestone JSON; a missing object wraps
// engine.ErrNotFound.
func (b *Bucket) GetMilestone(ctx context.Context) ([]byte, error) {
	body, _, err := b.getObject(ctx, "read milestone", b.prefix+negotiate.JournalMilestoneKey)
	return body, err
}

// PutMilestone uploads the milestone JSON (never encrypted), replacing
// the object.
func (b *Bucket) PutMilestone(ctx context.Context, body []byte) error {
	_, err := b.putObject(ctx, "write milestone", b.prefix+negotiate.JournalMilestoneKey, body, "application/json", put{})
	return err
}

// PutPack seals records (journal.Seal with c; nil means plain) and
// creates them with one PutObject under journal.PackKey(prefix, now),
// create-only as Put: when that key exists it tries the next
// millisecond, up to packKeyTries keys, and then returns the
// journalsync.ErrExists error. It returns the key.
func (b *Bucket) PutPack(ctx context.Context, records []journal.Record, c journal.Cipher) (string, error) {
	body, err := journal.Seal(records, c)
	if err != nil {
		return "", err
	}
	ms := b.now().UnixMilli()
	for try := 1; ; try++ {
		key := journal.PackKey(b.prefix, ms+int64(try-1))
		err := b.create(ctx, "write pack", key, body, "application/octet-stream")
		if err == nil {
			return key, nil
		}
		if !errors.Is(err, journalsync.ErrExists) || try == packKeyTries {
			return "", err
		}
	}
}

// packKeyTries bounds the keys PutPack tries.
const packKeyTries = 16

// PutObject uploads body under prefix+name as it is (for tools and tests
// that copy packs written elsewhere), replacing an existing object:
// unlike Put it is unconditional.
func (b *Bucket) PutObject(ctx context.Context, name string, body []byte) error {
	_, err := b.putObject(ctx, "write object", b.prefix+name, body, contentType(name), put{})
	return err
}

// GetPack downloads the pack stored under key (as returned by List) and
// opens it with journal.Open.
func (b *Bucket) GetPack(ctx context.Context, key string, c journal.Cipher) ([]journal.Record, error) {
	body, _, err := b.getObject(ctx, "read pack", key)
	if err != nil {
		return nil, err
	}
	return journal.Open(key, body, c, 0)
}

// getObject downloads a whole object and its ETag with one GET request
// (minio-go's Object would send a HEAD first, whose error answers carry no
// S3 code, and then a GET conditional on the HEAD's ETag).
func (b *Bucket) getObject(ctx context.Context, op, key string) (body []byte, etag string, err error) {
	err = b.do(ctx, op, key, func() error {
		rc, info, _, err := minio.Core{Client: b.c}.GetObject(ctx, b.bucket, key, minio.GetObjectOptions{})
		if err != nil {
			return b.wrap(ctx, op, key, err)
		}
		defer rc.Close()
		data, err := io.ReadAll(rc)
		if err != nil {
			return b.wrap(ctx, op, key, err)
		}
		if int64(len(data)) != info.Size {
			return &engine.Error{Op: op, DocID: key, Stage: engine.StageTransport,
				Err: fmt.Errorf("minio: %s: got %d bytes of %d", b.endpointURL, len(data), info.Size)}
		}
		body, etag = data, info.ETag
		return nil
	})
	return body, etag, err
}

// put is the precondition of a PutObject.
type put struct {
	ifAbsent bool   // If-None-Match: *
	ifMatch  string // If-Match: this ETag
}

// putObject uploads body with one PutObject (no multipart) carrying a
// Content-MD5, so the server stores all of it or nothing. A failed
// precondition wraps errPrecondition, and also errRetried when an
// earlier attempt failed in transit. It returns the stored object's ETag.
func (b *Bucket) putObject(ctx context.Context, op, key string, body []byte, contentType string, cond put) (etag string, err error) {
	attempts := 0
	err = b.do(ctx, op, key, func() error {
		attempts++
		opts := minio.PutObjectOptions{ContentType: contentType, DisableMultipart: true, SendContentMd5: true}
		switch {
		case cond.ifAbsent:
			opts.SetMatchETagExcept("*")
		case cond.ifMatch != "":
			opts.SetMatchETag(cond.ifMatch)
		}
		info, err := b.c.PutObject(ctx, b.bucket, key, bytes.NewReader(body), int64(len(body)), opts)
		if err != nil {
			return b.wrap(ctx, op, key, err)
		}
		etag = info.ETag
		return nil
	})
	if attempts > 1 && errors.Is(err, errPrecondition) {
		err = &retriedError{err}
	}
	return etag, err
}

// errRetried marks an error of a request whose earlier attempts failed in
// transit (they may have been applied).
var errRetried = errors.New("minio: retried")

type retriedError struct{ error }

func (e *retriedError) Unwrap() []error { return []error{e.error, errRetried} }
