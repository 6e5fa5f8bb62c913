package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

// errSaltDiffers: a CouchDB upstream's vault salt is not the relay
// database's, and without the passphrase the relay cannot re-encrypt.
var errSaltDiffers = errors.New("the upstream's vault salt differs from the relay database's")

// errNoUpstreamDatabase: the upstream database does not exist. The relay
// never creates it (a typo would create an empty one).
var errNoUpstreamDatabase = errors.New("the database does not exist on the upstream server: create it there, or fix database")

// couchSession is one connection of a CouchDB upstream: handshake
// (salts), then a finite first replication, then live replication,
// until it fails or ctx ends. A source-only upstream waits after the
// handshake: its hunt requests are all it does.
func (u *upstream) couchSession(ctx context.Context, gen uint64, delay *time.Duration) error {
	u.setState(stateConnecting)
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
	if u.spec.mode == modeSource {
		u.succeeded(stateLive)
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
// relay database the upstream's salt when it has none (or creates one,
// with the passphrase), gives the upstream the relay's when it has none,
// and returns a recoder when the salts differ (nil: forward as is).
func (u *upstream) couchHandshake(ctx context.Context) (*recoder, error) {
	ok, err := u.couch.Exists(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &engine.Error{Op: "check database", DocID: u.spec.couch.Database, Stage: engine.StageProtocol, Err: errNoUpstreamDatabase}
	}
	if err := u.reconcileSettings(ctx); err != nil { // before the salt: a disagreeing upstream gets nothing
		return nil, err
	}
	b := u.b
	upRaw, upSalt, err := upstreamSalt(ctx, u.couch)
	if err != nil {
		return nil, err
	}
	relayRaw, relaySalt, err := b.relaySalt(ctx)
	if err != nil {
		return nil, err
	}
	if relaySalt == nil {
		switch {
		case upSalt != nil:
			if err := b.adoptSalt(ctx, upRaw); err != nil {
				return nil, err
			}
		case b.v.hasPassphrase():
			if _, err := b.ensureRelaySalt(ctx); err != nil {
				return nil, err
			}
		default:
			// No salt anywhere and no passphrase: a vault without
			// encryption, or one no client has set up yet. Forward.
			u.setBoundary(boundaryForward)
			return nil, nil
		}
		if relayRaw, relaySalt, err = b.relaySalt(ctx); err != nil {
			return nil, err
		}
	}
	if upSalt == nil && relaySalt != nil {
		if err := u.couch.PutLocal(ctx, syncParamsLocalID, withoutMeta(relayRaw)); err != nil {
			return nil, fmt.Errorf("giving the upstream the vault's salt: %w", err)
		}
		if upRaw, upSalt, err = upstreamSalt(ctx, u.couch); err != nil {
			return nil, err
		}
		_ = upRaw
		u.log.Info("the upstream had no vault salt: gave it the relay database's")
	}
	if sameSalt(upSalt, relaySalt) {
		u.setBoundary(boundaryForward)
		return nil, nil
	}
	codec, codecSalt := b.v.currentCodec()
	if codec == nil {
		return nil, fmt.Errorf("%w: without the vault passphrase the relay forwards documents only to upstreams with the same salt; "+
			"set passphrase_file or passphrase_env for database %q so that it re-encrypts at this boundary", errSaltDiffers, b.db)
	}
	if !sameSalt(codecSalt, relaySalt) {
		return nil, errors.New("the relay database's vault codec is not ready yet (its salt changed); retrying")
	}
	upCodec, err := livesync.New(livesync.Config{Settings: codec.Settings(), Salt: upSalt})
	if err != nil {
		return nil, err
	}
	u.setBoundary(boundaryReencrypt)
	return &recoder{up: upCodec, relay: codec}, nil
}

func (u *upstream) setBoundary(b string) {
	u.mu.Lock()
	u.boundary = b
	u.mu.Unlock()
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
func (u *upstream) installCouchSource(rec *recoder) {
	db := u.couch
	u.chunks.Store(&upstreamSource{u: u, direct: true, fetch: func(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
		docs, err := db.DocsByID(ctx, ids)
		if err != nil {
			return engine.FetchResult{}, err
		}
		var res engine.FetchResult
		for _, id := range ids {
			raw, ok := docs[id]
			if !ok {
				res.Missing = append(res.Missing, id)
				continue
			}
			if rec != nil {
				if raw, err = rec.toRelay(raw); err != nil {
					return engine.FetchResult{}, err
				}
			}
			res.Found = append(res.Found, rawChunk(id, raw))
		}
		return res, nil
	}})
}

// replicateCouch runs the finite first replication, then live
// replication until it fails or ctx ends. A successful batch resets
// delay.
func (u *upstream) replicateCouch(ctx context.Context, rec *recoder, remoteID string, gate *identityGate, delay *time.Duration) error {
	var remote engine.Endpoint = u.couch
	if rec != nil {
		remote = recodedEndpoint{Endpoint: u.couch, rec: rec}
	}
	remote = watchedEndpoint{Endpoint: remote, u: u, gate: gate}
	cfg := replicate.Config{
		Local:    pulledInto{vaultStore: u.b.v, source: u.key},
		Remote:   remote,
		LocalID:  "livesync-relay/" + u.b.uuid + "/" + u.b.db,
		RemoteID: remoteID, // the marker in it: a reset starts from zero
		Progress: func(p replicate.Progress) { u.progress(p, delay) },
		OnRetry:  u.retrying,
		Log:      u.log,
	}
	if u.spec.chunksOnline {
		cfg.Selector = replicate.ChunksOnlineSelector
	}
	r, err := replicate.New(cfg)
	if err != nil {
		return err
	}
	defer r.Close()
	dir := replicate.Sync
	switch u.spec.mode {
	case modePull:
		dir = replicate.Pull
	case modePush:
		dir = replicate.Push
	}
	u.setState(stateCatchingUp)
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
	*delay = minRetry
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
	if u.state == stateBackoff {
		u.state = stateLive
	}
}

// countDelta turns a run's running total into an increment (a smaller
// total starts a new run).
func countDelta(last *int, total int) int {
	d := total - *last
	if d < 0 {
		d = total
	}
	*last = total
	return d
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
	u.state, u.lastOK = stateLive, time.Now()
}

// pulledInto is the local side of an upstream's replication: the relay
// database, with pulled documents written through the hold-back as
// pulled from the upstream (holdback BulkDocsFrom with its throttle key),
// so that metadata whose chunks are missing is held with the pulled
// delay and hunted on that upstream first.
type pulledInto struct {
	*vaultStore
	source string
}

// BulkDocs writes pulled documents.
func (p pulledInto) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	return p.vaultStore.BulkDocsFrom(ctx, p.source, docs)
}

// recoder re-encrypts documents between an upstream's salt and the relay
// database's (same passphrase and settings). Revisions are kept.
type recoder struct{ up, relay *livesync.Codec }

func (r *recoder) toRelay(raw json.RawMessage) (json.RawMessage, error) {
	return recode(raw, r.up, r.relay)
}

func (r *recoder) toUpstream(raw json.RawMessage) (json.RawMessage, error) {
	return recode(raw, r.relay, r.up)
}

func recode(raw json.RawMessage, from, to *livesync.Codec) (json.RawMessage, error) {
	d, err := livesync.ParseDoc(raw)
	if err != nil {
		return nil, &engine.Error{Op: "re-encrypt document", Stage: engine.StageDecode, Err: err}
	}
	p, err := from.DecodeRemote(d)
	if err != nil {
		return nil, err
	}
	e, err := to.EncodeRemote(p)
	if err != nil {
		return nil, err
	}
	return e.MarshalJSON()
}

// recodedEndpoint is a CouchDB upstream seen in the relay's remote form:
// documents read from it are re-encrypted with the relay database's
// salt, documents written to it with its own.
type recodedEndpoint struct {
	engine.Endpoint
	rec *recoder
}

// BulkGet reads and re-encrypts for the relay.
func (e recodedEndpoint) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	docs, err := e.Endpoint.BulkGet(ctx, revs)
	if err != nil {
		return nil, err
	}
	for i, d := range docs {
		if docs[i], err = e.rec.toRelay(d); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// BulkDocs re-encrypts for the upstream and writes.
func (e recodedEndpoint) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	out := make([]json.RawMessage, len(docs))
	for i, d := range docs {
		var err error
		if out[i], err = e.rec.toUpstream(d); err != nil {
			return nil, err
		}
	}
	return e.Endpoint.BulkDocs(ctx, out)
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
	msg += ": " + explainUpstreamErr(u.spec, rt.Err)
	u.mu.Lock()
	u.state, u.lastErr, u.lastErrAt = stateBackoff, msg, time.Now()
	u.errs++
	u.mu.Unlock()
}

// watchedEndpoint marks the upstream live again when a request to it
// succeeds after the replicator reported a failure (its reconnection
// starts by reading the checkpoint), so /status does not show a backoff
// that is over while the feed waits for changes. After a failed request
// the next one first passes the identity gate: an upstream that came
// back reset is noticed before the replicator reads or writes anything
// on it.
type watchedEndpoint struct {
	engine.Endpoint
	u    *upstream
	gate *identityGate
}

// before passes the gate (nil: no gate).
func (w watchedEndpoint) before(ctx context.Context) error {
	if w.gate == nil {
		return nil
	}
	return w.gate.before(ctx)
}

func (w watchedEndpoint) ok(err error) {
	if w.gate != nil {
		w.gate.after(err)
	}
	if err != nil {
		return
	}
	w.u.mu.Lock()
	if w.u.state == stateBackoff {
		w.u.state = stateLive
	}
	w.u.lastOK = time.Now()
	w.u.mu.Unlock()
}

func (w watchedEndpoint) Info(ctx context.Context) (engine.EndpointInfo, error) {
	if err := w.before(ctx); err != nil {
		return engine.EndpointInfo{}, err
	}
	i, err := w.Endpoint.Info(ctx)
	w.ok(err)
	return i, err
}

func (w watchedEndpoint) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	if err := w.before(ctx); err != nil {
		return engine.ChangesPage{}, err
	}
	p, err := w.Endpoint.Changes(ctx, req)
	w.ok(err)
	return p, err
}

func (w watchedEndpoint) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	if err := w.before(ctx); err != nil {
		return nil, err
	}
	m, err := w.Endpoint.RevsDiff(ctx, revs)
	w.ok(err)
	return m, err
}

func (w watchedEndpoint) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	if err := w.before(ctx); err != nil {
		return nil, err
	}
	d, err := w.Endpoint.BulkGet(ctx, revs)
	w.ok(err)
	return d, err
}

func (w watchedEndpoint) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	if err := w.before(ctx); err != nil {
		return nil, err
	}
	r, err := w.Endpoint.BulkDocs(ctx, docs)
	w.ok(err)
	return r, err
}

func (w watchedEndpoint) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	if err := w.before(ctx); err != nil {
		return nil, err
	}
	d, err := w.Endpoint.GetLocal(ctx, id)
	if errors.Is(err, engine.ErrNotFound) {
		w.ok(nil) // an absent checkpoint is an answer
	} else {
		w.ok(err)
	}
	return d, err
}

func (w watchedEndpoint) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	if err := w.before(ctx); err != nil {
		return err
	}
	err := w.Endpoint.PutLocal(ctx, id, doc)
	w.ok(err)
	return err
}
