package bridge

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/decorate"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// ErrPlainVault: a bucket upstream declared without encryption met an
// encrypted vault.
var ErrPlainVault = errors.New("the vault uses end-to-end encryption, but this bucket upstream is configured with e2ee = false and the database has no passphrase")

// bucketSession is one connection of a bucket upstream: the bucket's
// salt, the relay database's codec, then the journal — received, sent
// or both every poll interval, and at once when the relay database
// changes (push and sync) — until it fails or ctx ends. A source-only
// upstream only answers the hunt from its pack index.
func (u *upstream) bucketSession(ctx context.Context, gen uint64, delay *time.Duration) error {
	u.setState(StateConnecting)
	j, err := u.openJournal(ctx)
	if err != nil {
		return err
	}
	if u.b.gen.Load() != gen {
		return errSaltChanged
	}
	if u.spec.Mode == ModeSource {
		u.succeeded(StateLive)
		<-ctx.Done()
		return ctx.Err()
	}
	return u.followJournal(ctx, j, delay)
}

// openJournal reads the bucket's sync parameters (creating its salt when
// it has none, as any client does), builds the relay database's codec
// and the journal over decorate.CodecView, and installs the chunk source.
func (u *upstream) openJournal(ctx context.Context) (*journalsync.Journal, error) {
	if err := u.reconcileSettings(ctx); err != nil {
		return nil, err
	}
	params, err := negotiate.EnsureSyncParameters(ctx, u.port, false)
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
	var plainErr error
	if plain {
		plainErr = engine.Permanent(ErrPlainVault)
	}
	view := decorate.CodecView(pulledInto{Local: u.b.v, source: u.spec.ThrottleKey}, codec, decorate.CodecOptions{Plain: plainErr})
	j, err := journalsync.New(journalsync.Config{
		Local: view, Remote: u.objects, Cipher: cipher, Epoch: negotiate.JournalEpoch(params),
		// A wiped bucket gets everything again (see checkBucketEpoch).
		ResendAfterWipe: true,
		OnWipe: func() {
			u.noteReset("the bucket was wiped or set up again (a new journal epoch)")
		},
		DirectFetch: u.spec.DirectFetch, Progress: u.journalProgress,
		Log: u.log.With("component", "journal"),
	})
	if err != nil {
		return nil, err
	}
	u.journal.Store(j)
	src := j.ChunkSource()
	u.chunks.Store(&upstreamSource{direct: src.CanFetchDirect(), fetch: func(ctx context.Context, ids []engine.ChunkID) ([]RawChunk, []engine.ChunkID, error) {
		res, err := src.FetchChunks(ctx, ids)
		if err != nil {
			return nil, nil, err
		}
		found := make([]RawChunk, 0, len(res.Found))
		for _, c := range res.Found {
			if plain && decorate.IsE2EEChunkID(c.ID) {
				return nil, nil, engine.Permanent(ErrPlainVault)
			}
			raw, err := decorate.EncodeChunk(codec, c)
			if err != nil {
				return nil, nil, err
			}
			found = append(found, RawChunk{ID: c.ID, Doc: raw})
		}
		return found, res.Missing, nil
	}})
	u.setBoundary(BoundaryEncode)
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
	if !u.b.v.HasPassphrase() {
		c, err := livesync.New(livesync.Config{})
		return c, true, err
	}
	salt, err := u.b.ensureRelaySalt(ctx)
	if err != nil {
		return nil, false, err
	}
	codec, codecSalt := u.b.v.Codec()
	if codec == nil || !bytes.Equal(codecSalt, salt) {
		return nil, false, errors.New("the relay database's vault codec could not be built from its sync parameters and the passphrase (see the log)")
	}
	return codec, false, nil
}

// followJournal runs the journal by mode until it fails or ctx ends.
func (u *upstream) followJournal(ctx context.Context, j *journalsync.Journal, delay *time.Duration) error {
	var wake <-chan struct{}
	if u.spec.Mode != ModePull {
		w := make(chan struct{}, 1)
		wake = w
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan struct{})
		defer func() { cancel(); <-done }()
		go func() { defer close(done); u.watchRelay(wctx, w) }()
	}
	u.setState(StateCatchingUp)
	for {
		var err error
		switch u.spec.Mode {
		case ModePull:
			_, err = j.Receive(ctx)
		case ModePush:
			_, err = j.Send(ctx)
		default:
			_, err = j.Sync(ctx)
		}
		if err != nil {
			return err
		}
		u.mu.Lock()
		u.state, u.lastOK, u.pullPending, u.pushPending = StateLive, time.Now(), 0, 0
		u.mu.Unlock()
		*delay = MinRetry
		t := time.NewTimer(u.spec.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		case <-wake:
			t.Stop()
		}
		// Before a pass, so that nothing is sealed for a bucket wiped
		// meanwhile.
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
