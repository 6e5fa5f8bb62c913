//go:build !js && !wasip1

// Package sqlitexec runs d1kv.Exec over an SQLite file (the pure-Go
// modernc.org/sqlite), standing in for D1 in native tests: D1 is SQLite,
// and its batch() is one transaction, as Batch is here.
package sqlitexec

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/livesync-go/livesync-go/wasm/workers/d1kv"
)

// DB is an SQLite database file used as a d1kv.Exec. Several DBs may
// open the same file, like several isolates binding one D1 database.
type DB struct{ db *sql.DB }

var _ d1kv.Exec = (*DB)(nil)

// Open opens (creating it if needed) the SQLite file at path, in WAL
// mode, with writers waiting up to 10 s for each other.
func Open(path string) (*DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlitexec: %w", err)
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlitexec: %w", err)
	}
	return &DB{db: db}, nil
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// Query runs a SELECT.
func (d *DB) Query(ctx context.Context, query string, args ...any) ([]d1kv.Row, error) {
	rows, err := d.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []d1kv.Row
	for rows.Next() {
		r := make(d1kv.Row, len(cols))
		ptrs := make([]any, len(cols))
		for i := range r {
			ptrs[i] = &r[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Batch runs stmts in one transaction.
func (d *DB) Batch(ctx context.Context, stmts []d1kv.Stmt) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for i, s := range stmts {
		if _, err := tx.ExecContext(ctx, s.SQL, s.Args...); err != nil {
			tx.Rollback()
			return fmt.Errorf("statement %d of %d: %w", i+1, len(stmts), err)
		}
	}
	return tx.Commit()
}
