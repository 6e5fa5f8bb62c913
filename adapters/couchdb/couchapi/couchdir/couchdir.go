// Package couchdir serves databases kept on a CouchDB server: each
// served name is a database on the server, read and written through a
// couchdb.Store, so that several relays in front of the server share it.
package couchdir

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Config configures Open.
type Config struct {
	Server couchdb.Config    // URL and credentials; Database is ignored
	Names  map[string]string // served name → CouchDB database name
	Log    *slog.Logger
}

// Databases is a couchapi.Databases whose databases are CouchDB databases
// on one server. Only the names in Config.Names exist for it: List
// returns them, Create of another name is refused (the relay serves only
// its configured databases), Delete is refused (a database shared by
// several relays is deleted on the CouchDB server, not through one of
// them).
type Databases struct {
	cfg   Config
	names []string // served names, sorted
	log   *slog.Logger

	mu     sync.Mutex
	closed bool
	stores map[string]*couchdb.Store // by served name, once opened
}

var _ couchapi.Databases = (*Databases)(nil)

// Open returns the Databases of cfg. It checks the configuration but
// does not contact the server.
func Open(ctx context.Context, cfg Config) (*Databases, error) {
	if len(cfg.Names) == 0 {
		return nil, errors.New("couchdir: no database is configured")
	}
	d := &Databases{cfg: cfg, log: cfg.Log, stores: map[string]*couchdb.Store{}}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	for name, db := range cfg.Names {
		if !couchapi.ValidDatabaseName(name) {
			return nil, fmt.Errorf("couchdir: served name %q: %w", name, couchapi.ErrIllegalName)
		}
		c := cfg.Server
		c.Database = db
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("couchdir: database %q: %w", name, err)
		}
		d.names = append(d.names, name)
	}
	slices.Sort(d.names)
	return d, nil
}

// newStore opens a Store over the CouchDB database of served name.
func (d *Databases) newStore(name string) (*couchdb.Store, error) {
	c := d.cfg.Server
	c.Database = d.cfg.Names[name]
	return couchdb.OpenStore(c, couchdb.StoreOptions{Name: name})
}

func (d *Databases) notConfigured(name string) error {
	return fmt.Errorf("couchdir: database %q is not one of this relay's databases (%s): %w",
		name, strings.Join(d.names, ", "), engine.ErrNotFound)
}

// Open returns the named database's store, the same one each time until
// Close. The first Open of a name checks that the database exists on the
// server (engine.ErrNotFound if not; store.ErrUnavailable if the server
// cannot be reached, and then the next Open asks again).
func (d *Databases) Open(ctx context.Context, name string) (store.Store, error) {
	if _, ok := d.cfg.Names[name]; !ok {
		return nil, d.notConfigured(name)
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, store.ErrClosed
	}
	if st, ok := d.stores[name]; ok {
		d.mu.Unlock()
		return st, nil
	}
	d.mu.Unlock()
	st, err := d.newStore(name)
	if err != nil {
		return nil, err
	}
	ok, err := st.Exists(ctx)
	if err == nil && !ok {
		err = fmt.Errorf("couchdir: database %q (%q on the CouchDB server): %w", name, d.cfg.Names[name], engine.ErrNotFound)
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		st.Close()
		return nil, store.ErrClosed
	}
	if prev, ok := d.stores[name]; ok { // opened meanwhile by another call
		st.Close()
		return prev, nil
	}
	d.stores[name] = st
	return st, nil
}

// Create creates a configured database on the server if it is missing
// (couchapi.ErrExists if it is there); another name is refused with
// couchapi.ErrIllegalName.
func (d *Databases) Create(ctx context.Context, name string) error {
	if _, ok := d.cfg.Names[name]; !ok {
		return fmt.Errorf("%w: %q: this relay serves only its configured databases (%s), kept on a CouchDB server",
			couchapi.ErrIllegalName, name, strings.Join(d.names, ", "))
	}
	st, err := d.newStore(name)
	if err != nil {
		return err
	}
	defer st.Close()
	created, err := st.Create(ctx)
	if err != nil {
		return fmt.Errorf("couchdir: create %q: %w", name, err)
	}
	if !created {
		return fmt.Errorf("couchdir: %q: %w", name, couchapi.ErrExists)
	}
	d.log.Info("database created on the CouchDB server", "db", name, "couchdb_database", d.cfg.Names[name])
	return nil
}

// Delete is refused: other relays may serve the database; delete it on
// the CouchDB server.
func (d *Databases) Delete(ctx context.Context, name string) error {
	if _, ok := d.cfg.Names[name]; !ok {
		return d.notConfigured(name)
	}
	return fmt.Errorf("couchdir: database %q is kept on a CouchDB server that other relays may share; delete it on the CouchDB server: %w",
		name, couchapi.ErrForbidden)
}

// List returns the configured names, sorted.
func (d *Databases) List(ctx context.Context) ([]string, error) {
	return slices.Clone(d.names), nil
}

// Close closes every store Open returned.
func (d *Databases) Close() error {
	d.mu.Lock()
	d.closed = true
	stores := d.stores
	d.stores = map[string]*couchdb.Store{}
	d.mu.Unlock()
	var errs []error
	for _, st := range stores {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

// ServerUUID returns the CouchDB server's uuid (GET / "uuid"), so that
// every relay in front of the server has the same one (replication ids
// must agree across relays). A server that gives none (CouchDB 1.x) gets
// one derived from its URL: relays agree then only if they name the
// server by the same URL.
func (d *Databases) ServerUUID(ctx context.Context) (string, error) {
	st, err := d.newStore(d.names[0])
	if err != nil {
		return "", err
	}
	defer st.Close()
	uuid, err := st.ServerUUID(ctx)
	if err != nil {
		return "", fmt.Errorf("couchdir: reading the server's uuid: %w", err)
	}
	if uuid == "" {
		sum := sha256.Sum256([]byte("livesync-go couchdir\x00" + strings.TrimRight(d.cfg.Server.URL, "/")))
		uuid = hex.EncodeToString(sum[:16])
		d.log.Warn("the CouchDB server gives no uuid; using one derived from its URL (give every relay the same URL)", "uuid", uuid)
	}
	return uuid, nil
}
