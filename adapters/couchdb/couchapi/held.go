package couchapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/bridge"
	"github.com/livesync-go/livesync-go/engine/holdback"
	"github.com/livesync-go/livesync-go/engine/store"
)

// HeldConfig configures NewHeld.
type HeldConfig struct {
	// Holdback configures every database's hold-back.
	Holdback holdback.Config
	// Passphrases are the vault passphrases of the databases that have
	// one, by name. Secret: never logged.
	Passphrases map[string]string
	// Reserved are names that are no database (paths the server serves
	// itself): Open and Delete answer engine.ErrNotFound, Create
	// ErrIllegalName, and List leaves them out.
	Reserved map[string]bool
	// Bridge, if set, builds the bridge of database name to its
	// upstreams over local, the database as served (nil, nil: it has
	// none). The bridge is the hold-back's Hunter; it starts once the
	// database is open and stops when it closes.
	Bridge func(name string, local bridge.Local, log *slog.Logger) (*bridge.Bridge, error)
	// Log receives the databases' records, with a "db" attribute; nil
	// discards.
	Log *slog.Logger
	// Shared, if set, says which databases are shared with other relays
	// (a CouchDB store) and how they are coordinated (nil: not shared).
	Shared func(name string) *SharedConfig
}

// HeldDatabases decorates a Databases so that every database is served
// through a hold-back (holdback.Served): no client sees a note before
// its chunks. Close persists every database's purgatory, then closes
// the inner Databases if it is an io.Closer.
type HeldDatabases struct {
	inner Databases
	cfg   HeldConfig

	mu     sync.Mutex
	open   map[string]*HeldDatabase
	closed bool
}

var _ Databases = (*HeldDatabases)(nil)

// HeldDatabase is one open database of a HeldDatabases.
type HeldDatabase struct {
	*holdback.Served
	Name string

	bridge *bridge.Bridge // a database that is not shared: its bridge, for its lifetime
	shared *sharedRunner  // a shared database: the runner, which owns the bridge
}

// Bridge runs the database's upstreams and its hunt; nil when it has no
// upstreams, or, for a database shared with other relays, while this
// relay is not the one that bridges it (the leader). A shared database's
// bridge changes with the leadership: call Bridge each time instead of
// keeping what it returned.
func (d *HeldDatabase) Bridge() *bridge.Bridge {
	if d.shared != nil {
		return d.shared.currentBridge()
	}
	return d.bridge
}

// Close stops the database's bridge and closes its hold-back, which
// saves its purgatory state. A shared database also stops its runner and
// gives up the lease, with the hunt's state for the next leader. The
// inner store stays open.
func (d *HeldDatabase) Close() error {
	if d.shared != nil {
		return d.shared.close()
	}
	return d.Served.Close()
}

// NewHeld serves the databases of inner through hold-backs.
func NewHeld(inner Databases, c HeldConfig) *HeldDatabases {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return &HeldDatabases{inner: inner, cfg: c, open: map[string]*HeldDatabase{}}
}

// Open returns the named database served through the hold-back.
func (h *HeldDatabases) Open(ctx context.Context, name string) (store.Store, error) {
	return h.OpenHeld(ctx, name)
}

// OpenHeld opens the named database (once: later calls return the same
// one).
func (h *HeldDatabases) OpenHeld(ctx context.Context, name string) (*HeldDatabase, error) {
	if h.cfg.Reserved[name] {
		return nil, fmt.Errorf("database %q: %w", name, engine.ErrNotFound)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, store.ErrClosed
	}
	if d, ok := h.open[name]; ok {
		return d, nil
	}
	inner, err := h.inner.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	d, err := h.serve(ctx, name, inner)
	if err != nil {
		return nil, err
	}
	h.open[name] = d
	return d, nil
}

// serve builds the hold-back of the database name over inner, and its
// bridge, and opens them.
func (h *HeldDatabases) serve(ctx context.Context, name string, inner store.Store) (*HeldDatabase, error) {
	log := h.cfg.Log.With("db", name)
	if h.cfg.Shared != nil {
		if sc := h.cfg.Shared(name); sc != nil {
			return h.serveShared(ctx, name, inner, *sc, log)
		}
	}
	served := holdback.NewServed(ctx, inner, holdback.ServedConfig{Name: name, Holdback: h.cfg.Holdback,
		Passphrase: h.cfg.Passphrases[name], Owner: UserFrom, Log: log})
	d := &HeldDatabase{Served: served, Name: name}
	var hooks holdback.ServedHooks
	if h.cfg.Bridge != nil {
		b, err := h.cfg.Bridge(name, served, log)
		if err != nil {
			return nil, err
		}
		if b != nil {
			d.bridge = b
			hooks = holdback.ServedHooks{Hunter: b.Hunt(), ParamsChanged: b.ParamsChanged, SettingsChanged: b.SettingsChanged, Stop: b.Stop}
		}
	}
	if err := served.Open(hooks); err != nil {
		if d.bridge != nil {
			d.bridge.Close()
		}
		return nil, err
	}
	if d.bridge != nil {
		d.bridge.Start()
	}
	return d, nil
}

// Create makes an empty database and opens it (so that it is listed as
// open at once).
func (h *HeldDatabases) Create(ctx context.Context, name string) error {
	if h.cfg.Reserved[name] {
		return fmt.Errorf("%w: %q is a path the server serves itself", ErrIllegalName, name)
	}
	if err := h.inner.Create(ctx, name); err != nil {
		return err
	}
	_, err := h.OpenHeld(ctx, name)
	return err
}

// Delete closes the database's hold-back and removes it.
func (h *HeldDatabases) Delete(ctx context.Context, name string) error {
	if h.cfg.Reserved[name] {
		return fmt.Errorf("database %q: %w", name, engine.ErrNotFound)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return store.ErrClosed
	}
	if d, ok := h.open[name]; ok {
		delete(h.open, name)
		if err := d.Close(); err != nil {
			h.cfg.Log.Warn("closing the hold-back of a deleted database", "db", name, "err", err)
		}
	}
	return h.inner.Delete(ctx, name)
}

// List returns the database names, sorted.
func (h *HeldDatabases) List(ctx context.Context) ([]string, error) {
	names, err := h.inner.List(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(names, func(n string) bool { return h.cfg.Reserved[n] }), nil
}

// Opened returns the open databases, sorted by name.
func (h *HeldDatabases) Opened() []*HeldDatabase {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*HeldDatabase, 0, len(h.open))
	for _, d := range h.open {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *HeldDatabase) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Close closes every hold-back (each saves its purgatory state), then
// the inner Databases. Later calls return nil.
func (h *HeldDatabases) Close() error {
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
	for name, d := range open {
		if err := d.Close(); err != nil {
			errs = append(errs, fmt.Errorf("database %q: %w", name, err))
		}
	}
	if c, ok := h.inner.(io.Closer); ok {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
