package couchapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Errors of Databases and of the server's handlers.
var (
	// ErrExists means Databases.Create named a database that exists
	// (CouchDB's 412 file_exists).
	ErrExists = errors.New("couchapi: database exists")
	// ErrIllegalName means a database name breaks CouchDB's rule
	// ^[a-z][a-z0-9_$()+-]*$ (400 illegal_database_name).
	ErrIllegalName = errors.New("couchapi: illegal database name")
	// ErrForbidden, wrapped in an error a Store (or a decorator around
	// one) returns, makes the server answer 403 forbidden, or a per-document
	// {"error":"forbidden"} row in _bulk_docs.
	ErrForbidden = errors.New("couchapi: forbidden")
)

// maxNameLen is the longest database name accepted (CouchDB refuses path
// segments longer than 238 bytes on most file systems).
const maxNameLen = 238

// ValidDatabaseName reports whether name follows CouchDB's database name
// rule ^[a-z][a-z0-9_$()+-]*$ (engine/FORMAT.md §5.1), at most 238 bytes.
func ValidDatabaseName(name string) bool {
	if name == "" || len(name) > maxNameLen || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '_', c == '$', c == '(', c == ')', c == '+', c == '-':
		default:
			return false
		}
	}
	return true
}

func checkName(name string) error {
	if !ValidDatabaseName(name) {
		return fmt.Errorf("%w: %q", ErrIllegalName, name)
	}
	return nil
}

// Databases is the set of databases a Server serves. Implementations are
// safe for concurrent use.
type Databases interface {
	// Open returns the named database's store, or an error wrapping
	// engine.ErrNotFound if it does not exist. The store belongs to the
	// Databases: callers never close it. After Delete, a store returned
	// earlier answers store.ErrClosed.
	Open(ctx context.Context, name string) (store.Store, error)
	// Create makes an empty database; ErrExists if it exists,
	// ErrIllegalName for a name ValidDatabaseName refuses.
	Create(ctx context.Context, name string) error
	// Delete removes a database and everything in it; engine.ErrNotFound
	// if absent.
	Delete(ctx context.Context, name string) error
	// List returns the names of the databases, sorted.
	List(ctx context.Context) ([]string, error)
}

// MemoryDatabases keeps each database in a store.NewMemory store with
// StoreOptions(0) (history as CouchDB keeps it): for tests and the wasm
// build. Its data is lost when the process ends.
type MemoryDatabases struct {
	mu     sync.Mutex
	dbs    map[string]store.Store
	closed bool
}

var _ Databases = (*MemoryDatabases)(nil)

// NewMemoryDatabases returns an empty MemoryDatabases.
func NewMemoryDatabases() *MemoryDatabases {
	return &MemoryDatabases{dbs: map[string]store.Store{}}
}

// Open returns the named database.
func (m *MemoryDatabases) Open(ctx context.Context, name string) (store.Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, store.ErrClosed
	}
	st, ok := m.dbs[name]
	if !ok {
		return nil, fmt.Errorf("database %q: %w", name, engine.ErrNotFound)
	}
	return st, nil
}

// Create makes an empty database.
func (m *MemoryDatabases) Create(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return store.ErrClosed
	}
	if _, ok := m.dbs[name]; ok {
		return fmt.Errorf("database %q: %w", name, ErrExists)
	}
	opts := StoreOptions(0)
	opts.Name = name
	st, err := store.NewMemory(opts)
	if err != nil {
		return err
	}
	m.dbs[name] = st
	return nil
}

// Delete removes a database.
func (m *MemoryDatabases) Delete(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return store.ErrClosed
	}
	st, ok := m.dbs[name]
	delete(m.dbs, name)
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("database %q: %w", name, engine.ErrNotFound)
	}
	return st.Close()
}

// List returns the database names, sorted.
func (m *MemoryDatabases) List(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, store.ErrClosed
	}
	names := make([]string, 0, len(m.dbs))
	for n := range m.dbs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// Close closes every store; later calls return store.ErrClosed.
func (m *MemoryDatabases) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	for _, st := range m.dbs {
		errs = append(errs, st.Close())
	}
	m.dbs = nil
	return errors.Join(errs...)
}
