package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine"
)

// couchDB is a [[databases]] table named v with a CouchDB store whose
// table ends with extra.
func couchDB(name, extra string) string {
	return "[[databases]]\nname = \"" + name + "\"\n[databases.store]\nkind = \"couchdb\"\nurl = \"http://couch:5984\"\n" + extra + "\n"
}

func TestStoreConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"kind", "[[databases]]\nname = \"v\"\n[databases.store]\nkind = \"postgres\"", `kind "postgres": want "bbolt"`},
		{"bbolt with url", "[[databases]]\nname = \"v\"\n[databases.store]\nurl = \"http://h:1\"", "url is a key of couchdb stores"},
		{"bbolt with lease", "[[databases]]\nname = \"v\"\n[databases.store]\nkind = \"bbolt\"\nlease_ttl = \"5s\"", "lease_ttl is a key of couchdb stores"},
		{"no url", "[[databases]]\nname = \"v\"\n[databases.store]\nkind = \"couchdb\"", "a couchdb store needs url"},
		{"url scheme", "[[databases]]\nname = \"v\"\n[databases.store]\nkind = \"couchdb\"\nurl = \"couch:5984\"", "http:// or https://"},
		{"url user", "[[databases]]\nname = \"v\"\n[databases.store]\nkind = \"couchdb\"\nurl = \"http://u:p@couch:5984\"", "no user or password in the URL"},
		{"url query", "[[databases]]\nname = \"v\"\n[databases.store]\nkind = \"couchdb\"\nurl = \"http://couch:5984/?x=1\"", "no query or fragment"},
		{"database name", couchDB("v", "database = \"Vault\""), `database "Vault" is not a valid CouchDB database name`},
		{"database in url", "[[databases]]\nname = \"v\"\n[databases.store]\nkind = \"couchdb\"\nurl = \"http://couch:5984/Bad\"", `database "Bad"`},
		{"two passwords", couchDB("v", "user = \"u\"\npassword_env = \"E\"\npassword_file = \"f\""), "give password_file or password_env, not both"},
		{"password without user", couchDB("v", "password_env = \"E\""), "a password needs a user"},
		{"user without password", couchDB("v", "user = \"u\""), `user "u" needs a password`},
		{"lease short", couchDB("v", "lease_ttl = \"500ms\""), "lease_ttl 500ms: give at least 1s"},
		{"lease negative", couchDB("v", "lease_ttl = \"-1s\""), "lease_ttl -1s"},
		{"refresh short", couchDB("v", "refresh = \"10ms\""), "refresh 10ms: give at least 100ms"},
		{"unknown key", couchDB("v", "lease = \"5s\""), "databases.store.lease"},
		{"p2p group", couchDB("v", "") + "[[databases.p2p]]\ngroup = \"g\"\npassphrase_env = \"P\"", "cannot have [[databases.p2p]] groups"},
		{"same couch database", couchDB("a", "database = \"x\"") + couchDB("b", "database = \"x\""), `"a" and "b" are both kept in the CouchDB database http://couch:5984/x`},
		{"same by default name", couchDB("a", "") + couchDB("b", "database = \"a\""), "both kept in the CouchDB database"},
		{"upstream is the store", couchDB("v", "") + "[[databases.upstreams]]\nname = \"u\"\nkind = \"couchdb\"\nurl = \"http://couch:5984/\"\ndatabase = \"v\"",
			"is the database's own store"},
		{"compaction", couchDB("v", "") + "[compaction]\nkeep_revision_bodies = 3", "compaction.keep_revision_bodies applies to bbolt stores"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig(tc.text, "test.toml")
			if err == nil {
				err = c.validate()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// The server and database a store's url and database name.
func TestStoreCouchTarget(t *testing.T) {
	for _, tc := range []struct{ url, database, server, db string }{
		{"http://couch:5984", "", "http://couch:5984", "v"},
		{"http://couch:5984/", "", "http://couch:5984", "v"},
		{"http://couch:5984", "other", "http://couch:5984", "other"},
		{"http://couch:5984/notes", "", "http://couch:5984", "notes"},
		{"http://couch:5984/notes/", "notes", "http://couch:5984", "notes"},
		{"https://host/couchdb", "notes", "https://host/couchdb", "notes"},
		{"https://host/couchdb/notes", "", "https://host/couchdb", "notes"},
	} {
		server, db, err := storeConfig{Kind: storeCouch, URL: tc.url, Database: tc.database}.couchTarget("v")
		if err != nil || server != tc.server || db != tc.db {
			t.Errorf("url %q database %q: %q %q %v, want %q %q", tc.url, tc.database, server, db, err, tc.server, tc.db)
		}
	}
}

func TestStoreConfigResolves(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "couch.password")
	if err := os.WriteFile(pwFile, []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	text := couchDB("a", "user = \"admin\"\npassword_env = \"COUCH_PW\"\nlease_ttl = \"3s\"\nrefresh = \"250ms\"") +
		couchDB("b", "database = \"bee\"\nuser = \"admin\"\npassword_file = \"couch.password\"")
	c, err := parseConfig(text, filepath.Join(dir, "relay.toml"))
	if err == nil {
		err = c.validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := resolve(c, flagValues{}, envOf(map[string]string{"COUCH_PW": "env-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	a, b := s.stores["a"], s.stores["b"]
	if a.couch.URL != "http://couch:5984" || a.couch.Database != "a" || a.couch.User != "admin" || a.couch.Password != "env-secret" ||
		a.leaseTTL != 3*time.Second || a.refresh != 250*time.Millisecond {
		t.Errorf("store a %+v", a)
	}
	if b.couch.Database != "bee" || b.couch.Password != "file-secret" || b.leaseTTL != 0 || b.refresh != 0 || b.location() != "http://couch:5984/bee" {
		t.Errorf("store b %+v", b)
	}
	if !s.noDataDir() {
		t.Error("every database is on CouchDB, yet the relay would open a data folder")
	}

	// A password variable that is unset is named, its value never.
	_, err = resolve(c, flagValues{}, envOf(nil))
	if err == nil || !strings.Contains(err.Error(), "COUCH_PW") || !errors.As(err, new(usageError)) {
		t.Errorf("unset password variable: %v", err)
	}

	// One bbolt database among them: a data folder again.
	c2, err := parseConfig(text+"[[databases]]\nname = \"local\"\n", filepath.Join(dir, "relay.toml"))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := resolve(c2, flagValues{}, envOf(map[string]string{"COUCH_PW": "x"}))
	if err != nil || s2.noDataDir() {
		t.Errorf("mixed stores: %v, noDataDir %v", err, s2 != nil && s2.noDataDir())
	}
	if s3, _ := resolve(&fileConfig{}, flagValues{}, envOf(nil)); s3.noDataDir() {
		t.Error("no configuration: the relay must keep its default database in the data folder")
	}
}

// memCouch is a couchServer over memory databases, for the router.
type memCouch struct {
	*couchapi.MemoryDatabases
	uuid string
}

func (m *memCouch) ServerUUID(context.Context) (string, error) { return m.uuid, nil }
func (m *memCouch) Close() error                               { return nil }

// Without a data folder only the configured names exist: creating
// another is refused with a reason that says how to serve it.
func TestRoutedDatabasesWithoutDataFolder(t *testing.T) {
	ctx := context.Background()
	srv := &memCouch{MemoryDatabases: couchapi.NewMemoryDatabases(), uuid: "u"}
	r := &routedDatabases{couch: map[string]couchServer{"notes": srv, "team": srv}, servers: []couchServer{srv}}
	for _, n := range []string{"notes", "team"} {
		if err := r.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	err := r.Create(ctx, "other")
	if !errors.Is(err, couchapi.ErrForbidden) || !strings.Contains(err.Error(), "serves only the databases of its configuration (notes, team)") {
		t.Errorf("creating an unconfigured database: %v", err)
	}
	if _, err := r.Open(ctx, "other"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("opening an unconfigured database: %v", err)
	}
	if err := r.Delete(ctx, "other"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("deleting an unconfigured database: %v", err)
	}
	if names, err := r.List(ctx); err != nil || !slices.Equal(names, []string{"notes", "team"}) {
		t.Errorf("List %v %v", names, err)
	}
	if err := r.Close(); err != nil {
		t.Error(err)
	}
}

// --check-config reads the configuration and its secrets and stops; a
// relay without a data folder and without an admin is refused there
// already.
func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "relay.toml")
	if err := os.WriteFile(cfg, []byte(couchDB("vault", "user = \"admin\"\npassword_env = \"COUCH_PW\"")), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code := run(context.Background(), []string{"--check-config", "--config", cfg}, envOf(map[string]string{"COUCH_PW": "x"}), &out, nil)
	if code != exitUsage || !strings.Contains(out.String(), "[[users]]") || !strings.Contains(out.String(), envAdminPassword) {
		t.Errorf("no admin: exit %d, %s", code, out.String())
	}
	out.Reset()
	code = run(context.Background(), []string{"--check-config", "--config", cfg},
		envOf(map[string]string{"COUCH_PW": "x", envAdminPassword: "y"}), &out, nil)
	if code != exitOK || !strings.Contains(out.String(), "configuration OK") || !strings.Contains(out.String(), "no data folder") {
		t.Errorf("exit %d, %s", code, out.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("--check-config wrote files: %v", entries)
	}
}
