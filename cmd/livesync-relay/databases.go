package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi/boltdir"
	"github.com/livesync-go/livesync-go/engine"
	ebridge "github.com/livesync-go/livesync-go/engine/bridge"
	"github.com/livesync-go/livesync-go/engine/holdback"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/store"
)

// heldDatabases are the relay's databases (routedDatabases: bbolt files
// in the data folder and databases on CouchDB servers), each served
// through a hold-back and bridged to its upstreams, if it has some
// (couchapi.HeldDatabases). The relay's own paths (reservedNames) are no
// database.
type heldDatabases struct {
	*couchapi.HeldDatabases
	dir    *routedDatabases
	stores map[string]couchStoreSpec
	// tally keeps the hunt's counters across the bridges a database had
	// (a shared database's bridge is rebuilt whenever this relay becomes
	// its leader).
	tally *bridgeTally
}

// heldSetup is what newHeldDatabases needs besides the databases.
type heldSetup struct {
	holdback    holdback.Config
	passphrases map[string]string // secret: never logged
	uuid        string            // the relay's server uuid (replication ids)
	upstreams   map[string][]upstreamSpec
	hunt        hunt.Config
	stores      map[string]couchStoreSpec // the databases shared with other relays
	holder      string                    // this relay's name in the hunt's lease
}

// newHeldDatabases serves the databases of dir.
func newHeldDatabases(dir *routedDatabases, hs heldSetup, log *slog.Logger) *heldDatabases {
	tally := newBridgeTally()
	bridgeOf := func(name string, local ebridge.Local, log *slog.Logger) (*ebridge.Bridge, error) {
		specs, ok := hs.upstreams[name]
		if !ok {
			return nil, nil
		}
		b, err := newBridge(name, local, bridgeSetup{uuid: hs.uuid, specs: specs, hunt: hs.hunt}, log)
		if err == nil {
			tally.built(name, b)
		}
		return b, err
	}
	shared := func(name string) *couchapi.SharedConfig {
		st, ok := hs.stores[name]
		if !ok {
			return nil
		}
		return &couchapi.SharedConfig{LeaseTTL: st.leaseTTL, Refresh: st.refresh, Holder: hs.holder}
	}
	held := couchapi.NewHeld(dir, couchapi.HeldConfig{Holdback: hs.holdback, Passphrases: hs.passphrases, Reserved: reservedNames,
		Bridge: bridgeOf, Shared: shared, Log: log})
	return &heldDatabases{HeldDatabases: held, dir: dir, stores: hs.stores, tally: tally}
}

// fileSize is the size of a database's bbolt file; false for a database
// kept on CouchDB.
func (h *heldDatabases) fileSize(name string) (int64, bool) {
	if h.dir.bolt == nil || h.dir.onCouch(name) {
		return 0, false
	}
	p := h.dir.bolt.Path(name)
	if p == "" {
		return 0, false
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0, false
	}
	return fi.Size(), true
}

// Delete removes a database. One kept on CouchDB is asked of its server
// first, which refuses (other relays may serve it), so that a refused
// delete leaves it open and served here; HeldDatabases.Delete would
// close its hold-back (and give up its lease) before asking.
func (h *heldDatabases) Delete(ctx context.Context, name string) error {
	if h.dir.onCouch(name) {
		if err := h.dir.Delete(ctx, name); err != nil {
			return err
		}
		if err := h.HeldDatabases.Delete(ctx, name); err != nil && !errors.Is(err, engine.ErrNotFound) {
			return err
		}
		return nil
	}
	return h.HeldDatabases.Delete(ctx, name)
}

// storeKind is "couchdb" or "bbolt": where the database is kept.
func (h *heldDatabases) storeKind(name string) string {
	if h.dir.onCouch(name) {
		return storeCouch
	}
	return storeBolt
}

// couchServer is the databases of one CouchDB server (couchdir).
type couchServer interface {
	couchapi.Databases
	ServerUUID(ctx context.Context) (string, error)
	Close() error
}

// routedDatabases sends each database to where it is kept: the names
// with a CouchDB store to their server's couchServer, every other name
// to the data folder's bbolt files. Without a data folder (every
// configured database is on CouchDB) only the configured names exist.
type routedDatabases struct {
	bolt    *boltdir.Databases     // nil: no data folder
	couch   map[string]couchServer // by served name
	servers []couchServer          // each once, in the configuration's order
}

var _ couchapi.Databases = (*routedDatabases)(nil)

func (r *routedDatabases) onCouch(name string) bool {
	_, ok := r.couch[name]
	return ok
}

// errNoLocalDatabases refuses a database the configuration does not name
// when the relay has no data folder.
func (r *routedDatabases) errNoLocalDatabases(name string) error {
	names := make([]string, 0, len(r.couch))
	for n := range r.couch {
		names = append(names, n)
	}
	slices.Sort(names)
	return fmt.Errorf("this relay keeps its databases on CouchDB and serves only the databases of its configuration (%s); "+
		"to serve %q, add a [[databases]] table for it with a [databases.store]: %w", strings.Join(names, ", "), name, couchapi.ErrForbidden)
}

// Open returns the named database's store.
func (r *routedDatabases) Open(ctx context.Context, name string) (store.Store, error) {
	if c, ok := r.couch[name]; ok {
		return c.Open(ctx, name)
	}
	if r.bolt == nil {
		return nil, fmt.Errorf("database %q: %w", name, engine.ErrNotFound)
	}
	return r.bolt.Open(ctx, name)
}

// Create makes an empty database where it is kept; without a data
// folder an unconfigured name is refused.
func (r *routedDatabases) Create(ctx context.Context, name string) error {
	if c, ok := r.couch[name]; ok {
		return c.Create(ctx, name)
	}
	if r.bolt == nil {
		if !couchapi.ValidDatabaseName(name) {
			return fmt.Errorf("%w: %q", couchapi.ErrIllegalName, name)
		}
		return r.errNoLocalDatabases(name)
	}
	return r.bolt.Create(ctx, name)
}

// Delete removes a bbolt database; a CouchDB server refuses (delete it
// there).
func (r *routedDatabases) Delete(ctx context.Context, name string) error {
	if c, ok := r.couch[name]; ok {
		return c.Delete(ctx, name)
	}
	if r.bolt == nil {
		return fmt.Errorf("database %q: %w", name, engine.ErrNotFound)
	}
	return r.bolt.Delete(ctx, name)
}

// List returns the configured CouchDB databases and the bbolt files'
// databases, sorted, each once.
func (r *routedDatabases) List(ctx context.Context) ([]string, error) {
	var names []string
	for n := range r.couch {
		names = append(names, n)
	}
	if r.bolt != nil {
		local, err := r.bolt.List(ctx)
		if err != nil {
			return nil, err
		}
		names = append(names, local...)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// Close closes the bbolt files and the CouchDB servers' clients.
func (r *routedDatabases) Close() error {
	var errs []error
	if r.bolt != nil {
		errs = append(errs, r.bolt.Close())
	}
	for _, s := range r.servers {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// lockHolder names this relay in the hunt's lease: host, process id and
// a random part (two relays in containers may share a host name and a
// pid).
func lockHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "relay"
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), strings.ToLower(rand.Text()[:8]))
}
