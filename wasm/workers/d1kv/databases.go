package d1kv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Databases is a couchapi.Databases whose databases all live in one D1
// database: their names in livesync_databases, their keys in livesync_kv.
// Every isolate of the Worker holds its own Databases over the same D1
// database. Open checks the name in D1 each time, so a database another
// isolate deleted is gone here too; an Update of a store opened before
// that fails with engine.ErrNotFound and writes nothing.
type Databases struct {
	x    Exec
	opts store.Options

	mu     sync.Mutex
	open   map[string]store.Store
	closed bool
}

var _ couchapi.Databases = (*Databases)(nil)

// OpenDatabases creates the tables if needed and returns the databases
// kept in x. Each database's store is opened with opts (its Name set to
// the database name): couchapi.StoreOptions(0) keeps history as CouchDB
// does, as the relay's databases do.
func OpenDatabases(ctx context.Context, x Exec, opts store.Options) (*Databases, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := Migrate(ctx, x); err != nil {
		return nil, err
	}
	return NewDatabases(x, opts)
}

// NewDatabases is OpenDatabases for a D1 database whose tables exist
// (its migration applied, `wrangler d1 migrations apply`): it costs no
// round trip, which matters where every request starts a new instance.
func NewDatabases(x Exec, opts store.Options) (*Databases, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Databases{x: x, opts: opts, open: map[string]store.Store{}}, nil
}

// exists reports whether name is in livesync_databases.
func (d *Databases) exists(ctx context.Context, name string) (bool, error) {
	rows, err := d.x.Query(ctx, `SELECT 1 FROM livesync_databases WHERE name = ?1`, name)
	if err != nil {
		return false, fmt.Errorf("d1kv: database %q: %w", name, err)
	}
	return len(rows) > 0, nil
}

// forget closes and drops the store of name, if one is open. d.mu held.
func (d *Databases) forget(name string) error {
	st, ok := d.open[name]
	if !ok {
		return nil
	}
	delete(d.open, name)
	return st.Close()
}

// Open returns the named database's store.
func (d *Databases) Open(ctx context.Context, name string) (store.Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !couchapi.ValidDatabaseName(name) {
		return nil, fmt.Errorf("database %q: %w", name, engine.ErrNotFound)
	}
	ok, err := d.exists(ctx, name)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, store.ErrClosed
	}
	if !ok {
		d.forget(name)
		return nil, fmt.Errorf("database %q: %w", name, engine.ErrNotFound)
	}
	if st, ok := d.open[name]; ok {
		return st, nil
	}
	opts := d.opts
	opts.Name = name
	st, err := store.Open(&Backend{x: d.x, db: name}, opts)
	if err != nil {
		return nil, err
	}
	d.open[name] = st
	return st, nil
}

// Create makes an empty database. Its commit versions start at the time
// in milliseconds, so they never repeat those of a database of the same
// name deleted before.
func (d *Databases) Create(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !couchapi.ValidDatabaseName(name) {
		return fmt.Errorf("%w: %q", couchapi.ErrIllegalName, name)
	}
	if err := d.check(); err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	err := d.x.Batch(ctx, []Stmt{
		{SQL: `INSERT INTO livesync_databases (name, created) VALUES (?1, ?2)`, Args: []any{name, now}},
		{SQL: `DELETE FROM livesync_kv WHERE db = ?1`, Args: []any{name}},
		{SQL: `INSERT OR REPLACE INTO livesync_head (db, version) VALUES (?1, ?2)`, Args: []any{name, now}},
	})
	if err == nil {
		return nil
	}
	if ok, qerr := d.exists(ctx, name); qerr == nil && ok {
		return fmt.Errorf("database %q: %w", name, couchapi.ErrExists)
	}
	return fmt.Errorf("d1kv: create %q: %w", name, err)
}

// Delete removes a database and every key of it.
func (d *Databases) Delete(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !couchapi.ValidDatabaseName(name) {
		return fmt.Errorf("database %q: %w", name, engine.ErrNotFound)
	}
	if err := d.check(); err != nil {
		return err
	}
	ok, err := d.exists(ctx, name)
	if err != nil {
		return err
	}
	d.mu.Lock()
	cerr := d.forget(name)
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("database %q: %w", name, engine.ErrNotFound)
	}
	err = d.x.Batch(ctx, []Stmt{
		{SQL: `DELETE FROM livesync_databases WHERE name = ?1`, Args: []any{name}},
		{SQL: `DELETE FROM livesync_head WHERE db = ?1`, Args: []any{name}},
		{SQL: `DELETE FROM livesync_kv WHERE db = ?1`, Args: []any{name}},
	})
	if err != nil {
		return fmt.Errorf("d1kv: delete %q: %w", name, err)
	}
	return cerr
}

// List returns the database names, sorted.
func (d *Databases) List(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := d.check(); err != nil {
		return nil, err
	}
	rows, err := d.x.Query(ctx, `SELECT name FROM livesync_databases ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("d1kv: list: %w", err)
	}
	names := make([]string, 0, len(rows))
	for _, r := range rows {
		if len(r) != 1 {
			return nil, errors.New("d1kv: list: a row of the wrong shape")
		}
		n, ok := r[0].(string)
		if !ok {
			return nil, fmt.Errorf("d1kv: list: a name of type %T", r[0])
		}
		names = append(names, n)
	}
	slices.Sort(names) // SQLite's order is by bytes already; D1's too
	return names, nil
}

func (d *Databases) check() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return store.ErrClosed
	}
	return nil
}

// Close closes every open store; later calls return store.ErrClosed. x
// stays open.
func (d *Databases) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	for _, st := range d.open {
		errs = append(errs, st.Close())
	}
	d.open = nil
	return errors.Join(errs...)
}
