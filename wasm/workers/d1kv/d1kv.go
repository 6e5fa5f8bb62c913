package d1kv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Exec is the SQL database the backend keeps its rows in: D1's API as
// the backend needs it. Implementations are safe for concurrent use.
type Exec interface {
	// Query runs one statement and returns its rows. Values are
	// int64 (or float64), string, []byte or nil; a BLOB may also come
	// back as a string or an array of numbers, as D1 returns it.
	Query(ctx context.Context, sql string, args ...any) ([]Row, error)
	// Batch runs the statements in order as one transaction: if one
	// fails, none has any effect and Batch returns its error.
	Batch(ctx context.Context, stmts []Stmt) error
}

// Stmt is one statement of a Batch. Args are int64, string or []byte.
type Stmt struct {
	SQL  string
	Args []any
}

// Row is one result row, its columns in the order the SELECT names them.
type Row []any

// Migrations create the tables, one statement each; running them again
// changes nothing.
var Migrations = []string{
	`CREATE TABLE IF NOT EXISTS livesync_kv (db TEXT NOT NULL, b INTEGER NOT NULL, k BLOB NOT NULL, v BLOB NOT NULL, PRIMARY KEY (db, b, k)) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS livesync_head (db TEXT NOT NULL PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS livesync_databases (name TEXT NOT NULL PRIMARY KEY, created INTEGER NOT NULL) WITHOUT ROWID`,
}

// Schema is Migrations as one SQL script (for a D1 migration file).
var Schema = strings.Join(Migrations, ";\n") + ";\n"

// Migrate creates the tables if they do not exist.
func Migrate(ctx context.Context, x Exec) error {
	stmts := make([]Stmt, len(Migrations))
	for i, m := range Migrations {
		stmts[i] = Stmt{SQL: m}
	}
	if err := x.Batch(ctx, stmts); err != nil {
		return fmt.Errorf("d1kv: migrate: %w", err)
	}
	return nil
}

// MaxAttempts is how many times Update runs fn when other isolates keep
// committing first.
const MaxAttempts = 16

// ErrContention means an Update lost the race to other writers
// MaxAttempts times in a row; nothing of it was written.
var ErrContention = errors.New("d1kv: other writers kept committing first; nothing was written, try again")

// errClosed is returned by a closed backend's transactions.
var errClosed = fmt.Errorf("d1kv: backend closed: %w", store.ErrClosed)

// Backend is a store.Backend over one database's rows.
type Backend struct {
	x  Exec
	db string

	life   sync.RWMutex // held shared by transactions, exclusively by Close
	closed bool
	write  sync.Mutex // serialises Updates

	preMu sync.Mutex
	pre   *prefetched // rows read by Prefetch for the next transaction
}

var (
	_ store.Backend    = (*Backend)(nil)
	_ store.Prefetcher = (*Backend)(nil)
)

// New returns the backend of database db (any non-empty name), creating
// its commit version if it has none. The tables must exist (Migrate).
// Closing the backend leaves x open.
func New(x Exec, db string) (*Backend, error) {
	if db == "" {
		return nil, errors.New("d1kv: New needs a database name")
	}
	err := x.Batch(context.Background(), []Stmt{{
		SQL: `INSERT OR IGNORE INTO livesync_head (db, version) VALUES (?1, 0)`, Args: []any{db}}})
	if err != nil {
		return nil, fmt.Errorf("d1kv: database %q: %w", db, err)
	}
	return &Backend{x: x, db: db}, nil
}

// enter marks a transaction in flight; leave must follow.
func (b *Backend) enter() error {
	b.life.RLock()
	if b.closed {
		b.life.RUnlock()
		return errClosed
	}
	return nil
}

func (b *Backend) leave() { b.life.RUnlock() }

// Close waits for the transactions in flight; later ones fail.
func (b *Backend) Close() error {
	b.life.Lock()
	b.closed = true
	b.life.Unlock()
	return nil
}

// takePrefetched returns the rows Prefetch read, once.
func (b *Backend) takePrefetched() *prefetched {
	b.preMu.Lock()
	defer b.preMu.Unlock()
	p := b.pre
	b.pre = nil
	return p
}

// View runs fn over reads straight from D1 (see the package doc for what
// it sees of other isolates' commits).
func (b *Backend) View(fn func(store.Tx) error) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	t := b.newTx(false)
	// The counters first: what the View reads after them is as new or
	// newer, so a changes scan never ends past a change it did not see.
	if err := t.begin(t.ctx); err != nil {
		return err
	}
	if p := b.takePrefetched(); p != nil && p.version == t.version {
		t.adopt(p) // no commit since the rows were read: they are current
	}
	err := fn(t)
	return cmp.Or(t.err, err)
}

// Update runs fn against D1 overlaid with fn's writes and commits them in
// one batch guarded by the commit version, running fn again when another
// writer committed first.
func (b *Backend) Update(fn func(store.Tx) error) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	b.write.Lock()
	defer b.write.Unlock()
	ctx := context.Background()
	for range MaxAttempts {
		t := b.newTx(true)
		if err := t.begin(ctx); err != nil {
			return err
		}
		if p := b.takePrefetched(); p != nil && p.version == t.version {
			t.adopt(p)
		}
		if err := fn(t); t.err != nil || err != nil {
			return cmp.Or(t.err, err)
		}
		if err := t.checkSizes(); err != nil {
			return err
		}
		stmts := t.commitStmts()
		if len(stmts) == 0 {
			return nil
		}
		err := b.x.Batch(ctx, stmts)
		if err == nil {
			return nil
		}
		if isFull(err) {
			return fmt.Errorf("d1kv: commit: %w: %w", store.ErrStorageFull, err)
		}
		now, found, verr := b.headVersion(ctx)
		switch {
		case verr != nil:
			return fmt.Errorf("d1kv: commit: %w (and reading the commit version: %v)", err, verr)
		case !found:
			return fmt.Errorf("d1kv: database %q was deleted: %w", b.db, engine.ErrNotFound)
		case now == t.version:
			return fmt.Errorf("d1kv: commit: %w", err)
		}
		// Another writer committed first: run fn again on its state.
	}
	return ErrContention
}

// MaxRowBytes is D1's limit on a row (and on one string or BLOB).
const MaxRowBytes = 2_000_000

// checkSizes refuses a write D1 would refuse for its size, with an error
// wrapping engine.ErrTooLarge (HTTP 413 from couchapi).
func (t *tx) checkSizes() error {
	for b, m := range t.writes {
		for k, v := range m {
			if n := len(t.b.db) + len(k) + len(v) + 16; n > MaxRowBytes {
				return fmt.Errorf("d1kv: a record of %d bytes (bucket %d) is over D1's row limit of %d bytes: %w",
					n, b, MaxRowBytes, engine.ErrTooLarge)
			}
		}
	}
	return nil
}

// isFull reports whether err is D1 or SQLite refusing a write because
// the database reached its size limit.
func isFull(err error) bool {
	msg := err.Error()
	for _, s := range []string{"SQLITE_FULL", "database or disk is full", "maximum DB size", "maximum database size"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// headVersion reads the database's commit version.
func (b *Backend) headVersion(ctx context.Context) (int64, bool, error) {
	rows, err := b.x.Query(ctx, `SELECT version FROM livesync_head WHERE db = ?1`, b.db)
	if err != nil {
		return 0, false, err
	}
	if len(rows) == 0 {
		return 0, false, nil
	}
	v, err := asInt(rows[0][0])
	return v, true, err
}
