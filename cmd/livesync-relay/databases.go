package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi/boltdir"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/holdback"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
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

// vaultStore is one served database: the hold-back over its file, rebuilt
// with the vault's codec as its salt and settings appear
// (holdback.Served), and the bridge to its upstreams, if any.
type vaultStore struct {
	*holdback.Served
	name string
	// bridge, if the database has upstreams, runs them and the hunt
	// (the hold-back's Hunter).
	bridge *bridge
}

func openVaultStore(ctx context.Context, name string, inner store.Store, cfg holdback.Config, passphrase string, setup *bridgeSetup, log *slog.Logger) (*vaultStore, error) {
	served := holdback.NewServed(ctx, inner, holdback.ServedConfig{Name: name, Holdback: cfg, Passphrase: passphrase,
		Owner: couchapi.UserFrom, Log: log})
	v := &vaultStore{Served: served, name: name}
	var hooks holdback.ServedHooks
	if setup != nil {
		b, err := newBridge(v, *setup, log)
		if err != nil {
			return nil, err
		}
		v.bridge = b
		hooks = holdback.ServedHooks{Hunter: b.hunt, ParamsChanged: b.paramsChanged, SettingsChanged: b.settingsChanged, Stop: b.stop}
	}
	if err := served.Open(hooks); err != nil {
		if v.bridge != nil {
			v.bridge.close()
		}
		return nil, err
	}
	if v.bridge != nil {
		v.bridge.start()
	}
	return v, nil
}

// currentCodec returns the vault's codec and its salt (nil without the
// passphrase or before the vault has a salt).
func (v *vaultStore) currentCodec() (*livesync.Codec, []byte) { return v.Codec() }

// hasPassphrase reports whether a passphrase is configured.
func (v *vaultStore) hasPassphrase() bool { return v.HasPassphrase() }
