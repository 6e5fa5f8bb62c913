package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// bucketRemote is what a bucket upstream needs of its bucket: the
// journal's objects and the sync parameters (the bucket's own salt).
// *minio.Bucket implements it.
type bucketRemote interface {
	journalsync.Objects
	EnsureSyncParameters(ctx context.Context) (negotiate.SyncParameters, error)
}

// openBucket opens a bucket upstream's bucket (tests replace it with an
// in-memory bucket).
var openBucket = func(cfg minio.Config, log *slog.Logger) (bucketRemote, error) {
	cfg.Logger = log
	return minio.New(cfg)
}

// bucketThrottleKey is a bucket upstream's hunt throttle key and hold-back
// source: "endpoint,bucket,prefix" with endpoint "http(s)://host[:port]",
// one key per journal, its three parts kept apart. (It is not the
// journal's checkpoint identity, minio.Bucket.ID, which must stay
// byte-compatible with the plugin's.)
func bucketThrottleKey(spec upstreamSpec) string {
	ep := spec.s3.Endpoint
	if !strings.Contains(ep, "://") {
		ep = "http://" + ep
		if spec.s3.Secure {
			ep = "https://" + spec.s3.Endpoint
		}
	}
	return strings.Join([]string{strings.TrimSuffix(ep, "/"), spec.s3.Bucket, spec.s3.Prefix}, ",")
}

// errPlainVault: a bucket upstream declared e2ee = false met an encrypted
// vault.
var errPlainVault = errors.New("the vault uses end-to-end encryption, but this bucket upstream is configured with e2ee = false and the database has no passphrase")

// bucketSession is one connection of a bucket upstream: the bucket's
// salt, the relay database's codec, then the journal — received, sent
// or both every poll interval, and at once when the relay database
// changes (push and sync) — until it fails or ctx ends. A source-only
// upstream only answers the hunt from its pack index.
func (u *upstream) bucketSession(ctx context.Context, gen uint64, delay *time.Duration) error {
	u.setState(stateConnecting)
	j, err := u.openJournal(ctx)
	if err != nil {
		return err
	}
	if u.b.gen.Load() != gen {
		return errSaltChanged
	}
	if u.spec.mode == modeSource {
		u.succeeded(stateLive)
		<-ctx.Done()
		return ctx.Err()
	}
	return u.followJournal(ctx, j, delay)
}

// openJournal reads the bucket's sync parameters (creating its salt when
// it has none, as any client does), builds the relay database's codec
// and the journal over codecView, and installs the chunk source.
func (u *upstream) openJournal(ctx context.Context) (*journalsync.Journal, error) {
	if err := u.reconcileSettings(ctx); err != nil {
		return nil, err
	}
	params, err := u.bucket.EnsureSyncParameters(ctx)
	if err != nil {
		return nil, err
	}
	bucketSalt, err := params.Salt()
	if err != nil {
		return nil, &engine.Error{Op: "read sync parameters", DocID: negotiate.JournalSyncParametersKey, Stage: engine.StageDecode, Err: err}
	}
	codec, plain, err := u.bucketCodec(ctx)
	if err != nil {
		return nil, err
	}
	cipher, err := journalsync.CipherFor(codec.Settings(), bucketSalt)
	if err != nil {
		return nil, err
	}
	view := &codecView{v: u.b.v, codec: codec, source: u.key, plain: plain}
	j, err := journalsync.New(journalsync.Config{
		Local: view, Remote: u.bucket, Cipher: cipher, Epoch: negotiate.JournalEpoch(params),
		// A wiped bucket gets everything again (upstream_identity.go).
		ResendAfterWipe: true,
		OnWipe: func() {
			u.noteReset("the bucket was wiped or set up again (a new journal epoch)")
		},
		DirectFetch: u.spec.directFetch, Progress: u.journalProgress,
		Log: u.log.With("component", "journal"),
	})
	if err != nil {
		return nil, err
	}
	u.journal.Store(j)
	src := j.ChunkSource()
	u.chunks.Store(&upstreamSource{u: u, direct: src.CanFetchDirect(), fetch: func(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
		res, err := src.FetchChunks(ctx, ids)
		if err != nil {
			return res, err
		}
		found := make([]engine.Chunk, 0, len(res.Found))
		for _, c := range res.Found {
			if plain && isE2EEChunkID(c.ID) {
				return engine.FetchResult{}, errPlainVault
			}
			raw, err := encodeChunk(codec, c)
			if err != nil {
				return engine.FetchResult{}, err
			}
			found = append(found, rawChunk(c.ID, raw))
		}
		res.Found = found
		return res, nil
	}})
	u.setBoundary(boundaryEncode)
	u.mu.Lock()
	u.epoch = negotiate.JournalEpoch(params)
	u.mu.Unlock()
	return j, nil
}

// bucketCodec returns the relay database's codec: with the passphrase,
// the vault's (creating the relay database's salt when it has none);
// without, for a vault declared unencrypted, a codec without encryption
// (plain true).
func (u *upstream) bucketCodec(ctx context.Context) (*livesync.Codec, bool, error) {
	if !u.b.v.hasPassphrase() {
		c, err := livesync.New(livesync.Config{})
		return c, true, err
	}
	salt, err := u.b.ensureRelaySalt(ctx)
	if err != nil {
		return nil, false, err
	}
	codec, codecSalt := u.b.v.currentCodec()
	if codec == nil || !sameSalt(codecSalt, salt) {
		return nil, false, errors.New("the relay database's vault codec could not be built from its sync parameters and the passphrase (see the log)")
	}
	return codec, false, nil
}

// followJournal runs the journal by mode until it fails or ctx ends.
func (u *upstream) followJournal(ctx context.Context, j *journalsync.Journal, delay *time.Duration) error {
	var wake <-chan struct{}
	if u.spec.mode != modePull {
		w := make(chan struct{}, 1)
		wake = w
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan struct{})
		defer func() { cancel(); <-done }()
		go func() { defer close(done); u.watchRelay(wctx, w) }()
	}
	u.setState(stateCatchingUp)
	for {
		var err error
		switch u.spec.mode {
		case modePull:
			_, err = j.Receive(ctx)
		case modePush:
			_, err = j.Send(ctx)
		default:
			_, err = j.Sync(ctx)
		}
		if err != nil {
			return err
		}
		u.mu.Lock()
		u.state, u.lastOK, u.pullPending, u.pushPending = stateLive, time.Now(), 0, 0
		u.mu.Unlock()
		*delay = minRetry
		t := time.NewTimer(u.spec.pollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		case <-wake:
			t.Stop()
		}
		// Before a pass, so that nothing is sealed for a bucket wiped
		// meanwhile (upstream_identity.go).
		if err := u.checkBucketEpoch(ctx); err != nil {
			return err
		}
	}
}

// watchRelay signals w whenever the relay database's feed moves.
func (u *upstream) watchRelay(ctx context.Context, w chan<- struct{}) {
	info, err := u.b.v.Info(ctx)
	if err != nil {
		return
	}
	since := info.UpdateSeq
	for ctx.Err() == nil {
		page, err := u.b.v.Changes(ctx, engine.ChangesRequest{Since: since, Wait: true, Limit: 100})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		since = page.LastSeq
		if len(page.Results) > 0 {
			select {
			case w <- struct{}{}:
			default:
			}
		}
	}
}

// journalProgress records a pack received or sent.
func (u *upstream) journalProgress(p journalsync.Progress) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch p.Direction {
	case journalsync.Receiving:
		u.pullSeq = p.Key
		u.pullPending = max(p.Total-p.Packs, 0)
		u.pulled += uint64(countDelta(&u.lastPulled, p.Docs+p.Chunks))
	case journalsync.Sending:
		u.pushSeq = p.Key
		u.pushed += uint64(countDelta(&u.lastPushed, p.Docs+p.Chunks))
	}
	u.lastOK = time.Now()
}

// isE2EEChunkID reports a chunk id of an end-to-end encrypted vault.
func isE2EEChunkID(id string) bool { return strings.HasPrefix(id, "h:+") }

// codecView is a store.Store view of a relay database in the local
// plaintext form, for a journal: what it reads is decoded with the
// relay database's codec, what it writes is encoded with it (the relay
// keeps the remote form) and written through the hold-back as pulled
// from source. Changes, revisions and _local documents pass unchanged.
// It never closes the database. With plain (a vault declared without
// encryption and no passphrase), E2EE chunks are refused rather than
// stored in plaintext.
type codecView struct {
	v      *vaultStore
	codec  *livesync.Codec
	source string
	plain  bool
}

var _ store.Store = (*codecView)(nil)

// Info describes the database.
func (c *codecView) Info(ctx context.Context) (engine.EndpointInfo, error) { return c.v.Info(ctx) }

// Changes lists changes.
func (c *codecView) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	return c.v.Changes(ctx, req)
}

// RevsDiff reports missing revisions.
func (c *codecView) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	return c.v.RevsDiff(ctx, revs)
}

// BulkGet reads revisions, decoded.
func (c *codecView) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	docs, err := c.v.BulkGet(ctx, revs)
	if err != nil {
		return nil, err
	}
	for i, d := range docs {
		if docs[i], err = c.decode(d); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// BulkDocs encodes and writes received revisions.
func (c *codecView) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	out := make([]json.RawMessage, len(docs))
	for i, d := range docs {
		var err error
		if out[i], err = c.encode(d); err != nil {
			return nil, err
		}
	}
	return c.v.BulkDocsFrom(ctx, c.source, out)
}

// GetLocal reads a _local document (the journal's checkpoint).
func (c *codecView) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	return c.v.GetLocal(ctx, id)
}

// PutLocal writes a _local document.
func (c *codecView) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	return c.v.PutLocal(ctx, id, doc)
}

// GetChunks reads chunks, decrypted.
func (c *codecView) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	have, err := c.v.GetChunks(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[engine.ChunkID]engine.Chunk, len(have))
	for id := range have {
		raw, err := c.v.Get(ctx, id, store.GetOptions{})
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		d, err := c.decode(raw)
		if err != nil {
			return nil, err
		}
		doc, err := livesync.ParseDoc(d)
		if err != nil {
			return nil, err
		}
		ch, err := livesync.ParseChunk(doc)
		if err != nil {
			return nil, err
		}
		out[id] = engine.Chunk{ID: ch.ID, Data: ch.Data}
	}
	return out, nil
}

// PutChunks encodes and writes chunks the database lacks.
func (c *codecView) PutChunks(ctx context.Context, chunks []engine.Chunk) error {
	ids := make([]engine.ChunkID, len(chunks))
	for i, ch := range chunks {
		ids[i] = ch.ID
	}
	have, err := c.v.GetChunks(ctx, ids)
	if err != nil {
		return err
	}
	var docs []json.RawMessage
	for _, ch := range chunks {
		if _, ok := have[ch.ID]; ok {
			continue
		}
		if c.plain && isE2EEChunkID(ch.ID) {
			return &engine.Error{Op: "store received chunk", DocID: ch.ID, Stage: engine.StageEncrypt, Err: errPlainVault}
		}
		raw, err := encodeChunk(c.codec, ch)
		if err != nil {
			return err
		}
		docs = append(docs, raw)
	}
	if len(docs) == 0 {
		return nil
	}
	res, err := c.v.BulkDocsFrom(ctx, c.source, docs)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Error != "" {
			return &engine.Error{Op: "store received chunk", DocID: r.ID, Stage: engine.StageStorage, Err: fmt.Errorf("%s: %s", r.Error, r.Reason)}
		}
	}
	return nil
}

// Get reads a document, decoded.
func (c *codecView) Get(ctx context.Context, id string, opts store.GetOptions) (json.RawMessage, error) {
	raw, err := c.v.Get(ctx, id, opts)
	if err != nil {
		return nil, err
	}
	return c.decode(raw)
}

// Put is not used by a journal: the relay never edits documents.
func (c *codecView) Put(context.Context, json.RawMessage) (string, error) {
	return "", fmt.Errorf("the relay's journal view does not edit documents: %w", engine.ErrUnsupported)
}

// AllDocs lists documents.
func (c *codecView) AllDocs(ctx context.Context, opts store.AllDocsOptions) ([]store.DocInfo, error) {
	return c.v.AllDocs(ctx, opts)
}

// Close does nothing: the view does not own the database.
func (c *codecView) Close() error { return nil }

func (c *codecView) decode(raw json.RawMessage) (json.RawMessage, error) {
	d, err := livesync.ParseDoc(raw)
	if err != nil {
		return nil, &engine.Error{Op: "decode document", Stage: engine.StageDecode, Err: err}
	}
	p, err := c.codec.DecodeRemote(d)
	if err != nil {
		if c.plain {
			return nil, fmt.Errorf("%w: %w", errPlainVault, err)
		}
		return nil, err
	}
	return p.MarshalJSON()
}

func (c *codecView) encode(raw json.RawMessage) (json.RawMessage, error) {
	d, err := livesync.ParseDoc(raw)
	if err != nil {
		return nil, &engine.Error{Op: "encode document", Stage: engine.StageDecode, Err: err}
	}
	if c.plain && isE2EEChunkID(d.ID()) {
		return nil, &engine.Error{Op: "store received document", DocID: d.ID(), Stage: engine.StageEncrypt, Err: errPlainVault}
	}
	e, err := c.codec.EncodeRemote(d)
	if err != nil {
		return nil, err
	}
	return e.MarshalJSON()
}
