//go:build !js && !wasip1

package couchapi

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

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

// dbFileSuffix names a database file: <dir>/<name>.db.
const dbFileSuffix = ".db"

// DirDatabases keeps each database in its own bbolt file, <dir>/<name>.db,
// opened on first use and kept open until Delete or Close.
type DirDatabases struct {
	dir  string
	opts boltstore.Options

	mu     sync.Mutex
	open   map[string]store.Store
	closed bool
}

var _ Databases = (*DirDatabases)(nil)

// OpenDir returns the databases kept in dir, creating dir (mode 0700) if
// needed. opts apply to every database file (its Name is set to the
// database name); give opts.Options = StoreOptions(n) for revision
// history and _revs_limit as CouchDB has them (the zero Options keep only
// leaves' bodies and 100 revisions, the engine's local-replica defaults).
func OpenDir(dir string, opts boltstore.Options) (*DirDatabases, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, errors.New("couchapi: OpenDir needs a directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("couchapi: %w", err)
	}
	return &DirDatabases{dir: dir, opts: opts, open: map[string]store.Store{}}, nil
}

// Path returns the file that holds (or would hold) the named database,
// <dir>/<name>.db, e.g. to report its size; "" if name is not a valid
// database name.
func (d *DirDatabases) Path(name string) string {
	if !ValidDatabaseName(name) {
		return ""
	}
	return d.path(name)
}

func (d *DirDatabases) path(name string) string {
	return filepath.Join(d.dir, name+dbFileSuffix)
}

// ErrDamaged means a database file is not a readable bbolt database
// (damaged, truncated, or not a database at all). Restore it from a
// backup or move it away: the database then starts empty.
var ErrDamaged = errors.New("couchapi: the database file is damaged")

// openFile opens a database file. bbolt panics on some damaged files
// (a bad freelist page); that panic is an ErrDamaged error here.
func (d *DirDatabases) openFile(name string) (st store.Store, err error) {
	p := d.path(name)
	damaged := func(cause any) error {
		return fmt.Errorf("couchapi: database %q: %w (%v): restore %s from a backup, or move it away to start the database empty", name, ErrDamaged, cause, p)
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
		return nil, fmt.Errorf("couchapi: database %q: %w", name, err)
	}
	d.open[name] = st
	return st, nil
}

// Open returns the named database, opening its file on first use.
func (d *DirDatabases) Open(ctx context.Context, name string) (store.Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !ValidDatabaseName(name) {
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
		return nil, fmt.Errorf("couchapi: %w", err)
	}
	return d.openFile(name)
}

// Create makes an empty database file.
func (d *DirDatabases) Create(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return store.ErrClosed
	}
	if _, ok := d.open[name]; ok {
		return fmt.Errorf("database %q: %w", name, ErrExists)
	}
	if _, err := os.Stat(d.path(name)); err == nil {
		return fmt.Errorf("database %q: %w", name, ErrExists)
	}
	_, err := d.openFile(name)
	return err
}

// Delete closes the database (waiting for calls in flight; waiting feeds
// end with store.ErrClosed) and removes its file.
func (d *DirDatabases) Delete(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !ValidDatabaseName(name) {
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
		return fmt.Errorf("couchapi: %w", err)
	}
	return cerr
}

// List returns the names of the database files in the directory, sorted.
func (d *DirDatabases) List(ctx context.Context) ([]string, error) {
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
		return nil, fmt.Errorf("couchapi: %w", err)
	}
	var names []string
	for _, e := range entries {
		n, ok := strings.CutSuffix(e.Name(), dbFileSuffix)
		if ok && e.Type().IsRegular() && ValidDatabaseName(n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Close closes every open database file; later calls return
// store.ErrClosed.
func (d *DirDatabases) Close() error {
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
