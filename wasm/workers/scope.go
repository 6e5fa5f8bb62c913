package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/wasm/workers/d1kv"
)

// scope is what one request opened: its databases, read from D1 when
// the request first names them and closed when it ends. Every database
// is served through a hold-back (holdback.Served), so that no client
// sees a note before its chunks: the held metadata and the purgatory's
// state live in the database's _local documents in D1, each request's
// hold-back resumes them when it opens the database and saves them when
// it ends. Nothing of a scope outlives its request, and nothing is
// shared between requests: another request, in this isolate or another,
// opens its own.
type scope struct {
	held *couchapi.HeldDatabases
	log  *slog.Logger
}

// newScope opens nothing yet: a request that names no database costs no
// D1 query.
func (a *app) newScope() *scope {
	dbs, err := d1kv.NewDatabases(a.x, couchapi.StoreOptions(0))
	if err != nil {
		panic(err) // StoreOptions(0) is valid
	}
	log := scopeLog()
	hc := a.s.hold
	hc.Log = log
	return &scope{held: couchapi.NewHeld(areaDatabases{dbs: dbs, x: a.x}, hc), log: log}
}

// scopeLog receives the hold-back's warnings (never a note's contents or
// a passphrase): the Worker's log (wrangler tail).
func scopeLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// close writes the releases still due, then closes every database the
// request opened: each hold-back saves its state into D1.
func (sc *scope) close(ctx context.Context) error {
	var errs []error
	for _, d := range sc.held.Opened() {
		if err := d.Settle(ctx); err != nil && !errors.Is(err, store.ErrClosed) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, sc.held.Close())
	err := errors.Join(errs...)
	if err != nil {
		sc.log.Warn("workers: closing the request's databases", "err", err)
	}
	return err
}

// open returns the named database as served to clients, its hold-back
// settled, so that what arrivals released is visible.
func (sc *scope) open(ctx context.Context, name string) (store.Store, error) {
	d, err := sc.held.OpenHeld(ctx, name)
	if err != nil {
		return nil, err
	}
	// Opening restored the held documents and rechecked their chunks:
	// the releases that made due are written before the request reads.
	if err := d.Settle(ctx); err != nil {
		return nil, err
	}
	return settling{d}, nil
}

type scopeKey struct{}

func withScope(ctx context.Context, sc *scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, sc)
}

var errNoScope = errors.New("workers: no request scope")

func scopeFrom(ctx context.Context) (*scope, error) {
	sc, _ := ctx.Value(scopeKey{}).(*scope)
	if sc == nil {
		return nil, errNoScope
	}
	return sc, nil
}

// requestDatabases are the databases of the request's scope (ctx).
type requestDatabases struct{}

var _ couchapi.Databases = requestDatabases{}

func (requestDatabases) Open(ctx context.Context, name string) (store.Store, error) {
	sc, err := scopeFrom(ctx)
	if err != nil {
		return nil, err
	}
	return sc.open(ctx, name)
}

func (requestDatabases) Create(ctx context.Context, name string) error {
	sc, err := scopeFrom(ctx)
	if err != nil {
		return err
	}
	return sc.held.Create(ctx, name)
}

func (requestDatabases) Delete(ctx context.Context, name string) error {
	sc, err := scopeFrom(ctx)
	if err != nil {
		return err
	}
	return sc.held.Delete(ctx, name)
}

func (requestDatabases) List(ctx context.Context) ([]string, error) {
	sc, err := scopeFrom(ctx)
	if err != nil {
		return nil, err
	}
	return sc.held.List(ctx)
}

// settling is a served database whose writes return once the releases
// they caused are written: a request's answer is the last moment its
// Go instance may run, so a note whose chunks a push completed is
// visible when the pusher's request returns. A failed Settle fails no
// write (it is stored); the request's end, or the next request's open,
// settles again.
type settling struct {
	*couchapi.HeldDatabase
}

var _ store.Store = settling{}

func (s settling) settle(ctx context.Context) {
	if err := s.Settle(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, store.ErrClosed) {
		if sc, _ := scopeFrom(ctx); sc != nil {
			sc.log.Warn("workers: settling the hold-back after a write", "db", s.Name, "err", err)
		}
	}
}

func (s settling) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	res, err := s.HeldDatabase.BulkDocs(ctx, docs)
	s.settle(ctx)
	return res, err
}

func (s settling) PutBatch(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	res, err := s.HeldDatabase.PutBatch(ctx, docs)
	s.settle(ctx)
	return res, err
}

func (s settling) Put(ctx context.Context, doc json.RawMessage) (string, error) {
	rev, err := s.HeldDatabase.Put(ctx, doc)
	s.settle(ctx)
	return rev, err
}

func (s settling) PutChunks(ctx context.Context, chunks []engine.Chunk) error {
	err := s.HeldDatabase.PutChunks(ctx, chunks)
	s.settle(ctx)
	return err
}
