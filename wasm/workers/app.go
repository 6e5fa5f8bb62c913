package main

import (
	"context"
	"net/http"

	"github.com/livesync-go/livesync-go/wasm/workers/d1kv"
)

// app is the Worker over one D1 database: the CouchDB endpoint
// (ServeHTTP) and the Cron Trigger's task (Scheduled). It keeps no
// state of its own between requests: every request opens what it needs
// from D1 in its own scope and closes it before it returns, so no
// goroutine or timer outlives a request, whether the runtime starts a Go
// instance per request or keeps one.
type app struct {
	s    settings
	cron cronSettings
	x    d1kv.Exec
	srv  http.Handler // the CouchDB protocol over requestDatabases
}

// newApp reads the Worker's settings from env and serves the databases
// kept in x.
func newApp(env getenv, x d1kv.Exec) (*app, error) {
	s, err := parseSettings(env)
	if err != nil {
		return nil, err
	}
	c, err := parseCron(env)
	if err != nil {
		return nil, err
	}
	a := &app{s: s, cron: c, x: x}
	if a.srv, err = newHandler(s, requestDatabases{}); err != nil {
		return nil, err
	}
	return a, nil
}

// ServeHTTP serves one request in a scope of its own (see scope).
func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sc := a.newScope()
	defer sc.close(context.WithoutCancel(r.Context()))
	a.srv.ServeHTTP(w, r.WithContext(withScope(r.Context(), sc)))
}
