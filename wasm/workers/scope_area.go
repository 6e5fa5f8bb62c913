package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/wasm/workers/d1kv"
)

// The hold-back keeps its holding area in the inner store's _local
// documents. Every request runs its own hold-back, and two requests (two
// isolates) may hold or release at the same moment: d1kv's store is a
// store.LocalUpdater (one D1 transaction, serialisable across isolates,
// per update), so the hold-back changes the area only by atomic deltas
// and neither loses what the other held (engine/holdback/area.go).
//
// What the scope adds is a cheaper read of several _local documents at
// once (store.LocalsReader), which the hold-back uses as it opens (its
// index, its purgatory state, then every holding document the index
// lists): d1kv's reads start with a query for the database's counters,
// so a read of n documents costs 1 + ⌈n/98⌉ queries there and ⌈n/98⌉
// here, the rows being read straight from d1kv's table.

// areaDatabases are a scope's d1kv databases, each store able to read
// several _local documents in one query.
type areaDatabases struct {
	dbs *d1kv.Databases
	x   d1kv.Exec
}

var _ couchapi.Databases = areaDatabases{}

func (a areaDatabases) Open(ctx context.Context, name string) (store.Store, error) {
	st, err := a.dbs.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	u, ok := st.(store.LocalUpdater)
	if !ok {
		return nil, fmt.Errorf("workers: the store of %q (%T) cannot update _local documents atomically", name, st)
	}
	return &areaStore{Store: st, LocalUpdater: u, x: a.x, db: name}, nil
}

func (a areaDatabases) Create(ctx context.Context, name string) error { return a.dbs.Create(ctx, name) }
func (a areaDatabases) Delete(ctx context.Context, name string) error { return a.dbs.Delete(ctx, name) }
func (a areaDatabases) List(ctx context.Context) ([]string, error)    { return a.dbs.List(ctx) }

// Close closes the d1kv databases (couchapi.HeldDatabases closes its
// inner Databases when it is an io.Closer).
func (a areaDatabases) Close() error { return a.dbs.Close() }

// areaStore is one database's d1kv store, as the hold-back sees it.
type areaStore struct {
	store.Store
	store.LocalUpdater
	x  d1kv.Exec
	db string
}

var (
	_ store.LocalUpdater = (*areaStore)(nil)
	_ store.LocalsReader = (*areaStore)(nil)
)

// GetLocals reads _local documents of the database straight from d1kv's
// rows (d1kv.ReadLocals), one query per 98.
func (s *areaStore) GetLocals(ctx context.Context, ids []string) (map[string]json.RawMessage, error) {
	return d1kv.ReadLocals(ctx, s.x, s.db, ids)
}
