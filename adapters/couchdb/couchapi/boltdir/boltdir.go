//go:build !js && !wasip1

// Package boltdir keeps the databases a couchapi.Server serves in a
// directory, one bbolt file per database (<dir>/<name>.db). It is the
// couchapi.Databases of the relay and of the tests that run a server on
// disk; couchapi itself stays free of bbolt, so a build without a file
// system (the Workers build) serves its own Databases.
package boltdir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	berrors "go.etcd.io/bbolt/errors"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

// dbFileSuffix names a database file: <dir>/<name>.db.
const dbFileSuffix = ".db"

// Databases keeps each database in its own bbolt file, <dir>/<name>.db,
// opened on first use and kept open until Delete or Close.
type Databases struct {
	dir  string
	opts boltstore.Options

	mu     sync.Mutex
	open   map[string]store.Store
	closed bool
}

var _ couchapi.Databases = (*Databases)(nil)

// Open returns the databases kept in dir, creating dir (mode 0700) if
// needed. opts apply to every database file (its Name is set to the
// database name); give opts.Options = couchapi.StoreOptions(n) for
// revision history and _revs_limit as CouchDB has them (the zero Options
// keep only leaves' bodies and 100 revisions, the engine's local-replica
// defaults).
func Open(dir string, opts boltstore.Options) (*Databases, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, errors.New("boltdir: Open needs a directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("boltdir: %w", err)
	}
	return &Databases{dir: dir, opts: opts, open: map[string]store.Store{}}, nil
}

// Path returns the file that holds (or would hold) the named database,
// <dir>/<name>.db, e.g. to report its size; "" if name is not a valid
// database name.
func (d *Databases) Path(name string) string {
	if !couchapi.ValidDatabaseName(name) {
		return ""
	}
	return d.path(name)
}

func (d *Databases) path(name string) string {
	return filepath.Join(d.dir, name+dbFileSuffix)
}

// ErrDamaged means a database file is not a readable bbolt database
// (damaged, truncated, or not a database at all). Restore it from a
// backup or move it away: the database then starts empty.
var ErrDamaged = errors.New("boltdir: the database file is damaged")

// openFile opens a database file. bbolt panics on some damaged files
// (a bad freelist page); that panic is an ErrDamaged error here.
func (d *Databases) openFile(name string) (st store.Store, err error) {
	p := d.path(name)
	damaged := func(cause any) error {
		return fmt.Errorf("boltdir: database %q: %w (%v): restore %s from a backup, or move it away to start the database empty", name, ErrDamaged, cause, p)
	}
	defer func() {
		if r := recover(); r != nil {
			st, err = nil, damaged(r)
		}
	}()
	o := d.opts
	o.Name = name
	st, err = boltstore.Open(p, o)
	switch {
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, damaged(err)
	case err != nil:
		return nil, fmt.Errorf("boltdir: database %q: %w", name, err)
	}
	d.open[name] = st
	return st, nil
}

// Open returns the named database, opening its file on first use.
func (d *Databases) Open(ctx context.Context, name string) (store.Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !couchapi.ValidDatabaseName(name) {
		return nil, fmt.Errorf("database %q: %w", name, engine.ErrNotFound)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, store.ErrClosed
	}
	if st, ok := d.open[name]; ok {
		return st, nil
	}
	if _, err := os.Stat(d.path(name)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("database %q: %w", name, engine.ErrNotFound)
		}
		return nil, fmt.Errorf("boltdir: %w", err)
	}
	return d.openFile(name)
}

// Create makes an empty database file.
func (d *Databases) Create(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !couchapi.ValidDatabaseName(name) {
		return fmt.Errorf("%w: %q", couchapi.ErrIllegalName, name)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return store.ErrClosed
	}
	if _, ok := d.open[name]; ok {
		return fmt.Errorf("database %q: %w", name, couchapi.ErrExists)
	}
	if _, err := os.Stat(d.path(name)); err == nil {
		return fmt.Errorf("database %q: %w", name, couchapi.ErrExists)
	}
	_, err := d.openFile(name)
	return err
}

// Delete closes the database (waiting for calls in flight; waiting feeds
// end with store.ErrClosed) and removes its file.
func (d *Databases) Delete(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !couchapi.ValidDatabaseName(name) {
		return fmt.Errorf("database %q: %w", name, engine.ErrNotFound)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return store.ErrClosed
	}
	var cerr error
	if st, ok := d.open[name]; ok {
		delete(d.open, name)
		cerr = st.Close()
	}
	if err := os.Remove(d.path(name)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("database %q: %w", name, engine.ErrNotFound)
		}
		return fmt.Errorf("boltdir: %w", err)
	}
	return cerr
}

// List returns the names of the database files in the directory, sorted.
func (d *Databases) List(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, store.ErrClosed
	}
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("boltdir: %w", err)
	}
	var names []string
	for _, e := range entries {
		n, ok := strings.CutSuffix(e.Name(), dbFileSuffix)
		if ok && e.Type().IsRegular() && couchapi.ValidDatabaseName(n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Close closes every open database file; later calls return
// store.ErrClosed.
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
