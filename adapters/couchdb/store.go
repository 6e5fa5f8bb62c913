package couchdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// StoreOptions configures OpenStore.
type StoreOptions struct {
	// Name is reported by Info ("" → the database name).
	Name string
}

// Store is a store.Store over one CouchDB database: documents, revision
// trees, conflicts, _local documents and the changes feed are the
// server's own, and the Store keeps nothing of them itself (no cache
// that could go stale when other processes write the same database).
// Seqs are the server's opaque strings. It is also a store.LocalUpdater
// (compare-and-swap on the _local document's _rev) and a
// store.LocalsReader.
//
// What differs from the Stores store.Open builds, because CouchDB decides:
//
//   - History: the server keeps the body of every revision until the
//     database is compacted (store.KeepAllBodies, whatever one would ask);
//     its _revs_limit (1000 unless set) stems the trees.
//   - Atomicity: each document's write is atomic, a batch is not: a
//     BulkDocs, PutBatch or PutChunks whose request fails in transit may
//     have written some of its documents (CouchDB has no multi-document
//     transaction). The error is then store.ErrUnavailable and a retry
//     converges, since revisions are idempotent.
//   - Revisions of local edits are the server's (CouchDB hashes the body
//     and its parent); new chunks still get the plug-in's ChunkRev.
//
// Errors: a server that cannot be reached (connection refused or reset,
// a timeout, 502/503/504 from a proxy) wraps store.ErrUnavailable; 409
// wraps store.ErrConflict; 400 wraps store.ErrInvalid; 404 wraps
// engine.ErrNotFound. Ids, _local ids and revisions over the store's
// limits are refused before anything is sent.
type Store struct {
	db   *DB
	name string

	base   context.Context // cancelled by Close: wakes calls in flight
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup

	vendorMu sync.Mutex
	vendor   string // "couchdb" when the server is Apache CouchDB, "other", "" unknown
}

var (
	_ store.Store        = (*Store)(nil)
	_ store.LocalUpdater = (*Store)(nil)
	_ store.LocalsReader = (*Store)(nil)
)

// OpenStore returns a Store over the database cfg names. It does not
// contact the server, and does not create the database (DB().Create
// does).
func OpenStore(cfg Config, opts StoreOptions) (*Store, error) {
	db, err := New(cfg)
	if err != nil {
		return nil, err
	}
	name := opts.Name
	if name == "" {
		name = cfg.Database
	}
	base, cancel := context.WithCancel(context.Background())
	return &Store{db: db, name: name, base: base, cancel: cancel}, nil
}

// DB returns the database the Store reads and writes.
func (s *Store) DB() *DB { return s.db }

// Close wakes waiting Changes calls (they return store.ErrClosed), waits
// for calls in flight and releases the client. It is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.calls.Wait()
	return s.db.Close()
}

// begin starts a call: ctx.Err() if ctx is done, ErrClosed after Close.
// The returned context also ends at Close; end must be called.
func (s *Store) begin(ctx context.Context) (context.Context, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, store.ErrClosed
	}
	s.calls.Add(1)
	s.mu.Unlock()
	c, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.base, cancel)
	return c, func() { stop(); cancel(); s.calls.Done() }, nil
}

// fail maps an error of a call made with ctx (the caller's) to the
// Store's errors.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if s.base.Err() != nil {
		return store.ErrClosed
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// A timeout of the transport (the HTTP client's), not the caller's.
		return fmt.Errorf("couchdb store: %s: %w: %w", op, store.ErrUnavailable, err)
	}
	status := httpStatus(err)
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Stage == engine.StageTransport {
		switch status {
		case 0, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return fmt.Errorf("couchdb store: %s: %w: %w", op, store.ErrUnavailable, err)
		}
	}
	switch status {
	case http.StatusConflict:
		return fmt.Errorf("couchdb store: %s: %w: %w", op, store.ErrConflict, err)
	case http.StatusBadRequest:
		return fmt.Errorf("couchdb store: %s: %w: %w", op, store.ErrInvalid, err)
	}
	return err
}

// call runs fn as one Store call.
func (s *Store) call(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	c, end, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	return s.fail(ctx, op, fn(c))
}

// Info reads the database's update sequence and document count.
func (s *Store) Info(ctx context.Context) (engine.EndpointInfo, error) {
	var info engine.EndpointInfo
	err := s.call(ctx, "info", func(c context.Context) error {
		var err error
		info, err = s.db.Info(c)
		return err
	})
	info.Name = s.name
	return info, err
}

// RevsDiff asks the server which revisions it lacks.
func (s *Store) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	var out map[string][]string
	err := s.call(ctx, "revs diff", func(c context.Context) error {
		var err error
		out, err = s.db.RevsDiff(c, revs)
		return err
	})
	return out, err
}

// BulkGet reads exactly the named revisions (no latest=true: an earlier
// revision whose body the server keeps is served), with _revisions, in
// request order; a revision the server lacks is left out.
func (s *Store) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	var out []json.RawMessage
	err := s.call(ctx, "bulk get", func(c context.Context) error {
		var err error
		out, err = s.db.bulkGet(c, revs, false)
		return err
	})
	return out, err
}

// dbStatus reads the database's information document.
func (s *Store) dbStatus(c context.Context) (dbInfo, error) {
	var info dbInfo
	err := s.db.do(c, "database info", "", http.MethodGet, s.db.dbURL("", nil), nil, &info)
	return info, err
}

type dbInfo struct {
	CompactRunning bool `json:"compact_running"`
}

// Exists reports whether the database exists on the server.
func (s *Store) Exists(ctx context.Context) (bool, error) {
	var ok bool
	err := s.call(ctx, "check database", func(c context.Context) error {
		var err error
		ok, err = s.db.Exists(c)
		return err
	})
	return ok, err
}

// Create creates the database on the server; created is false when it
// was there already.
func (s *Store) Create(ctx context.Context) (created bool, err error) {
	err = s.call(ctx, "create database", func(c context.Context) error {
		err := s.db.do(c, "create database", "", http.MethodPut, s.db.dbURL("", nil), struct{}{}, nil)
		if httpStatus(err) == http.StatusPreconditionFailed {
			return nil
		}
		created = err == nil
		return err
	})
	return created, err
}

// ServerUUID returns the uuid the server gives in GET / (CouchDB 2+ and
// express-pouchdb answer one); "" when it gives none.
func (s *Store) ServerUUID(ctx context.Context) (string, error) {
	var uuid string
	err := s.call(ctx, "server info", func(c context.Context) error {
		var root struct {
			UUID any `json:"uuid"`
		}
		if err := s.db.do(c, "server info", "", http.MethodGet, s.db.base.String()+"/", nil, &root); err != nil {
			return err
		}
		if u, ok := root.UUID.(string); ok {
			uuid = u
		}
		return nil
	})
	return uuid, err
}
