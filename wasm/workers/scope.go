package main

import (
	"context"
	"errors"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/wasm/workers/d1kv"
)

// scope is what one request opened: its databases, read from D1 when
// the request first names them and closed when it ends.
type scope struct {
	dbs *d1kv.Databases
}

// newScope opens nothing yet: a request that names no database costs no
// D1 query.
func (a *app) newScope() *scope {
	dbs, err := d1kv.NewDatabases(a.x, couchapi.StoreOptions(0))
	if err != nil {
		panic(err) // StoreOptions(0) is valid
	}
	return &scope{dbs: dbs}
}

// close closes every database the request opened.
func (sc *scope) close(ctx context.Context) error {
	return sc.dbs.Close()
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
	return sc.dbs.Open(ctx, name)
}

func (requestDatabases) Create(ctx context.Context, name string) error {
	sc, err := scopeFrom(ctx)
	if err != nil {
		return err
	}
	return sc.dbs.Create(ctx, name)
}

func (requestDatabases) Delete(ctx context.Context, name string) error {
	sc, err := scopeFrom(ctx)
	if err != nil {
		return err
	}
	return sc.dbs.Delete(ctx, name)
}

func (requestDatabases) List(ctx context.Context) ([]string, error) {
	sc, err := scopeFrom(ctx)
	if err != nil {
		return nil, err
	}
	return sc.dbs.List(ctx)
}
