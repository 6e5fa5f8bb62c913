package bridge

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

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/decorate"
	"github.com/livesync-go/livesync-go/engine/fetch"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// Local is the database the bridge serves, in the remote form: a store
// that writes replicated revisions through a hold-back (BulkDocsFrom
// names the upstream they came from), and knows the vault's codec.
type Local interface {
	store.Store
	// BulkDocsFrom writes revisions replicated from source (an
	// upstream's throttle key) with new_edits=false.
	BulkDocsFrom(ctx context.Context, source string, docs []json.RawMessage) ([]engine.BulkDocResult, error)
	// ChunksArrived tells the database that chunks were stored by the
	// hunt.
	ChunksArrived(ids []engine.ChunkID)
	// Codec returns the vault's codec and its salt (nil without the
	// passphrase or before the vault has a salt).
	Codec() (*livesync.Codec, []byte)
	// HasPassphrase reports whether the vault passphrase is configured.
	HasPassphrase() bool
}

// RawDocs reads a CouchDB upstream's documents by id as stored, for the
// hunt: the winning revisions of ids, absent ids left out.
// *couchdb.DB implements it (couchdb.Remote.DB).
type RawDocs interface {
	DocsByID(ctx context.Context, ids []string) (map[string]json.RawMessage, error)
}

// Modes of an upstream: which way documents travel, or none.
const (
	ModeSync   = "sync"   // both ways (the default)
	ModePull   = "pull"   // upstream → database only
	ModePush   = "push"   // database → upstream only
	ModeSource = "source" // no replication: a chunk source of the hunt only
)

// Kinds of upstream.
const (
	KindCouchDB = "couchdb"
	KindS3      = "s3"
)

// Upstream describes one upstream of the database.
type Upstream struct {
	Name string // unique within the database; a metric label
	Kind string // KindCouchDB or KindS3
	Mode string // ModeSync, ModePull, ModePush or ModeSource
	// Location names the upstream without credentials; it keys what the
	// database remembers of it and is part of its replication id.
	Location string
	// Database is a CouchDB upstream's database name (for messages).
	Database     string
	ChunksOnline bool          // pull metadata only (CouchDB)
	DirectFetch  bool          // a bucket answers the hunt from its pack index
	PollInterval time.Duration // how often a bucket is listed
	// ThrottleKey is the upstream's politeness domain in the hunt, and
	// the hold-back source of what is pulled from it.
	ThrottleKey string
	// Remote is the upstream: a CouchDB database, replicated through its
	// Endpoint, or a journal bucket (Objects). Its Negotiate port holds
	// the sync parameters and the milestone. The bridge owns it: Close
	// (and so Stop) closes it, and so does New when it fails.
	Remote vault.Remote
	// Docs reads a CouchDB upstream's raw documents for the hunt.
	Docs RawDocs
	// Explain, if set, turns an upstream failure into the message
	// /status shows (naming the configuration to check); nil: the
	// error's text.
	Explain func(error) string
}

// Config is a bridge's configuration.
type Config struct {
	DB        string // the database's name (messages, marker ids)
	UUID      string // the server's uuid (replication and marker ids)
	Upstreams []Upstream
	Hunt      hunt.Config
	Log       *slog.Logger // nil discards
	// BatchesLimit is the pages an upstream's replication has read and
	// not yet written, its fetches in flight (replicate.Config); 0 is
	// replicate.DefaultBatchesLimit. A host that bounds concurrent
	// connections or per-run queries (Workers) sets it low.
	BatchesLimit int
}

// Upstream states, for /status and the upstream_up metric.
const (
	StateConnecting = "connecting"  // handshake (salt) in progress
	StateCatchingUp = "catching-up" // the finite first replication
	StateLive       = "live"        // following the feeds, or a source ready to fetch
	StateBackoff    = "backoff"     // a transient failure; retrying after a delay
	StateError      = "error"       // a failure that needs a fix (credentials, salt, missing database); retried slowly
	StateStopped    = "stopped"     // shutting down
)

// How documents cross an upstream's boundary, for /status.
const (
	BoundaryForward   = "forward"    // same salt: documents pass as they are
	BoundaryReencrypt = "re-encrypt" // another salt: decoded and encoded with the database's salt
	BoundaryEncode    = "encode"     // a journal: plaintext packs, encoded into the remote form
)

// Reconnection delays of an upstream after a failure: they double from
// MinRetry to MaxRetry, for transient and permanent failures alike (a
// permanent one, state "error", needs a fix: once it is made, the
// bridge notices within the current delay). Tests may lower them.
var (
	MinRetry = time.Second
	MaxRetry = 60 * time.Second
)

// saltStepTimeout bounds the first look at an upstream's salt, before
// replication starts.
const saltStepTimeout = 10 * time.Second

// Bridge connects one database to its upstreams: one runner per
// upstream replicating continuously, and one purgatory hunt (the
// database's hold-back Hunter) whose sources are the upstreams.
type Bridge struct {
	db      string
	v       Local
	uuid    string
	batches int // Config.BatchesLimit
	log     *slog.Logger
	hunt    *hunt.Hunt
	claims  *fetch.Coordinator
	huntCfg hunt.Config // effective values (defaults filled in)
	ups     []*upstream
	keys    []*keySource // one per throttle key, in order of first use

	saltMu sync.Mutex // one salt decision at a time

	// settingsMu serializes the reconciliation of vault settings;
	// settingsWake asks reconcileLoop for a pass.
	settingsMu   sync.Mutex
	settingsWake chan struct{}

	// gen counts the changes of the database's salt (lastSalt);
	// sessions started before the latest one are ended.
	gen         atomic.Uint64
	saltStateMu sync.Mutex
	lastSalt    []byte

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	remotes   []vault.Remote // the upstreams' remotes, closed by Close
}

// keySource is the hunt's source for one throttle key: the upstreams on
// that key (usually one; two databases of one CouchDB server share
// host:port), asked in order (decorate.Multi) and metered so that
// /status can prove the per-source limits held. No memo fingerprint is
// given to the hunt: the bridge cannot name an upstream's state cheaply
// without a request, and a stale memo would hide a chunk that arrived
// on the upstream for 30 minutes.
type keySource struct {
	key     string
	members []*upstream
	meter   *decorate.Meter
	src     engine.ChunkSource
}

// New builds the hunt and the upstreams of the database v; Start runs
// them.
func New(v Local, c Config) (*Bridge, error) {
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hc := c.Hunt
	hc.Logger = log.With("component", "hunt")
	b := &Bridge{db: c.DB, v: v, uuid: c.UUID, batches: c.BatchesLimit, log: log, claims: fetch.NewCoordinator(), huntCfg: effectiveHunt(c.Hunt),
		settingsWake: make(chan struct{}, 1)}
	for _, u := range c.Upstreams {
		if u.Remote != nil {
			b.remotes = append(b.remotes, u.Remote)
		}
	}
	h, err := hunt.New(hc, hunt.Deps{Local: huntLocal{v}, Claims: b.claims, OnDelivered: v.ChunksArrived})
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("database %q: hunt: %w", c.DB, err)
	}
	b.hunt = h
	byKey := map[string]*keySource{}
	for _, spec := range c.Upstreams {
		u := newUpstream(b, spec)
		b.ups = append(b.ups, u)
		ks := byKey[spec.ThrottleKey]
		if ks == nil {
			ks = &keySource{key: spec.ThrottleKey, meter: &decorate.Meter{Window: b.huntCfg.Window}}
			byKey[spec.ThrottleKey] = ks
			b.keys = append(b.keys, ks)
		}
		ks.members = append(ks.members, u)
	}
	for _, ks := range b.keys {
		members := make([]engine.ChunkSource, len(ks.members))
		for i, u := range ks.members {
			members[i] = u
		}
		ks.src = decorate.Metered(decorate.Multi(ks.key, members...), ks.meter)
		h.AddSource(ks.src, nil) // no memo: see keySource
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b, nil
}

// Hunt is the database's purgatory hunt (the hold-back's Hunter).
func (b *Bridge) Hunt() *hunt.Hunt { return b.hunt }

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

// Start runs the upstreams: first the vault settings of the first
// upstream that has some when the database has none
// (adoptFirstSettings), then a look at the CouchDB upstreams' salt when
// the database has none (so that it adopts theirs and forwards as is),
// then one runner per upstream and the settings' reconcileLoop.
func (b *Bridge) Start() {
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

// Stop cancels the runners and waits for them, then stops the hunt and
// closes the upstreams (Close). It must not be called while the database
// blocks the runners' writes.
func (b *Bridge) Stop() {
	b.cancel()
	b.wg.Wait()
	b.Close()
}

// Close stops the hunt, releases the claims and closes the upstreams'
// remotes, without waiting for runners (for a bridge that was never
// started). Later calls do nothing.
func (b *Bridge) Close() {
	b.closeOnce.Do(func() {
		if b.hunt != nil {
			b.hunt.Close()
		}
		b.claims.Close()
		for _, r := range b.remotes {
			if err := r.Close(); err != nil {
				b.log.Warn("closing an upstream", "upstream", r.ID(), "err", err)
			}
		}
	})
}

// adoptFirstSalt gives the database the salt of the first CouchDB
// upstream that has one, when the database has none yet.
func (b *Bridge) adoptFirstSalt(ctx context.Context) {
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
			b.log.Warn("adopting an upstream's vault salt failed", "upstream", u.spec.Name, "err", err)
		} else {
			b.log.Info("the database had no vault salt: adopted the upstream's, so documents cross unchanged", "upstream", u.spec.Name)
		}
		return
	}
}

// relaySalt reads the database's sync parameters: the document and its
// salt, both nil when it has none.
func (b *Bridge) relaySalt(ctx context.Context) (json.RawMessage, []byte, error) {
	raw, err := store.LiveLocal(ctx, b.v, negotiate.SyncParametersLocalID)
	if raw == nil || err != nil {
		return nil, nil, err
	}
	salt, err := negotiate.SaltOf(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("the relay database's sync parameters: %w", err)
	}
	if salt == nil {
		return nil, nil, nil
	}
	return raw, salt, nil
}

// upstreamSalt reads a CouchDB upstream's sync parameters (nil, nil when
// absent or salt-less).
func upstreamSalt(ctx context.Context, db engine.Endpoint) (json.RawMessage, []byte, error) {
	raw, err := db.GetLocal(ctx, negotiate.SyncParametersLocalID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	salt, err := negotiate.SaltOf(raw)
	if err != nil {
		return nil, nil, &engine.Error{Op: "read sync parameters", DocID: negotiate.SyncParametersDocID, Stage: engine.StageDecode, Err: err}
	}
	return raw, salt, nil
}

// adoptSalt writes params (another remote's sync-parameters document) as
// the database's, unless it got a salt meanwhile.
func (b *Bridge) adoptSalt(ctx context.Context, params json.RawMessage) error {
	b.saltMu.Lock()
	defer b.saltMu.Unlock()
	if _, salt, err := b.relaySalt(ctx); err != nil || salt != nil {
		return err
	}
	return b.writeRelayParams(ctx, params)
}

// ensureRelaySalt returns the database's salt, creating one (as a first
// client would) when it has none.
func (b *Bridge) ensureRelaySalt(ctx context.Context) ([]byte, error) {
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

// nextLocalRev is the _rev a _local document of the database gets when
// written again: "0-N" one above the stored one, as a CouchDB server
// serves _local documents.
func (b *Bridge) nextLocalRev(ctx context.Context, id string) string {
	n := int64(0)
	if raw, err := b.v.GetLocal(ctx, id); err == nil {
		var cur struct {
			Rev string `json:"_rev"`
		}
		if json.Unmarshal(raw, &cur) == nil {
			if rest, ok := strings.CutPrefix(cur.Rev, "0-"); ok {
				n, _ = strconv.ParseInt(rest, 10, 64)
			}
		}
	}
	return "0-" + strconv.FormatInt(n+1, 10)
}

// writeRelayParams stores a sync-parameters document in the database.
// Called with saltMu held.
func (b *Bridge) writeRelayParams(ctx context.Context, params json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(params, &m); err != nil {
		return fmt.Errorf("sync parameters: %w", err)
	}
	delete(m, "_revisions")
	delete(m, "_deleted")
	m["_id"], _ = json.Marshal(negotiate.SyncParametersDocID)
	m["_rev"], _ = json.Marshal(b.nextLocalRev(ctx, negotiate.SyncParametersLocalID))
	doc, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return b.v.PutLocal(ctx, negotiate.SyncParametersLocalID, doc)
}

// ParamsChanged is called after the database's sync parameters were
// written (by a client, or by the bridge adopting or creating a salt):
// when the salt changed, every upstream's session ends and handshakes
// again with the new salt.
func (b *Bridge) ParamsChanged(ctx context.Context) {
	_, salt, err := b.relaySalt(ctx)
	if err != nil {
		return
	}
	b.saltStateMu.Lock()
	if bytes.Equal(salt, b.lastSalt) {
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
