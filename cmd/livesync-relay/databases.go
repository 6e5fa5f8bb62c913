package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi/boltdir"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/holdback"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/purgatory"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Ids of the vault documents in the store's _local namespace (the store
// keeps _local ids without the "_local/" prefix).
var (
	syncParamsLocalID = strings.TrimPrefix(negotiate.SyncParametersDocID, "_local/")
	milestoneLocalID  = strings.TrimPrefix(negotiate.MilestoneDocID, "_local/")
)

// heldDatabases is the relay's couchapi.Databases: a decorator around
// boltdir.Databases that serves every database through
// engine/holdback, so that no client sees a note before its chunks.
// Close persists every database's purgatory, then closes the files.
type heldDatabases struct {
	dir *boltdir.Databases
	cfg holdback.Config
	// passphrases of the databases the configuration gives one (secret:
	// never logged).
	passphrases map[string]string
	// bridging, when set, names the upstreams of databases and the
	// hunt's configuration (setUpstreams).
	bridging map[string]bridgeSetup
	log      *slog.Logger

	mu     sync.Mutex
	open   map[string]*vaultStore
	closed bool
}

var _ couchapi.Databases = (*heldDatabases)(nil)

func newHeldDatabases(dir *boltdir.Databases, cfg holdback.Config, passphrases map[string]string, log *slog.Logger) *heldDatabases {
	return &heldDatabases{dir: dir, cfg: cfg, passphrases: passphrases, log: log, open: map[string]*vaultStore{}}
}

// setUpstreams gives the databases their upstreams (before any is
// opened): uuid is the relay's, for replication ids.
func (h *heldDatabases) setUpstreams(uuid string, ups map[string][]upstreamSpec, hc hunt.Config) {
	h.bridging = map[string]bridgeSetup{}
	for db, specs := range ups {
		h.bridging[db] = bridgeSetup{uuid: uuid, specs: specs, hunt: hc}
	}
}

// Open returns the named database served through the hold-back.
func (h *heldDatabases) Open(ctx context.Context, name string) (store.Store, error) {
	return h.openVault(ctx, name)
}

func (h *heldDatabases) openVault(ctx context.Context, name string) (*vaultStore, error) {
	if reservedNames[name] {
		return nil, fmt.Errorf("database %q: %w", name, engine.ErrNotFound)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, store.ErrClosed
	}
	if v, ok := h.open[name]; ok {
		return v, nil
	}
	inner, err := h.dir.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	var setup *bridgeSetup
	if b, ok := h.bridging[name]; ok {
		setup = &b
	}
	v, err := openVaultStore(ctx, name, inner, h.cfg, h.passphrases[name], setup, h.log.With("db", name))
	if err != nil {
		return nil, err
	}
	h.open[name] = v
	return v, nil
}

// Create makes an empty database and opens it (so that /status and the
// metrics list it at once); names the relay serves itself are illegal.
func (h *heldDatabases) Create(ctx context.Context, name string) error {
	if reservedNames[name] {
		return fmt.Errorf("%w: %q is the relay's /%s endpoint", couchapi.ErrIllegalName, name, name)
	}
	if err := h.dir.Create(ctx, name); err != nil {
		return err
	}
	_, err := h.openVault(ctx, name)
	return err
}

// Delete closes the database's hold-back and removes it.
func (h *heldDatabases) Delete(ctx context.Context, name string) error {
	if reservedNames[name] {
		return fmt.Errorf("database %q: %w", name, engine.ErrNotFound)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return store.ErrClosed
	}
	if v, ok := h.open[name]; ok {
		delete(h.open, name)
		if err := v.Close(); err != nil {
			h.log.Warn("closing the hold-back of a deleted database", "db", name, "err", err)
		}
	}
	return h.dir.Delete(ctx, name)
}

// List returns the database names, sorted.
func (h *heldDatabases) List(ctx context.Context) ([]string, error) {
	names, err := h.dir.List(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(names, func(n string) bool { return reservedNames[n] }), nil
}

// vaults returns the open databases, sorted by name.
func (h *heldDatabases) vaults() []*vaultStore {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*vaultStore, 0, len(h.open))
	for _, v := range h.open {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b *vaultStore) int { return strings.Compare(a.name, b.name) })
	return out
}

// fileSize is the size of a database's bbolt file.
func (h *heldDatabases) fileSize(name string) (int64, bool) {
	p := h.dir.Path(name)
	if p == "" {
		return 0, false
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0, false
	}
	return fi.Size(), true
}

// Close closes every hold-back (each saves its purgatory state), then
// the database files. Later calls return nil.
func (h *heldDatabases) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	open := h.open
	h.open = nil
	h.mu.Unlock()
	var errs []error
	for name, v := range open {
		if err := v.Close(); err != nil {
			errs = append(errs, fmt.Errorf("database %q: %w", name, err))
		}
	}
	errs = append(errs, h.dir.Close())
	return errors.Join(errs...)
}

// noClose keeps a hold-back from closing the database file it wraps: the
// file belongs to the boltdir.Databases, and a vaultStore may replace its
// hold-back (when the vault's salt appears) over the same file.
type noClose struct{ store.Store }

func (noClose) Close() error { return nil }

// vaultStore is one served database: a store.Store that forwards to the
// database's current holdback.Store. With a passphrase configured, the
// hold-back can decrypt obfuscated metadata only once the vault's salt
// exists; the first client writes it (the sync parameters) after the
// database was opened, so a write of that document rebuilds the
// hold-back with the vault's codec. Write calls hold mu for reading and
// the rebuild holds it for writing, so no write meets the closed one.
type vaultStore struct {
	name       string
	inner      store.Store
	cfg        holdback.Config
	passphrase string
	log        *slog.Logger

	cur atomic.Pointer[holdback.Store]
	// bridge, if the database has upstreams, runs them and the hunt
	// (the hold-back's Hunter).
	bridge *bridge
	mu     sync.RWMutex
	// Guarded by mu.
	codec  *livesync.Codec // the vault's codec; nil: none (no passphrase or no salt yet)
	salt   []byte          // the salt of the codec in use; nil: no codec
	carry  holdback.Stats  // counters of hold-backs replaced by a rebuild
	closed bool
}

var _ store.Store = (*vaultStore)(nil)

func openVaultStore(ctx context.Context, name string, inner store.Store, cfg holdback.Config, passphrase string, setup *bridgeSetup, log *slog.Logger) (*vaultStore, error) {
	v := &vaultStore{name: name, inner: inner, cfg: cfg, passphrase: passphrase, log: log}
	v.cfg.Logger = log
	var codec *livesync.Codec
	if passphrase != "" {
		c, salt, err := vaultCodec(ctx, inner, passphrase)
		switch {
		case err != nil:
			log.Warn("the vault's settings could not be read; obfuscated metadata passes unheld until a client writes them", "err", err)
		case c == nil:
			log.Info("passphrase configured; waiting for the vault's salt (written by the first client)")
		default:
			codec, v.salt = c, salt
		}
	}
	v.codec = codec
	if setup != nil {
		b, err := newBridge(v, *setup, log)
		if err != nil {
			return nil, err
		}
		v.bridge = b
	}
	hb, err := holdback.New(v.cfg, holdback.Deps{Inner: noClose{inner}, Codec: codec, Hunter: v.hunter()})
	if err != nil {
		if v.bridge != nil {
			v.bridge.close()
		}
		return nil, fmt.Errorf("database %q: %w", name, err)
	}
	v.cur.Store(hb)
	if v.bridge != nil {
		v.bridge.start()
	}
	return v, nil
}

// hunter is the hold-back's Hunter: the bridge's hunt, or none.
func (v *vaultStore) hunter() purgatory.Hunter {
	if v.bridge == nil {
		return nil
	}
	return v.bridge.hunt
}

// currentCodec returns the vault's codec and its salt (nil without the
// passphrase or before the vault has a salt).
func (v *vaultStore) currentCodec() (*livesync.Codec, []byte) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.codec, v.salt
}

// vaultCodec builds the vault's codec from the passphrase, the salt in
// the sync parameters and the settings in the milestone's PREFERRED tweak
// values (without a milestone, encryption and path obfuscation on:
// decoding accepts every scheme). It returns a nil codec while the vault
// has no salt.
func vaultCodec(ctx context.Context, st store.Store, passphrase string) (*livesync.Codec, []byte, error) {
	raw, err := st.GetLocal(ctx, syncParamsLocalID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if isDeletedLocal(raw) {
		return nil, nil, nil
	}
	p, err := negotiate.ParseSyncParameters(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("the sync parameters: %w", err)
	}
	salt, err := p.Salt()
	if errors.Is(err, negotiate.ErrNoSalt) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("the sync parameters: %w", err)
	}
	s := livesync.Settings{Passphrase: passphrase, Encrypt: true, PathObfuscation: true}
	if raw, err := st.GetLocal(ctx, milestoneLocalID); err == nil && !isDeletedLocal(raw) {
		if m, err := negotiate.ParseMilestone(raw); err == nil {
			if pref, ok := m.TweakValues[negotiate.PreferredNode]; ok {
				if fs, err := livesync.FromTweakValues(s, pref); err == nil {
					s = fs
				}
			}
		}
	}
	c, err := livesync.New(livesync.Config{Settings: s, Salt: salt})
	if err != nil {
		return nil, nil, err
	}
	return c, salt, nil
}

// isDeletedLocal reports a _local document couchapi deleted (it keeps a
// {"_deleted":true} marker).
func isDeletedLocal(raw []byte) bool {
	var m struct {
		Deleted bool `json:"_deleted"`
	}
	return json.Unmarshal(raw, &m) == nil && m.Deleted
}

// rekey rebuilds the hold-back with the vault's codec when the salt it
// was built with changed (the first client wrote it, or a rebuilt vault
// replaced it), or the settings the milestone's PREFERRED gives it did
// (a client writes the sync parameters before the milestone, and the
// bridge may adopt an upstream's milestone). The old hold-back saves its
// state; the new one resumes it, so nothing held is lost.
func (v *vaultStore) rekey(ctx context.Context) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return
	}
	codec, salt, err := vaultCodec(ctx, v.inner, v.passphrase)
	if err != nil {
		v.log.Warn("the vault's sync parameters could not be read; the hold-back keeps its current mode", "err", err)
		return
	}
	if codec == nil || bytes.Equal(salt, v.salt) && v.codec != nil && v.codec.Settings() == codec.Settings() {
		return
	}
	old := v.cur.Load()
	v.carry = addStats(v.carry, old.Stats())
	if err := old.Close(); err != nil {
		v.log.Warn("saving the hold-back before the rebuild", "err", err)
	}
	hb, err := holdback.New(v.cfg, holdback.Deps{Inner: noClose{v.inner}, Codec: codec, Hunter: v.hunter()})
	if err != nil {
		v.log.Error("the hold-back could not be rebuilt with the vault's codec; serving without it", "err", err)
		codec = nil
		if hb, err = holdback.New(v.cfg, holdback.Deps{Inner: noClose{v.inner}, Hunter: v.hunter()}); err != nil {
			v.log.Error("the hold-back could not be reopened; writes fail until a restart", "err", err)
			return
		}
		salt = nil
	} else {
		v.log.Info("the vault's salt is known: obfuscated metadata is now decrypted in memory to decide hold-back")
	}
	v.cur.Store(hb)
	v.salt, v.codec = salt, codec
}

// addStats adds b's counters to a's (gauges are taken from b).
func addStats(a, b holdback.Stats) holdback.Stats {
	a.Mode, a.Held, a.Documents, a.HeldByOwner = b.Mode, b.Held, b.Documents, b.HeldByOwner
	a.MaxHeldDocuments, a.MaxHeldPerOwner = b.MaxHeldDocuments, b.MaxHeldPerOwner
	a.Refused += b.Refused
	a.WrittenThrough += b.WrittenThrough
	a.Holds += b.Holds
	a.Released += b.Released
	a.Dropped += b.Dropped
	a.Unreadable += b.Unreadable
	a.Undecodable += b.Undecodable
	a.SaveErrors += b.SaveErrors
	ap, bp := &a.Purgatory, b.Purgatory
	ap.Active, ap.SoftExpired, ap.Remembered = bp.Active, bp.SoftExpired, bp.Remembered
	ap.Releases += bp.Releases
	ap.SoftExpiries += bp.SoftExpiries
	ap.Expiries += bp.Expiries
	ap.Revivals += bp.Revivals
	ap.VerifyFailures += bp.VerifyFailures
	ap.ReleaseErrors += bp.ReleaseErrors
	ap.Superseded += bp.Superseded
	return a
}

// Stats are the hold-back's gauges and counters, counting since this
// process started.
func (v *vaultStore) Stats() holdback.Stats {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return addStats(v.carry, v.cur.Load().Stats())
}

// HeldFirst lists at most limit held documents with their reasons, the
// first by id, and how many are held in all.
func (v *vaultStore) HeldFirst(limit int) ([]purgatory.HeldDoc, int) {
	return v.cur.Load().HeldFirst(limit)
}

// Mode says how the hold-back judges this database's metadata.
func (v *vaultStore) Mode() holdback.Mode { return v.cur.Load().Mode() }

// hasPassphrase reports whether a passphrase is configured (the Mode
// says whether it is in use yet).
func (v *vaultStore) hasPassphrase() bool { return v.passphrase != "" }

// Close stops the upstreams and the hunt, then closes the hold-back,
// which saves its purgatory state. The database file stays open (the
// boltdir.Databases closes it).
func (v *vaultStore) Close() error {
	if v.bridge != nil {
		v.bridge.stop() // before v.mu: its runners write through v
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	v.closed = true
	return v.cur.Load().Close()
}

// write runs a write call on the current hold-back.
func write[T any](v *vaultStore, f func(*holdback.Store) (T, error)) (T, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return f(v.cur.Load())
}

// Info describes the database.
func (v *vaultStore) Info(ctx context.Context) (engine.EndpointInfo, error) {
	return v.cur.Load().Info(ctx)
}

// Changes lists the database's changes. It takes no lock: a longpoll may
// wait long, and reads go to the database file, which a rebuild keeps.
func (v *vaultStore) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	return v.cur.Load().Changes(ctx, req)
}

// RevsDiff reports the revisions the database lacks; held ones count as
// present.
func (v *vaultStore) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	return write(v, func(s *holdback.Store) (map[string][]string, error) { return s.RevsDiff(ctx, revs) })
}

// BulkGet reads revisions; held ones are left out.
func (v *vaultStore) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	return v.cur.Load().BulkGet(ctx, revs)
}

// BulkDocsFrom writes revisions replicated from source (an upstream's
// throttle key) through the hold-back: held metadata gets the pulled
// delay and is hunted there first.
func (v *vaultStore) BulkDocsFrom(ctx context.Context, source string, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	return write(v, func(s *holdback.Store) ([]engine.BulkDocResult, error) { return s.BulkDocsFrom(ctx, source, docs) })
}

// ChunksArrived tells the hold-back that chunks were stored by another
// path (the hunt's deliveries).
func (v *vaultStore) ChunksArrived(ids []engine.ChunkID) { v.cur.Load().ChunksArrived(ids) }

// BulkDocs writes replicated revisions through the hold-back; metadata
// held for an authenticated user's push counts against that user's
// limit ([holdback] max_held_documents_per_user).
func (v *vaultStore) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	ctx = ownedBy(ctx)
	return write(v, func(s *holdback.Store) ([]engine.BulkDocResult, error) { return s.BulkDocs(ctx, docs) })
}

// ownedBy names the user couchapi authenticated for the request (none
// for the relay's own writes) as the hold-back's owner of its writes.
func ownedBy(ctx context.Context) context.Context {
	return holdback.WithOwner(ctx, couchapi.UserFrom(ctx))
}

// GetLocal reads a _local document.
func (v *vaultStore) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	return v.cur.Load().GetLocal(ctx, id)
}

// PutLocal writes a _local document; a write of the sync parameters may
// rebuild the hold-back with the vault's codec (see vaultStore), and
// reconnects the upstreams when the salt changed; a write of the
// milestone reconciles the upstreams' vault settings.
func (v *vaultStore) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	_, err := write(v, func(s *holdback.Store) (struct{}, error) { return struct{}{}, s.PutLocal(ctx, id, doc) })
	if err == nil && id == syncParamsLocalID {
		if v.passphrase != "" {
			v.rekey(ctx)
		}
		if v.bridge != nil {
			v.bridge.paramsChanged(ctx)
		}
	}
	if err == nil && id == milestoneLocalID {
		if v.passphrase != "" {
			v.rekey(ctx) // PREFERRED may change the codec's settings
		}
		if v.bridge != nil {
			v.bridge.settingsChanged() // the upstreams take the vault's settings
		}
	}
	return err
}

// GetChunks reads chunks.
func (v *vaultStore) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	return v.cur.Load().GetChunks(ctx, ids)
}

// PutChunks writes chunks; held documents they complete are released.
func (v *vaultStore) PutChunks(ctx context.Context, chunks []engine.Chunk) error {
	_, err := write(v, func(s *holdback.Store) (struct{}, error) { return struct{}{}, s.PutChunks(ctx, chunks) })
	return err
}

// Get reads a document; a held revision is not found.
func (v *vaultStore) Get(ctx context.Context, id string, opts store.GetOptions) (json.RawMessage, error) {
	return v.cur.Load().Get(ctx, id, opts)
}

// Put writes a local edit (never held).
func (v *vaultStore) Put(ctx context.Context, doc json.RawMessage) (string, error) {
	ctx = ownedBy(ctx)
	return write(v, func(s *holdback.Store) (string, error) { return s.Put(ctx, doc) })
}

// AllDocs lists the documents; documents with only held revisions are
// not listed.
func (v *vaultStore) AllDocs(ctx context.Context, opts store.AllDocsOptions) ([]store.DocInfo, error) {
	return v.cur.Load().AllDocs(ctx, opts)
}
