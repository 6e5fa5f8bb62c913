package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi/boltdir"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi/couchdir"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

// The waits between attempts to reach a CouchDB server at start: the
// first, doubled after each failure up to the last.
const (
	couchRetryFirst = time.Second
	couchRetryMax   = 30 * time.Second
)

// openCouchServer opens the databases of one CouchDB server (a variable
// so that a test can count the servers opened).
var openCouchServer = func(ctx context.Context, cfg couchdir.Config) (couchServer, error) {
	d, err := couchdir.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// openStores opens where the databases are kept: the data folder's bbolt
// files (unless every database is on CouchDB) and one couchdir per
// CouchDB server (databases with the same URL and credentials share it).
// Without a data folder, the server uuid is the first database's CouchDB
// server's, so that every relay in front of it has the same one.
func (r *relay) openStores(ctx context.Context, cleanup *[]func()) (*routedDatabases, error) {
	s := r.s
	dir := &routedDatabases{couch: map[string]couchServer{}}
	*cleanup = append(*cleanup, func() { dir.Close() })
	if !s.noDataDir() {
		bolt, err := boltdir.Open(s.dataDir, boltstore.Options{Options: couchapi.StoreOptions(s.keepBodies), Timeout: dbLockTimeout, Migrated: r.logMigration})
		if err != nil {
			return nil, err
		}
		dir.bolt = bolt
	}
	type serverKey struct{ url, user, password string }
	byServer := map[serverKey]*couchdir.Config{}
	var order []serverKey
	for _, name := range s.databases {
		st, ok := s.stores[name]
		if !ok {
			continue
		}
		k := serverKey{st.couch.URL, st.couch.User, st.couch.Password}
		if byServer[k] == nil {
			srv := st.couch
			srv.Database = ""
			byServer[k] = &couchdir.Config{Server: srv, Names: map[string]string{}, Log: r.log.With("component", "couchdb", "server", st.couch.URL)}
			order = append(order, k)
		}
		byServer[k].Names[name] = st.couch.Database
	}
	for _, k := range order {
		cfg := *byServer[k]
		var srv couchServer
		err := r.untilReachable(ctx, "", "connecting to the CouchDB server "+k.url, func(ctx context.Context) (err error) {
			srv, err = openCouchServer(ctx, cfg)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("CouchDB server %s: %w", k.url, explainCouchErr(err, k.user))
		}
		dir.servers = append(dir.servers, srv)
		for name := range cfg.Names {
			dir.couch[name] = srv
		}
	}
	if s.noDataDir() {
		first := dir.couch[s.databases[0]]
		url := s.stores[s.databases[0]].couch.URL
		err := r.untilReachable(ctx, "", "reading the uuid of the CouchDB server "+url, func(ctx context.Context) (err error) {
			r.uuid, err = first.ServerUUID(ctx)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("CouchDB server %s: reading its uuid: %w", url, explainCouchErr(err, s.stores[s.databases[0]].couch.User))
		}
	}
	return dir, nil
}

// explainCouchErr adds what to check to a CouchDB server's refusal.
func explainCouchErr(err error, user string) error {
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Stage == engine.StageAuth {
		return fmt.Errorf("%w (check user %q and its password in [databases.store], password_file or password_env; the user needs the rights "+
			"to read the server's root and to create the database if it is missing)", err, user)
	}
	return err
}

// untilReachable runs step until it succeeds or fails with anything but
// an unreachable server: while the server cannot be reached (refused,
// reset, timed out, a 5xx answer, a name not resolved yet) it
// logs and retries, waiting couchRetryFirst and doubling up to
// couchRetryMax, until ctx ends. So a relay started before its CouchDB
// (a compose file, a cluster still forming) serves once CouchDB answers;
// wrong credentials or a refused database stop it at once. step runs
// with a context that ctx does not cancel: what it opens may keep it.
func (r *relay) untilReachable(ctx context.Context, db, what string, step func(context.Context) error) error {
	delay := couchRetryFirst
	for attempt := 1; ; attempt++ {
		err := step(context.WithoutCancel(ctx))
		if err == nil || !unreachable(err) {
			return err
		}
		r.log.Warn("CouchDB cannot be reached; retrying before the relay serves", "step", what, "db", db,
			"attempt", attempt, "retry_in", delay.String(), "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: CouchDB cannot be reached (%w); stopped waiting: %w", what, err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, couchRetryMax)
	}
}

// unreachable reports an error that says the server could not be
// reached, rather than that it answered no.
func unreachable(err error) bool {
	var ne net.Error
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.As(err, &dns), errors.As(err, &op):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	}
	// The CouchDB adapter's transport stage: no answer, or a 5xx, 408 or
	// 429 (a cluster still forming answers some of these).
	var ee *engine.Error
	return errors.As(err, &ee) && ee.Stage == engine.StageTransport
}

// location is where a database is kept, without credentials: its CouchDB
// database's URL or its bbolt file.
func (h *heldDatabases) location(name string) string {
	if st, ok := h.stores[name]; ok {
		return st.location()
	}
	if h.dir.bolt != nil {
		return h.dir.bolt.Path(name)
	}
	return ""
}
