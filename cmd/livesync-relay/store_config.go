package main

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
)

// Kinds of store of a database: where the relay keeps its replica.
const (
	storeBolt  = "bbolt"   // a bbolt file in the data folder (the default)
	storeCouch = "couchdb" // a database on a CouchDB server, shared by every relay in front of it
)

// Bounds of the coordination periods of a CouchDB store. A lease much
// shorter than a second would be lost to a slow request or to clock skew
// between relays; a refresh much faster than 100 ms reads the holding
// area's index from CouchDB for little gain.
const (
	minLeaseTTL = time.Second
	minRefresh  = 100 * time.Millisecond
)

// storeConfig is a [databases.store] table: where the database's replica
// lives. relay.example.toml documents each key.
type storeConfig struct {
	Kind string `toml:"kind"`
	// CouchDB: the server, the database on it and the credentials.
	URL          string `toml:"url"`
	Database     string `toml:"database"`
	User         string `toml:"user"`
	PasswordFile string `toml:"password_file"`
	PasswordEnv  string `toml:"password_env"`
	// LeaseTTL is how long the hunt's lease lasts unless renewed (0:
	// couchapi's default, 15 s); Refresh how often the relay reads the
	// holds other relays made (0: 2 s).
	LeaseTTL time.Duration `toml:"lease_ttl"`
	Refresh  time.Duration `toml:"refresh"`
}

// kind is the configured kind, bbolt when unset.
func (s storeConfig) kind() string {
	if s.Kind == "" {
		return storeBolt
	}
	return s.Kind
}

// couchTarget splits url and database into the server's URL and the
// database on it. With database given, url is the server (it may have a
// path prefix, a CouchDB behind a proxy's path), unless its last path
// segment repeats database. Without, a url with a path is a database's
// URL: its last segment names the database; a bare server URL serves
// the database under its own name (served).
func (s storeConfig) couchTarget(served string) (server, database string, err error) {
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", fmt.Errorf("url %q: want the CouchDB server's http:// or https:// URL, e.g. http://couchdb:5984", s.URL)
	}
	if u.User != nil {
		return "", "", fmt.Errorf("url: no user or password in the URL; use user and password_file or password_env")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", "", fmt.Errorf("url %q: no query or fragment: give the server's URL (and the database in database)", s.URL)
	}
	path := strings.Trim(u.Path, "/")
	last := path[strings.LastIndexByte(path, '/')+1:]
	if path == "" || (s.Database != "" && last != s.Database) {
		database = s.Database
		if database == "" {
			database = served
		}
		return strings.TrimSuffix(s.URL, "/"), database, nil
	}
	server, database, err = couchdb.SplitURL(s.URL)
	if err != nil {
		return "", "", err
	}
	return strings.TrimSuffix(server, "/"), database, nil
}

// validateStore checks database d's [databases.store] table; bad reports
// each problem.
func validateStore(d dbConfig, bad func(string, ...any)) {
	s := d.Store
	where := fmt.Sprintf("databases %q: store", d.Name)
	switch s.kind() {
	case storeBolt:
		for _, k := range []keySet{
			{"url", s.URL != ""}, {"database", s.Database != ""}, {"user", s.User != ""},
			{"password_file", s.PasswordFile != ""}, {"password_env", s.PasswordEnv != ""},
			{"lease_ttl", s.LeaseTTL != 0}, {"refresh", s.Refresh != 0},
		} {
			if k.set {
				bad("%s: %s is a key of couchdb stores (kind = \"couchdb\"); a bbolt store is a file in data_dir", where, k.key)
			}
		}
		return
	case storeCouch:
	default:
		bad("%s: kind %q: want \"bbolt\" (a file in data_dir, the default) or \"couchdb\" (a database on a CouchDB server)", where, s.Kind)
		return
	}
	if s.URL == "" {
		bad("%s: a couchdb store needs url, the CouchDB server's URL (e.g. http://couchdb:5984)", where)
	} else if _, db, err := s.couchTarget(d.Name); err != nil {
		bad("%s: %v", where, err)
	} else if !couchapi.ValidDatabaseName(db) {
		bad("%s: database %q is not a valid CouchDB database name (^[a-z][a-z0-9_$()+-]*$)", where, db)
	}
	if s.PasswordFile != "" && s.PasswordEnv != "" {
		bad("%s: give password_file or password_env, not both", where)
	}
	if (s.PasswordFile != "" || s.PasswordEnv != "") && s.User == "" {
		bad("%s: a password needs a user", where)
	}
	if s.User != "" && s.PasswordFile == "" && s.PasswordEnv == "" {
		bad("%s: user %q needs a password: give password_file or password_env", where, s.User)
	}
	if s.LeaseTTL < 0 || (s.LeaseTTL > 0 && s.LeaseTTL < minLeaseTTL) {
		bad("%s: lease_ttl %s: give at least %s (absent: 15s); it must be much longer than the clock skew between relays", where, s.LeaseTTL, minLeaseTTL)
	}
	if s.Refresh < 0 || (s.Refresh > 0 && s.Refresh < minRefresh) {
		bad("%s: refresh %s: give at least %s (absent: 2s)", where, s.Refresh, minRefresh)
	}
	if len(d.P2P) > 0 {
		bad("%s: a database kept on CouchDB cannot have [[databases.p2p]] groups: a group's peer book and the relay's "+
			"libp2p identity are files the relay writes in data_dir, and every relay in front of the database would "+
			"be a separate peer with its own approvals; join the group from a relay with a bbolt store (a "+
			"[[databases.upstreams]] of it can be this CouchDB database), or use [[databases.livesync_p2p]], which "+
			"needs no local file", where)
	}
}

// validateStores checks what spans databases: two databases kept in one
// CouchDB database, a store that is also an upstream of its database,
// and [compaction], which only bbolt stores apply.
func (c *fileConfig) validateStores(bad func(string, ...any)) {
	used := map[string]string{}
	bolt := !c.dbsDefined
	for _, d := range c.Databases {
		if d.Store.kind() != storeCouch {
			bolt = true
			continue
		}
		server, db, err := d.Store.couchTarget(d.Name)
		if err != nil {
			continue // validateStore said why
		}
		key := server + "/" + db
		if other, ok := used[key]; ok {
			bad("databases %q and %q are both kept in the CouchDB database %s: give each its own database", other, d.Name, key)
		}
		used[key] = d.Name
		for _, u := range d.Upstreams {
			if u.Kind == kindCouchDB && strings.TrimSuffix(u.URL, "/") == server && u.Database == db {
				bad("databases %q: upstream %q is the database's own store (%s): a database cannot replicate with itself", d.Name, u.Name, key)
			}
		}
	}
	if !bolt && c.Compaction.KeepRevisionBodies != 0 {
		bad("compaction.keep_revision_bodies applies to bbolt stores, and every database is kept on CouchDB: compact there (POST /{db}/_compact on the CouchDB server)")
	}
}

// couchStoreSpec is a database's CouchDB store with its password read:
// what the relay connects with. The password is never logged or shown.
type couchStoreSpec struct {
	couch    couchdb.Config // URL is the server, Database the database on it
	leaseTTL time.Duration
	refresh  time.Duration
}

// location is the store's database URL without credentials, for /status
// and logs.
func (s couchStoreSpec) location() string { return s.couch.URL + "/" + s.couch.Database }

// resolveStore reads the password of database d's CouchDB store; ok is
// false for a bbolt store.
func resolveStore(fc *fileConfig, d dbConfig, getenv func(string) string) (spec couchStoreSpec, ok bool, err error) {
	s := d.Store
	if s.kind() != storeCouch {
		return couchStoreSpec{}, false, nil
	}
	fail := func(err error) error { return usageError{fmt.Sprintf("database %q: store: %v", d.Name, err)} }
	server, db, err := s.couchTarget(d.Name)
	if err != nil {
		return couchStoreSpec{}, false, fail(err)
	}
	spec = couchStoreSpec{couch: couchdb.Config{URL: server, Database: db, User: s.User}, leaseTTL: s.LeaseTTL, refresh: s.Refresh}
	if s.PasswordFile != "" || s.PasswordEnv != "" {
		pw, err := secretFrom(fc.resolvePath(s.PasswordFile), s.PasswordEnv, getenv, "password")
		if err != nil {
			return couchStoreSpec{}, false, fail(err)
		}
		spec.couch.Password = pw
	}
	if err := spec.couch.Validate(); err != nil {
		return couchStoreSpec{}, false, fail(err)
	}
	return spec, true, nil
}
