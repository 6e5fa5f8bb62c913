package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/decorate"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

// errSaltDiffers: a CouchDB upstream's vault salt is not the database's,
// and without the passphrase the bridge cannot re-encrypt.
var errSaltDiffers = errors.New("the upstream's vault salt differs from the relay database's")

// ErrNoUpstreamDatabase: the upstream database does not exist. The
// bridge never creates it (a typo would create an empty one).
var ErrNoUpstreamDatabase = errors.New("the database does not exist on the upstream server: create it there, or fix database")

// couchSession is one connection of a CouchDB upstream: handshake
// (salts), then a finite first replication, then live replication,
// until it fails or ctx ends. A source-only upstream waits after the
// handshake: its hunt requests are all it does.
func (u *upstream) couchSession(ctx context.Context, gen uint64, delay *time.Duration) error {
	u.setState(StateConnecting)
	mem, id, reason, err := u.couchIdentityStep(ctx)
	if err != nil {
		return err
	}
	rec, err := u.couchHandshake(ctx)
	if err != nil {
		return err
	}
	if u.b.gen.Load() != gen {
		return errSaltChanged
	}
	remoteID, err := u.settleCouchIdentity(ctx, mem, id, reason)
	if err != nil {
		return err
	}
	if mem, err = u.loadMemory(ctx); err != nil {
		return err
	}
	sctx, end := context.WithCancelCause(ctx)
	defer end(nil)
	gate := &identityGate{u: u, end: end, mem: mem}
	done := make(chan struct{})
	go func() { defer close(done); gate.watch(sctx) }()
	defer func() { end(nil); <-done }()
	u.installCouchSource(rec)
	if u.spec.Mode == ModeSource {
		u.succeeded(StateLive)
		<-sctx.Done()
		return sessionErr(ctx, sctx)
	}
	err = u.replicateCouch(sctx, rec, remoteID, gate, delay)
	if cause := sessionErr(ctx, sctx); cause != nil {
		return cause
	}
	return err
}

// sessionErr is the reason the session's context sctx ended while its
// parent ctx did not (a reset, a re-key), nil otherwise.
func sessionErr(ctx, sctx context.Context) error {
	if ctx.Err() != nil || sctx.Err() == nil {
		return ctx.Err()
	}
	return context.Cause(sctx)
}

// couchHandshake settles how documents cross the boundary: it gives the
// database the upstream's salt when it has none (or creates one, with
// the passphrase), gives the upstream the database's when it has none,
// and returns a Recoder when the salts differ (nil: forward as is).
func (u *upstream) couchHandshake(ctx context.Context) (*decorate.Recoder, error) {
	db := u.couch
	ok, err := u.port.Exists(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &engine.Error{Op: "check database", DocID: u.spec.Database, Stage: engine.StageProtocol, Err: ErrNoUpstreamDatabase}
	}
	if err := u.reconcileSettings(ctx); err != nil { // before the salt: a disagreeing upstream gets nothing
		return nil, err
	}
	upRaw, upSalt, err := upstreamSalt(ctx, db)
	if err != nil {
		return nil, err
	}
	relayRaw, relaySalt, forward, err := u.settleRelaySalt(ctx, upRaw, upSalt)
	if err != nil || forward {
		return nil, err
	}
	if upSalt == nil && relaySalt != nil {
		if err := db.PutLocal(ctx, negotiate.SyncParametersLocalID, withoutMeta(relayRaw)); err != nil {
			return nil, fmt.Errorf("giving the upstream the vault's salt: %w", err)
		}
		if _, upSalt, err = upstreamSalt(ctx, db); err != nil {
			return nil, err
		}
		u.log.Info("the upstream had no vault salt: gave it the relay database's")
	}
	if bytes.Equal(upSalt, relaySalt) {
		u.setBoundary(BoundaryForward)
		return nil, nil
	}
	return u.recoder(upSalt, relaySalt)
}

// settleRelaySalt gives the database a salt when it has none: the
// upstream's, or a new one with the passphrase. forward is true when
// there is no salt anywhere and no passphrase (a vault without
// encryption, or one no client has set up yet): documents pass as they
// are.
func (u *upstream) settleRelaySalt(ctx context.Context, upRaw json.RawMessage, upSalt []byte) (json.RawMessage, []byte, bool, error) {
	b := u.b
	relayRaw, relaySalt, err := b.relaySalt(ctx)
	if err != nil || relaySalt != nil {
		return relayRaw, relaySalt, false, err
	}
	switch {
	case upSalt != nil:
		if err := b.adoptSalt(ctx, upRaw); err != nil {
			return nil, nil, false, err
		}
	case b.v.HasPassphrase():
		if _, err := b.ensureRelaySalt(ctx); err != nil {
			return nil, nil, false, err
		}
	default:
		u.setBoundary(BoundaryForward)
		return nil, nil, true, nil
	}
	relayRaw, relaySalt, err = b.relaySalt(ctx)
	return relayRaw, relaySalt, false, err
}

// recoder re-encrypts between the upstream's salt and the database's,
// which needs the vault's codec.
func (u *upstream) recoder(upSalt, relaySalt []byte) (*decorate.Recoder, error) {
	codec, codecSalt := u.b.v.Codec()
	if codec == nil {
		return nil, engine.Permanent(fmt.Errorf("%w: without the vault passphrase the relay forwards documents only to upstreams with the same salt; "+
			"set passphrase_file or passphrase_env for database %q so that it re-encrypts at this boundary", errSaltDiffers, u.b.db))
	}
	if !bytes.Equal(codecSalt, relaySalt) {
		return nil, errors.New("the relay database's vault codec is not ready yet (its salt changed); retrying")
	}
	upCodec, err := livesync.New(livesync.Config{Settings: codec.Settings(), Salt: upSalt})
	if err != nil {
		return nil, err
	}
	u.setBoundary(BoundaryReencrypt)
	return &decorate.Recoder{Remote: upCodec, Local: codec}, nil
}

// withoutMeta drops _id, _rev and _revisions from a document.
func withoutMeta(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	delete(m, "_id")
	delete(m, "_rev")
	delete(m, "_revisions")
	b, _ := json.Marshal(m)
	return b
}

// installCouchSource makes the upstream a chunk source of the hunt: raw
// documents by id, re-encrypted when the salts differ.
func (u *upstream) installCouchSource(rec *decorate.Recoder) {
	db := u.spec.Docs
	u.chunks.Store(&upstreamSource{direct: true, fetch: func(ctx context.Context, ids []engine.ChunkID) ([]RawChunk, []engine.ChunkID, error) {
		docs, err := db.DocsByID(ctx, ids)
		if err != nil {
			return nil, nil, err
		}
		var found []RawChunk
		var missing []engine.ChunkID
		for _, id := range ids {
			raw, ok := docs[id]
			if !ok {
				missing = append(missing, id)
				continue
			}
			if rec != nil {
				if raw, err = rec.ToLocal(raw); err != nil {
					return nil, nil, err
				}
			}
			found = append(found, RawChunk{ID: id, Doc: raw})
		}
		return found, missing, nil
	}})
}

// replicateCouch runs the finite first replication, then live
// replication until it fails or ctx ends. A successful batch resets
// delay.
func (u *upstream) replicateCouch(ctx context.Context, rec *decorate.Recoder, remoteID string, gate *identityGate, delay *time.Duration) error {
	remote := u.couch
	if rec != nil {
		remote = decorate.Recode(remote, *rec)
	}
	remote = watchedEndpoint{Endpoint: remote, u: u, gate: gate}
	cfg := replicate.Config{
		Local:        pulledInto{Local: u.b.v, source: u.spec.ThrottleKey},
		Remote:       remote,
		LocalID:      "livesync-relay/" + u.b.uuid + "/" + u.b.db,
		RemoteID:     remoteID, // the marker in it: a reset starts from zero
		BatchesLimit: u.b.batches,
		Progress:     func(p replicate.Progress) { u.progress(p, delay) },
		OnRetry:      u.retrying,
		Log:          u.log,
	}
	if u.spec.ChunksOnline {
		cfg.Selector = replicate.ChunksOnlineSelector
	}
	r, err := replicate.New(cfg)
	if err != nil {
		return err
	}
	defer r.Close()
	dir := replicate.Sync
	switch u.spec.Mode {
	case ModePull:
		dir = replicate.Pull
	case ModePush:
		dir = replicate.Push
	}
	u.setState(StateCatchingUp)
	var res replicate.Result
	switch dir {
	case replicate.Pull:
		res, err = r.Pull(ctx)
	case replicate.Push:
		res, err = r.Push(ctx)
	default:
		res, err = r.Sync(ctx)
	}
	if err != nil {
		return err
	}
	u.caughtUp(res, dir)
	*delay = MinRetry
	return r.Live(ctx, dir)
}

// progress records a batch of the live or first replication.
func (u *upstream) progress(p replicate.Progress, delay *time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch p.Direction {
	case replicate.Pull:
		u.pullSeq, u.pullPending = p.LastSeq, p.Pending
		u.pullExact = p.Pending >= 0
		if p.Pending < 0 { // express-pouchdb answers no pending
			u.pullPending = seqLag(p.LastSeq, u.upSeq)
		}
		u.pulled += uint64(countDelta(&u.lastPulled, p.DocsWritten))
	case replicate.Push:
		u.pushSeq, u.pushPending = p.LastSeq, p.Pending
		u.pushed += uint64(countDelta(&u.lastPushed, p.DocsWritten))
	}
	u.lastOK = time.Now()
	if u.state == StateBackoff {
		u.state = StateLive
	}
}

// caughtUp records the end of the first replication.
func (u *upstream) caughtUp(res replicate.Result, dir replicate.Direction) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if dir&replicate.Pull != 0 && res.Pull.LastSeq != "" {
		u.pullSeq = res.Pull.LastSeq
	}
	if dir&replicate.Push != 0 && res.Push.LastSeq != "" {
		u.pushSeq = res.Push.LastSeq
	}
	if dir&replicate.Pull != 0 {
		u.pullPending = 0
	}
	if dir&replicate.Push != 0 {
		u.pushPending = 0
	}
	u.lastPulled, u.lastPushed = 0, 0
	u.state, u.lastOK = StateLive, time.Now()
}

// pulledInto is the local side of an upstream's replication: the
// database, with pulled documents written as pulled from the upstream
// (BulkDocsFrom with its throttle key), so that metadata whose chunks
// are missing is held with the pulled delay and hunted there first.
type pulledInto struct {
	Local
	source string
}

// BulkDocs writes pulled documents.
func (p pulledInto) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	return p.Local.BulkDocsFrom(ctx, p.source, docs)
}

// retrying records a failure the replicator retries by itself (a live
// feed reconnecting, a catch-up retrying, smaller batches) in the
// upstream's status: backoff until a request succeeds again
// (watchedEndpoint). Typed, from replicate.Config.OnRetry: the status
// never reads the log.
func (u *upstream) retrying(rt replicate.Retry) {
	msg := rt.What + " failed; retrying"
	if rt.Delay > 0 {
		msg += " in " + rt.Delay.String()
	}
	msg += ": " + u.explain(rt.Err)
	u.mu.Lock()
	u.state, u.lastErr, u.lastErrAt = StateBackoff, msg, time.Now()
	u.errs++
	u.mu.Unlock()
}
