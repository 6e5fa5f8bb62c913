package main

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine/holdback"
	"github.com/livesync-go/livesync-go/engine/hunt"
)

// envConfig names the configuration file when --config is not given.
const envConfig = "LIVESYNC_RELAY_CONFIG"

// flagValues are the command line's flags; empty strings are "not given".
type flagValues struct {
	config      string
	listen      string
	dataDir     string
	logFormat   string
	logLevel    string
	resetAdmin  bool
	checkConfig bool
	// tlsSelfSigned is --tls-self-signed ([tls] self_signed = true).
	tlsSelfSigned bool
}

// settings are the relay's effective settings: flags over the
// configuration file over the defaults, with secrets read and passwords
// hashed. Nothing here is ever logged whole.
type settings struct {
	configPath       string
	listen           string
	tlsCert, tlsKey  string
	tls              tlsSettings // ACME or self-signed (tls_config.go)
	dataDir          string
	cors             []string
	maxRequestBytes  int64
	maxDocumentBytes int64
	wwwAuthenticate  string
	compression      bool
	metricsPublic    bool
	shutdownTimeout  time.Duration
	headerTimeout    time.Duration // 0: defaultHeaderTimeout
	bodyTimeout      time.Duration // 0: couchapi.DefaultBodyTimeout
	login            couchapi.LoginLimits
	logFormat        string
	logLevel         slog.Level
	// users are the configuration's accounts, passwords hashed.
	users []couchapi.User
	// configAdmins: the configuration lists an admin user, so there is
	// no built-in admin.
	configAdmins bool
	// databases are created at start when missing.
	databases []string
	// stores are the databases kept on a CouchDB server, by name (the
	// others are bbolt files in dataDir); passwords read.
	stores map[string]couchStoreSpec
	// passphrases by database (secret).
	passphrases map[string]string
	// upstreams by database (secrets read: never logged).
	upstreams  map[string][]upstreamSpec
	huntConfig hunt.Config
	holdback   holdback.Config
	// keepBodies is [compaction] keep_revision_bodies (0: all until
	// _compact).
	keepBodies int
	resetAdmin bool
	// p2p are the peer-to-peer groups and the Nostr relay (secrets
	// read).
	p2p p2pSettings
}

func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "", "info":
		return slog.LevelInfo, nil
	case "debug":
		return slog.LevelDebug, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%q: want debug, info, warn or error", s)
}

// resolve combines the flags, the configuration file (fc; an empty one
// when there is none) and the defaults, and reads the secrets the file
// names. Errors are usage errors: the command line or the configuration
// is wrong.
func resolve(fc *fileConfig, fl flagValues, getenv func(string) string) (*settings, error) {
	s := &settings{
		configPath: fc.path, listen: fc.Listen, tlsCert: fc.resolvePath(fc.TLS.CertFile), tlsKey: fc.resolvePath(fc.TLS.KeyFile),
		cors: defaultCORSOrigins, maxRequestBytes: fc.MaxRequestBytes, maxDocumentBytes: fc.MaxDocumentBytes,
		metricsPublic: fc.MetricsPublic, shutdownTimeout: fc.ShutdownTimeout, logFormat: fc.Log.Format,
		holdback: fc.holdbackConfig(), passphrases: map[string]string{}, resetAdmin: fl.resetAdmin,
		upstreams: map[string][]upstreamSpec{}, huntConfig: fc.Hunt.config(), stores: map[string]couchStoreSpec{},
		keepBodies: fc.Compaction.KeepRevisionBodies,
	}
	if fc.corsSet {
		s.cors = fc.CORSOrigins
	}
	if s.maxRequestBytes == 0 {
		s.maxRequestBytes = defaultMaxRequestBytes
	}
	s.wwwAuthenticate = defaultWWWAuthenticate
	s.compression = fc.Compression
	if fc.wwwAuthSet {
		s.wwwAuthenticate = fc.WWWAuthenticate
	}
	if s.listen == "" {
		s.listen = defaultListen
	}
	if fl.listen != "" {
		s.listen = fl.listen
	}
	switch {
	case fl.dataDir != "":
		s.dataDir = fl.dataDir
	case fc.DataDir != "":
		s.dataDir = fc.resolvePath(fc.DataDir)
	default:
		s.dataDir = defaultDataDir
	}
	s.dataDir = filepath.Clean(s.dataDir)
	if s.shutdownTimeout == 0 {
		s.shutdownTimeout = defaultShutdownTimeout
	}
	s.headerTimeout, s.bodyTimeout, s.login = fc.HeaderTimeout, fc.BodyTimeout, fc.Login.limits()
	if s.headerTimeout == 0 {
		s.headerTimeout = defaultHeaderTimeout
	}
	if fl.logFormat != "" {
		s.logFormat = fl.logFormat
	}
	switch s.logFormat {
	case "":
		s.logFormat = "text"
	case "text", "json":
	default:
		return nil, usageError{fmt.Sprintf("--log-format %q: want text or json", s.logFormat)}
	}
	lvl := fc.Log.Level
	if fl.logLevel != "" {
		lvl = fl.logLevel
	}
	var err error
	if s.logLevel, err = parseLevel(lvl); err != nil {
		return nil, usageError{"log level " + err.Error()}
	}
	if fl.listen != "" {
		if _, _, err := splitListen(fl.listen); err != nil {
			return nil, usageError{err.Error()}
		}
	}

	if err := s.resolveDatabases(fc, getenv); err != nil {
		return nil, err
	}
	for _, u := range fc.Users {
		h := u.PasswordHash
		if h == "" {
			pw, err := secretFrom(fc.resolvePath(u.PasswordFile), u.PasswordEnv, getenv, "password")
			if err != nil {
				return nil, usageError{fmt.Sprintf("user %q: %v", u.Name, err)}
			}
			if h, err = hashPassword(pw); err != nil {
				return nil, err
			}
		}
		s.users = append(s.users, couchapi.User{Name: u.Name, Password: h, Admin: u.Admin, Databases: u.Databases})
		s.configAdmins = s.configAdmins || u.Admin
	}
	if s.p2p, err = resolveP2P(fc, getenv); err != nil {
		return nil, err
	}
	if s.tls, err = resolveTLS(fc, fl, s); err != nil {
		return nil, err
	}
	if s.noDataDir() && s.resetAdmin {
		return nil, usageError{"--reset-admin-password resets the built-in admin kept in the data folder, but every database is kept on CouchDB, so the relay has no data folder: give the admin in [[users]] or " + envAdminPassword}
	}
	if s.configAdmins && s.resetAdmin {
		return nil, usageError{"--reset-admin-password resets the built-in admin, but the configuration lists its own admin users (there is no built-in admin)"}
	}
	return s, nil
}

// noDataDir reports a relay that keeps every database on a CouchDB
// server: it opens no data folder at all (no lock, no bbolt file, no
// server uuid or admin file), so it runs on a read-only filesystem.
func (s *settings) noDataDir() bool {
	if len(s.databases) == 0 {
		return false // clients create databases: bbolt files
	}
	for _, name := range s.databases {
		if _, ok := s.stores[name]; !ok {
			return false
		}
	}
	return true
}

// resolveDatabases reads the configured databases' upstreams, stores and
// passphrases (the default database "vault" without a [[databases]]
// list).
func (s *settings) resolveDatabases(fc *fileConfig, getenv func(string) string) error {
	if fc.dbsDefined {
		for _, d := range fc.Databases {
			s.databases = append(s.databases, d.Name)
			ups, err := resolveUpstreams(fc, d, getenv)
			if err != nil {
				return err
			}
			if len(ups) > 0 {
				s.upstreams[d.Name] = ups
			}
			st, ok, err := resolveStore(fc, d, getenv)
			if err != nil {
				return err
			}
			if ok {
				s.stores[d.Name] = st
			}
			if d.PassphraseFile == "" && d.PassphraseEnv == "" {
				continue
			}
			p, err := secretFrom(fc.resolvePath(d.PassphraseFile), d.PassphraseEnv, getenv, "passphrase")
			if err != nil {
				return usageError{fmt.Sprintf("database %q: %v", d.Name, err)}
			}
			s.passphrases[d.Name] = p
		}
	} else {
		s.databases = []string{defaultDatabase}
	}
	return nil
}
