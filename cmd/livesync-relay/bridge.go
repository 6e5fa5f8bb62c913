package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/fetch"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// What the relay stores and what crosses an upstream boundary
// (DESIGN.md §5).
//
// The relay's database keeps the REMOTE form of a vault, exactly as
// clients push it: chunks encrypted ({"_id":"h:+…","data":"%$…","e_":true}),
// metadata obfuscated, revisions as sent. The engine's chunk sources and
// journal packs speak the LOCAL plaintext form. The bridge therefore
// never hands the engine's plaintext to the store:
//
//   - A CouchDB upstream with the relay database's salt stores the same
//     remote form: documents are forwarded as they are, in both
//     directions, and its hunt source fetches the raw documents
//     (couchdb.DB.DocsByID) without decoding them.
//   - A CouchDB upstream with another salt (possible only with the vault
//     passphrase) is re-encrypted at the boundary: documents from it are
//     decoded with its salt and encoded with the relay's, and the other
//     way round (recodedEndpoint); the revisions stay the same.
//   - A bucket upstream (a journal) holds the plaintext form in its packs:
//     the journal runs over codecView, a store.Store view of the relay
//     database that decodes what it reads and encodes what it writes with
//     the relay database's codec, so the passphrase is required (or the
//     vault declared unencrypted, e2ee = false).
//
// The hunt's chunk sources (upstreamSource) return engine.Chunk values
// whose Data is NOT the chunk's plaintext but the whole chunk document in
// the relay's remote form, as JSON, with its _rev (a rawChunk); the
// hunt's local side (huntLocal) writes those documents with new_edits=false.
// Only these wrapper types produce and consume such chunks; nothing else
// in the relay sees them.
//
// Loops end by themselves: a document pulled from upstream B and pushed
// to upstream C keeps its revision, so C's replication back to the relay
// finds it present (RevsDiff), and a journal never sends back what it
// received (its knownIDs).

// Upstream states, for /status and the upstream_up metric.
const (
	stateConnecting = "connecting"  // handshake (salt) in progress
	stateCatchingUp = "catching-up" // the finite first replication
	stateLive       = "live"        // following the feeds, or a source ready to fetch
	stateBackoff    = "backoff"     // a transient failure; retrying after a delay
	stateError      = "error"       // a failure that needs a fix (credentials, salt, missing database); retried slowly
	stateStopped    = "stopped"     // the relay is shutting down
)

// How documents cross an upstream's boundary, for /status.
const (
	boundaryForward   = "forward"    // same salt: documents pass as they are
	boundaryReencrypt = "re-encrypt" // another salt: decoded and encoded with the relay's salt
	boundaryEncode    = "encode"     // a journal: plaintext packs, encoded into the remote form
)

// Reconnection delays of an upstream after a failure: they double from
// minRetry to maxRetry, for transient and permanent failures alike (a
// permanent one, state "error", needs a fix: once it is made, the relay
// notices within the current delay).
var (
	minRetry = time.Second
	maxRetry = 60 * time.Second
)

// saltStepTimeout bounds the first look at an upstream's salt, before
// replication starts.
const saltStepTimeout = 10 * time.Second

// errNotConnected is a hunt request to an upstream that has not finished
// its handshake: a transport failure (retried in the next pass).
var errNotConnected = errors.New("the upstream is not connected yet")

// bridgeSetup is what a database needs to bridge its upstreams.
type bridgeSetup struct {
	uuid  string // the relay's server uuid (replication ids)
	specs []upstreamSpec
	hunt  hunt.Config
}

// bridge connects one relay database to its upstreams: one runner per
// upstream replicating continuously, and one purgatory hunt (the
// database's holdback Hunter) whose sources are the upstreams.
type bridge struct {
	db      string
	v       *vaultStore
	uuid    string
	log     *slog.Logger
	hunt    *hunt.Hunt
	claims  *fetch.Coordinator
	huntCfg hunt.Config // effective values (defaults filled in)
	ups     []*upstream
	keys    []*keySource // one per throttle key, in order of first use

	saltMu sync.Mutex // one salt decision at a time

	// settingsMu serializes the reconciliation of vault settings
	// (bridge_settings.go); settingsWake asks reconcileLoop for a pass.
	settingsMu   sync.Mutex
	settingsWake chan struct{}

	// gen counts the changes of the relay database's salt (lastSalt);
	// sessions started before the latest one are ended.
	gen         atomic.Uint64
	saltStateMu sync.Mutex
	lastSalt    []byte

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newBridge builds the hunt and the upstreams of v; start runs them.
func newBridge(v *vaultStore, setup bridgeSetup, log *slog.Logger) (*bridge, error) {
	hc := setup.hunt
	hc.Logger = log.With("component", "hunt")
	b := &bridge{db: v.name, v: v, uuid: setup.uuid, log: log, claims: fetch.NewCoordinator(), huntCfg: effectiveHunt(setup.hunt),
		settingsWake: make(chan struct{}, 1)}
	h, err := hunt.New(hc, hunt.Deps{Local: huntLocal{v}, Claims: b.claims, OnDelivered: v.ChunksArrived})
	if err != nil {
		b.claims.Close()
		return nil, fmt.Errorf("database %q: hunt: %w", v.name, err)
	}
	b.hunt = h
	byKey := map[string]*keySource{}
	for _, spec := range setup.specs {
		u, err := newUpstream(b, spec)
		if err != nil {
			b.close()
			return nil, fmt.Errorf("database %q: upstream %q: %w", v.name, spec.name, err)
		}
		b.ups = append(b.ups, u)
		ks := byKey[u.key]
		if ks == nil {
			ks = &keySource{key: u.key, window: b.huntCfg.Window}
			byKey[u.key] = ks
			b.keys = append(b.keys, ks)
		}
		ks.members = append(ks.members, u)
		u.ks = ks
	}
	for _, ks := range b.keys {
		h.AddSource(ks, nil) // no memo: see keySource
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b, nil
}

// effectiveHunt fills in engine/hunt's defaults, for /status.
func effectiveHunt(c hunt.Config) hunt.Config {
	if c.MaxInFlight == 0 {
		c.MaxInFlight = hunt.DefaultMaxInFlight
	}
	if c.MaxPerWindow == 0 {
		c.MaxPerWindow = hunt.DefaultMaxPerWindow
	}
	if c.Window == 0 {
		c.Window = hunt.DefaultWindow
	}
	return c
}

// start runs the upstreams: first the vault settings of the first
// upstream that has some when the relay database has none
// (adoptFirstSettings), then a look at the CouchDB upstreams' salt when
// the relay database has none (so that it adopts theirs and forwards as
// is), then one runner per upstream and the settings' reconcileLoop.
func (b *bridge) start() {
	b.wg.Go(func() {
		if _, salt, err := b.relaySalt(b.ctx); err == nil {
			b.saltStateMu.Lock()
			b.lastSalt = salt
			b.saltStateMu.Unlock()
		}
		b.adoptFirstSettings(b.ctx)
		b.adoptFirstSalt(b.ctx)
		b.wg.Go(func() { b.reconcileLoop(b.ctx) })
		for _, u := range b.ups {
			if b.ctx.Err() != nil {
				return
			}
			b.wg.Go(func() { u.run(b.ctx) })
		}
	})
}

// stop cancels the runners and waits for them, then stops the hunt.
// It must not be called with the vaultStore's lock held.
func (b *bridge) stop() {
	b.cancel()
	b.wg.Wait()
	b.close()
}

func (b *bridge) close() {
	if b.hunt != nil {
		b.hunt.Close()
	}
	b.claims.Close()
	for _, u := range b.ups {
		u.close()
	}
}

// adoptFirstSalt gives the relay database the salt of the first CouchDB
// upstream that has one, when the relay database has none yet.
func (b *bridge) adoptFirstSalt(ctx context.Context) {
	if _, salt, err := b.relaySalt(ctx); err != nil || salt != nil {
		return
	}
	for _, u := range b.ups {
		if u.couch == nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, saltStepTimeout)
		raw, salt, err := upstreamSalt(cctx, u.couch)
		cancel()
		if err != nil || salt == nil {
			continue
		}
		if err := b.adoptSalt(ctx, raw); err != nil {
			b.log.Warn("adopting an upstream's vault salt failed", "upstream", u.spec.name, "err", err)
		} else {
			b.log.Info("the database had no vault salt: adopted the upstream's, so documents cross unchanged", "upstream", u.spec.name)
		}
		return
	}
}

// relaySalt reads the relay database's sync parameters: the document and
// its salt, both nil when it has none.
func (b *bridge) relaySalt(ctx context.Context) (json.RawMessage, []byte, error) {
	raw, err := b.v.GetLocal(ctx, syncParamsLocalID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if isDeletedLocal(raw) {
		return nil, nil, nil
	}
	salt, err := paramsSalt(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("the relay database's sync parameters: %w", err)
	}
	if salt == nil {
		return nil, nil, nil
	}
	return raw, salt, nil
}

// paramsSalt returns the salt of a sync-parameters document, nil when it
// has none.
func paramsSalt(raw []byte) ([]byte, error) {
	p, err := negotiate.ParseSyncParameters(raw)
	if err != nil {
		return nil, err
	}
	salt, err := p.Salt()
	if errors.Is(err, negotiate.ErrNoSalt) {
		return nil, nil
	}
	return salt, err
}

// upstreamSalt reads a CouchDB upstream's sync parameters (nil, nil when
// absent or salt-less).
func upstreamSalt(ctx context.Context, db *couchdb.DB) (json.RawMessage, []byte, error) {
	raw, err := db.GetLocal(ctx, syncParamsLocalID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	salt, err := paramsSalt(raw)
	if err != nil {
		return nil, nil, &engine.Error{Op: "read sync parameters", DocID: negotiate.SyncParametersDocID, Stage: engine.StageDecode, Err: err}
	}
	return raw, salt, nil
}

// adoptSalt writes params (another remote's sync-parameters document) as
// the relay database's, unless it got a salt meanwhile. The hold-back is
// rebuilt with the vault's codec (vaultStore.PutLocal).
func (b *bridge) adoptSalt(ctx context.Context, params json.RawMessage) error {
	b.saltMu.Lock()
	defer b.saltMu.Unlock()
	if _, salt, err := b.relaySalt(ctx); err != nil || salt != nil {
		return err
	}
	return b.writeRelayParams(ctx, params)
}

// ensureRelaySalt returns the relay database's salt, creating one (as a
// first client would) when it has none.
func (b *bridge) ensureRelaySalt(ctx context.Context) ([]byte, error) {
	b.saltMu.Lock()
	defer b.saltMu.Unlock()
	_, salt, err := b.relaySalt(ctx)
	if err != nil || salt != nil {
		return salt, err
	}
	salt, err = negotiate.NewSalt(nil)
	if err != nil {
		return nil, err
	}
	doc, err := json.Marshal(negotiate.NewSyncParameters(salt))
	if err != nil {
		return nil, err
	}
	if err := b.writeRelayParams(ctx, doc); err != nil {
		return nil, err
	}
	b.log.Info("the database had no vault salt: created one for the upstreams to share")
	return salt, nil
}

// writeRelayParams stores a sync-parameters document in the relay
// database in the form couchapi serves _local documents (its _rev
// "0-N" one above the stored one). Called with saltMu held.
func (b *bridge) writeRelayParams(ctx context.Context, params json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(params, &m); err != nil {
		return fmt.Errorf("sync parameters: %w", err)
	}
	n := int64(0)
	if raw, err := b.v.GetLocal(ctx, syncParamsLocalID); err == nil {
		var cur struct {
			Rev string `json:"_rev"`
		}
		if json.Unmarshal(raw, &cur) == nil {
			if rest, ok := strings.CutPrefix(cur.Rev, "0-"); ok {
				n, _ = strconv.ParseInt(rest, 10, 64)
			}
		}
	}
	delete(m, "_revisions")
	delete(m, "_deleted")
	m["_id"], _ = json.Marshal(negotiate.SyncParametersDocID)
	m["_rev"], _ = json.Marshal("0-" + strconv.FormatInt(n+1, 10))
	doc, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return b.v.PutLocal(ctx, syncParamsLocalID, doc)
}

// huntLocal is the hunt's engine.LocalChunks over a relay database. The
// chunks the relay's sources return are rawChunks (see the top of this
// file): PutChunks writes their documents, remote form and revision
// unchanged, with new_edits=false through the hold-back, which releases
// the held notes they complete. Chunks already stored are skipped, so a
// chunk fetched twice never becomes a conflict.
type huntLocal struct{ v *vaultStore }

// GetChunks reports which chunks the relay database stores (the Data of
// an encrypted chunk is its ciphertext; the hunt only checks presence).
func (l huntLocal) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	return l.v.GetChunks(ctx, ids)
}

// PutChunks writes rawChunks.
func (l huntLocal) PutChunks(ctx context.Context, chunks []engine.Chunk) error {
	ids := make([]engine.ChunkID, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID
	}
	have, err := l.v.GetChunks(ctx, ids)
	if err != nil {
		return err
	}
	var docs []json.RawMessage
	for _, c := range chunks {
		if _, ok := have[c.ID]; ok {
			continue
		}
		raw, err := rawChunkDoc(c)
		if err != nil {
			return err
		}
		docs = append(docs, raw)
	}
	if len(docs) == 0 {
		return nil
	}
	res, err := l.v.BulkDocs(ctx, docs)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range res {
		if r.Error != "" {
			errs = append(errs, &engine.Error{Op: "store hunted chunk", DocID: r.ID, Stage: engine.StageStorage,
				Err: fmt.Errorf("%s: %s", r.Error, r.Reason)})
		}
	}
	return errors.Join(errs...)
}

// rawChunk makes the engine.Chunk that carries a chunk document of the
// relay's remote form (see the top of this file).
func rawChunk(id engine.ChunkID, doc json.RawMessage) engine.Chunk {
	return engine.Chunk{ID: id, Data: string(doc)}
}

// rawChunkDoc returns the document a rawChunk carries, checked: a JSON
// object whose _id is the chunk's id, with a revision.
func rawChunkDoc(c engine.Chunk) (json.RawMessage, error) {
	var head struct {
		ID  string `json:"_id"`
		Rev string `json:"_rev"`
	}
	raw := json.RawMessage(c.Data)
	if err := json.Unmarshal(raw, &head); err != nil || head.ID != c.ID || head.Rev == "" {
		return nil, &engine.Error{Op: "store hunted chunk", DocID: c.ID, Stage: engine.StageDecode,
			Err: fmt.Errorf("not a chunk document with its revision: %w", engine.ErrMalformed)}
	}
	return raw, nil
}

// chunkRev is the first revision the relay gives a chunk it encodes from
// a journal's plaintext: the plug-in's own (store.ChunkRev, over the
// plaintext {_id, data, type}), the revision engine/store and a LiveSync
// device give the same new chunk, so relays and devices agree on it.
func chunkRev(c engine.Chunk) string {
	return store.ChunkRev(c.ID, c.Data)
}

// encodeChunk turns a plaintext chunk into the relay's remote form, with
// chunkRev as its revision.
func encodeChunk(codec *livesync.Codec, c engine.Chunk) (json.RawMessage, error) {
	d, err := codec.EncodeRemote(livesync.ChunkDoc(livesync.Chunk{ID: c.ID, Data: c.Data}))
	if err != nil {
		return nil, err
	}
	d["_rev"], _ = json.Marshal(chunkRev(c))
	return d.MarshalJSON()
}

// keySource is the hunt's source for one throttle key: the upstreams of
// this database on that key (usually one; two databases of one CouchDB
// server share host:port, and so one throttle). It asks its members in
// order for what is still missing, and meters itself so that /status can
// prove the per-source limits held: the most requests it saw in flight
// at once, and the most it saw start within one rate window.
//
// No memo fingerprint is given to the hunt: a relay cannot name an
// upstream's state cheaply without a request, and a stale memo would hide
// a chunk that arrived on the upstream for 30 minutes.
type keySource struct {
	key     string
	window  time.Duration
	members []*upstream

	mu          sync.Mutex
	inFlight    int
	maxInFlight int
	starts      []time.Time
	maxInWindow int
}

var _ engine.ChunkSource = (*keySource)(nil)

// windowSlack shortens the metered window: a start is recorded when
// FetchChunks is called, a moment after the hunt reserved its permit, so
// scheduling jitter must not count a start in two windows the hunt kept
// apart.
const windowSlack = 100

// FetchChunks asks the members for ids.
func (k *keySource) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	k.begin()
	defer k.end()
	var res engine.FetchResult
	remaining := ids
	var firstErr error
	asked := false
	for _, u := range k.members {
		src := u.source()
		if src == nil || !src.CanFetchDirect() {
			continue
		}
		asked = true
		r, err := src.FetchChunks(ctx, remaining)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		res.Found = append(res.Found, r.Found...)
		remaining = r.Missing
		if len(remaining) == 0 {
			break
		}
	}
	switch {
	case !asked:
		return engine.FetchResult{}, &engine.Error{Op: "fetch chunks", Stage: engine.StageTransport, Err: errNotConnected}
	case firstErr != nil && len(res.Found) == 0:
		return engine.FetchResult{}, firstErr
	}
	res.Missing = remaining
	return res, nil
}

// CanFetchDirect is true once a member can fetch by id.
func (k *keySource) CanFetchDirect() bool {
	for _, u := range k.members {
		if src := u.source(); src != nil && src.CanFetchDirect() {
			return true
		}
	}
	return false
}

// ThrottleKey is the members' throttle key.
func (k *keySource) ThrottleKey() string { return k.key }

func (k *keySource) begin() {
	now := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.inFlight++
	k.maxInFlight = max(k.maxInFlight, k.inFlight)
	w := k.window - k.window/windowSlack
	i := 0
	for i < len(k.starts) && !k.starts[i].After(now.Add(-w)) {
		i++
	}
	k.starts = append(k.starts[i:], now)
	k.maxInWindow = max(k.maxInWindow, len(k.starts))
}

func (k *keySource) end() {
	k.mu.Lock()
	k.inFlight--
	k.mu.Unlock()
}

// meter returns the most requests seen in flight at once and within one
// window.
func (k *keySource) meter() (maxInFlight, maxInWindow int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.maxInFlight, k.maxInWindow
}

// upstream is one configured upstream of a database: its runner's state
// and its chunk source.
type upstream struct {
	b    *bridge
	spec upstreamSpec
	key  string // throttle key
	ks   *keySource
	log  *slog.Logger

	couch  *couchdb.DB  // kind couchdb
	bucket bucketRemote // kind s3

	chunks atomic.Pointer[upstreamSource] // nil until the handshake
	// journal is a bucket's open journal (nil before its handshake and
	// for CouchDB): its send position gives the push lag.
	journal atomic.Pointer[journalsync.Journal]

	sessMu     sync.Mutex
	sessCancel context.CancelFunc // ends the current session
	sessGen    uint64             // the bridge's gen when it started

	// settingsBase is the upstream's vault settings after its last
	// reconciliation (nil: not yet); guarded by the bridge's settingsMu.
	settingsBase *negotiate.VaultSettings

	mu          sync.Mutex
	state       string
	boundary    string
	lastErr     string
	lastErrAt   time.Time
	lastOK      time.Time
	errs        uint64
	pullSeq     string
	pushSeq     string
	pullPending int
	pushPending int
	pulled      uint64 // documents written to the relay
	pushed      uint64 // documents written to the upstream
	lastPulled  int    // the current run's last progress counts
	lastPushed  int

	// Resets of the upstream seen (upstream_identity.go), the last one's
	// time and reason; upSeq is its update_seq at the last identity check.
	resets          uint64
	lastReset       time.Time
	lastResetReason string
	upSeq           string
	pullExact       bool // the upstream's feed answers pending
	lagCache        lagCache
	epoch           string // a bucket's journal epoch when its session opened
}

// upstreamSource is the engine.ChunkSource of one connected upstream,
// returning rawChunks.
type upstreamSource struct {
	fetch  func(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error)
	direct bool
	u      *upstream
}

// CanFetchDirect reports whether the upstream fetches by id (always for
// CouchDB; direct_fetch for a bucket).
func (s *upstreamSource) CanFetchDirect() bool { return s.direct }

// FetchChunks fetches ids and notes the outcome in the upstream's status.
func (s *upstreamSource) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	res, err := s.fetch(ctx, ids)
	switch {
	case err != nil && ctx.Err() == nil:
		s.u.fetchFailed(err)
	case err == nil:
		s.u.fetchOK()
	}
	return res, err
}

func newUpstream(b *bridge, spec upstreamSpec) (*upstream, error) {
	u := &upstream{b: b, spec: spec, state: stateConnecting, pullPending: -1, pushPending: -1,
		log: b.log.With("upstream", spec.name)}
	switch spec.kind {
	case kindCouchDB:
		db, err := couchdb.New(spec.couch)
		if err != nil {
			return nil, err
		}
		u.couch, u.key = db, db.ThrottleKey()
	case kindS3:
		bk, err := openBucket(spec.s3, u.log)
		if err != nil {
			return nil, err
		}
		u.bucket, u.key = bk, bucketThrottleKey(spec)
	}
	return u, nil
}

func (u *upstream) source() *upstreamSource { return u.chunks.Load() }

func (u *upstream) close() {
	if u.couch != nil {
		u.couch.Close()
	}
}

// run connects and replicates until ctx ends: one session after the
// other, with a delay after a failure. A change of the relay database's
// salt ends the session at once (bridge.paramsChanged) and the next one
// handshakes again.
func (u *upstream) run(ctx context.Context) {
	defer u.setState(stateStopped)
	delay := minRetry
	for ctx.Err() == nil {
		sctx, cancel := context.WithCancel(ctx)
		u.sessMu.Lock()
		u.sessCancel, u.sessGen = cancel, u.b.gen.Load()
		gen := u.sessGen
		u.sessMu.Unlock()
		var err error
		if u.couch != nil {
			err = u.couchSession(sctx, gen, &delay)
		} else {
			err = u.bucketSession(sctx, gen, &delay)
		}
		ended := sctx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case ended || errors.Is(err, errSaltChanged):
			u.log.Info("the database's vault salt changed: connecting again")
			continue
		case errors.Is(err, errUpstreamReset):
			u.log.Warn("the upstream was reset: connecting again", "err", err)
			u.setState(stateConnecting)
			continue
		}
		u.failed(err)
		if !retry(ctx, &delay, permanent(err)) {
			return
		}
	}
}

// errSaltChanged ends a session whose handshake saw the relay
// database's salt change.
var errSaltChanged = errors.New("the relay database's vault salt changed")

// paramsChanged is called after the relay database's sync parameters
// were written (by a client, or by the bridge adopting or creating a
// salt): when the salt changed, every upstream's session ends and
// handshakes again with the new salt.
func (b *bridge) paramsChanged(ctx context.Context) {
	_, salt, err := b.relaySalt(ctx)
	if err != nil {
		return
	}
	b.saltStateMu.Lock()
	if sameSalt(salt, b.lastSalt) {
		b.saltStateMu.Unlock()
		return
	}
	b.lastSalt = salt
	g := b.gen.Add(1)
	b.saltStateMu.Unlock()
	for _, u := range b.ups {
		u.sessMu.Lock()
		if u.sessCancel != nil && u.sessGen < g {
			u.sessCancel()
		}
		u.sessMu.Unlock()
	}
}

// retry waits after a failure: d, doubled for the next time up to
// maxRetry, whether the failure is transient or permanent (the third
// argument, permanent, sets the state, not the delay). It returns false
// when ctx ended.
func retry(ctx context.Context, d *time.Duration, _ bool) bool {
	wait := *d
	*d = min(2**d, maxRetry)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// permanent reports failures that retrying will not fix by itself.
func permanent(err error) bool {
	var ee *engine.Error
	if errors.As(err, &ee) {
		switch ee.Stage {
		case engine.StageTransport:
			return false
		case engine.StageAuth, engine.StageDecrypt, engine.StageProtocol:
			return true
		}
	}
	return errors.Is(err, errSaltDiffers) || errors.Is(err, engine.ErrDecrypt) || errors.Is(err, errPlainVault) ||
		errors.Is(err, errSettingsDiffer)
}

func (u *upstream) setState(s string) {
	u.mu.Lock()
	u.state = s
	u.mu.Unlock()
}

// failed records a failure of the runner.
func (u *upstream) failed(err error) {
	msg := explainUpstreamErr(u.spec, err)
	st := stateBackoff
	if permanent(err) {
		st = stateError
	}
	u.mu.Lock()
	u.state, u.lastErr, u.lastErrAt = st, msg, time.Now()
	u.errs++
	u.mu.Unlock()
	u.log.Warn("upstream failed; retrying", "state", st, "err", msg)
}

// succeeded records a successful step.
func (u *upstream) succeeded(state string) {
	u.mu.Lock()
	u.state, u.lastOK = state, time.Now()
	u.mu.Unlock()
}

// fetchFailed records a failed hunt request (it sets the state of a
// source-only upstream, whose requests are all it does).
func (u *upstream) fetchFailed(err error) {
	msg := "fetching chunks: " + explainUpstreamErr(u.spec, err)
	u.mu.Lock()
	u.lastErr, u.lastErrAt = msg, time.Now()
	u.errs++
	if u.spec.mode == modeSource {
		u.state = stateBackoff
		if permanent(err) {
			u.state = stateError
		}
	}
	u.mu.Unlock()
}

func (u *upstream) fetchOK() {
	u.mu.Lock()
	u.lastOK = time.Now()
	if u.spec.mode == modeSource {
		u.state = stateLive
	}
	u.mu.Unlock()
}

// explainUpstreamErr says what failed and, where it helps, what to check.
// Adapter errors carry no secrets; neither does this.
func explainUpstreamErr(spec upstreamSpec, err error) string {
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Stage == engine.StageAuth {
		if spec.kind == kindCouchDB {
			return "authentication failed: check user and the password (password_file or password_env): " + err.Error()
		}
		if keys := s3SettingKeys(err); keys != "" {
			return "authentication failed: " + keys + ": " + err.Error()
		}
		return "authentication failed: check access_key, the secret key (secret_key_file or secret_key_env) and region: " + err.Error()
	}
	if spec.kind == kindCouchDB && (errors.Is(err, engine.ErrNotFound) || errors.Is(err, errNoUpstreamDatabase)) {
		// Only a missing database fails a session with not-found: an
		// absent document is an answer, never an error, there.
		return fmt.Sprintf("the database %q does not exist on the server %s (or was deleted): create it there "+
			"(the relay never creates an upstream database), or fix database = %q of upstream %q: %v",
			spec.couch.Database, strings.TrimSuffix(spec.couch.URL, "/"), spec.couch.Database, spec.name, err)
	}
	if spec.kind == kindS3 && errors.Is(err, minio.ErrNoBucket) {
		return fmt.Sprintf("the bucket %q does not exist on the server %s: create it there (the relay never creates buckets), "+
			"or fix bucket = %q of upstream %q: %v", spec.s3.Bucket, strings.TrimSuffix(spec.location(), "/"+spec.s3.Bucket+"/"+spec.s3.Prefix),
			spec.s3.Bucket, spec.name, err)
	}
	if spec.kind == kindS3 {
		return withS3SettingKeys(err).Error()
	}
	return err.Error()
}

// sameSalt reports whether two salts are the same.
func sameSalt(a, b []byte) bool { return bytes.Equal(a, b) }
