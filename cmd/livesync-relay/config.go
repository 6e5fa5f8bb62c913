package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine/holdback"
	"github.com/livesync-go/livesync-go/engine/purgatory"
)

// Defaults of the relay when neither a flag nor the configuration file
// says otherwise.
const (
	defaultListen          = "127.0.0.1:5984"
	defaultDataDir         = "livesync-data"
	defaultDatabase        = "vault"
	defaultShutdownTimeout = 30 * time.Second
	// defaultHeaderTimeout bounds the time a client takes to send a
	// request's headers (http.Server.ReadHeaderTimeout).
	defaultHeaderTimeout = 20 * time.Second
	// defaultMaxRequestBytes and defaultWWWAuthenticate are the values
	// LiveSync's setup check asks a CouchDB for (chttpd
	// max_http_request_size, httpd WWW-Authenticate; engine/FORMAT.md §5.1), so
	// the check passes against a relay with no configuration. Only
	// authenticated users can send a body; lower max_request_bytes to
	// bound the memory one request may take.
	defaultMaxRequestBytes = 4294967296
	defaultWWWAuthenticate = `Basic realm="couchdb"`
)

// defaultCORSOrigins are the origins the Obsidian app uses on desktop,
// on mobile and in development: the set LiveSync's CouchDB setup allows.
var defaultCORSOrigins = []string{"app://obsidian.md", "capacitor://localhost", "http://localhost"}

// reservedNames are paths the relay serves itself; no database may have
// these names.
var reservedNames = map[string]bool{"healthz": true, "metrics": true, "status": true}

// fileConfig is the configuration file (TOML). relay.example.toml
// documents every key. Unknown keys are an error, so that a typo is not
// silently ignored.
type fileConfig struct {
	Listen           string           `toml:"listen"`
	DataDir          string           `toml:"data_dir"`
	CORSOrigins      []string         `toml:"cors_origins"`
	MaxRequestBytes  int64            `toml:"max_request_bytes"`
	MaxDocumentBytes int64            `toml:"max_document_bytes"`
	WWWAuthenticate  string           `toml:"www_authenticate"`
	Compression      bool             `toml:"compression"`
	MetricsPublic    bool             `toml:"metrics_public"`
	ShutdownTimeout  time.Duration    `toml:"shutdown_timeout"`
	HeaderTimeout    time.Duration    `toml:"header_timeout"`
	BodyTimeout      time.Duration    `toml:"body_timeout"`
	Login            loginConfig      `toml:"login"`
	TLS              tlsConfig        `toml:"tls"`
	Log              logConfig        `toml:"log"`
	Users            []userConfig     `toml:"users"`
	Databases        []dbConfig       `toml:"databases"`
	Purgatory        purgatoryConfig  `toml:"purgatory"`
	Holdback         holdbackConfig   `toml:"holdback"`
	Hunt             huntConfig       `toml:"hunt"`
	Compaction       compactionConfig `toml:"compaction"`
	P2P              p2pConfig        `toml:"p2p"`
	Nostr            nostrConfig      `toml:"nostr"`

	path       string // the file it was read from; "" for no file
	corsSet    bool   // cors_origins was given (an empty list turns CORS off)
	wwwAuthSet bool   // www_authenticate was given ("" turns the header off)
	dbsDefined bool   // databases was given (an empty list declares none)
}

// tlsConfig is the [tls] table: a certificate's files, ACME names or a
// self-signed certificate (tls_config.go), or nothing for plain HTTP.
type tlsConfig struct {
	CertFile        string   `toml:"cert_file"`
	KeyFile         string   `toml:"key_file"`
	ACMEDomains     []string `toml:"acme_domains"`
	ACMEEmail       string   `toml:"acme_email"`
	ACMEDirectory   string   `toml:"acme_directory"`
	ACMECAFile      string   `toml:"acme_ca_file"`
	ACMEHTTPListen  string   `toml:"acme_http_listen"`
	SelfSigned      bool     `toml:"self_signed"`
	SelfSignedNames []string `toml:"self_signed_names"`
}

// loginConfig is the [login] table: the failed-login budgets
// (couchapi.LoginLimits). Zero or absent means the default; a negative
// count turns that budget off.
type loginConfig struct {
	FailuresPerAddress int           `toml:"failures_per_address"`
	FailuresPerUser    int           `toml:"failures_per_user"`
	FailureInterval    time.Duration `toml:"failure_interval"`
}

func (l loginConfig) limits() couchapi.LoginLimits {
	return couchapi.LoginLimits{FailuresPerAddress: l.FailuresPerAddress, FailuresPerUser: l.FailuresPerUser, FailureInterval: l.FailureInterval}
}

// logConfig is the [log] table.
type logConfig struct {
	Format string `toml:"format"` // "text" (default) or "json"
	Level  string `toml:"level"`  // "debug", "info" (default), "warn", "error"
}

// userConfig is one [[users]] table. Exactly one of PasswordFile,
// PasswordEnv and PasswordHash gives the password.
type userConfig struct {
	Name         string   `toml:"name"`
	PasswordFile string   `toml:"password_file"`
	PasswordEnv  string   `toml:"password_env"`
	PasswordHash string   `toml:"password_hash"`
	Admin        bool     `toml:"admin"`
	Databases    []string `toml:"databases"`
}

// dbConfig is one [[databases]] table: a database created at start if
// missing, with the vault passphrase that lets the hold-back read
// obfuscated metadata, and the upstreams it is bridged to.
type dbConfig struct {
	Name           string           `toml:"name"`
	PassphraseFile string           `toml:"passphrase_file"`
	PassphraseEnv  string           `toml:"passphrase_env"`
	Upstreams      []upstreamConfig `toml:"upstreams"`
	// P2P are the peer-to-peer groups the relay joins for the database.
	P2P []p2pGroupConfig `toml:"p2p"`
	// LiveSyncP2P are the LiveSync P2P rooms (the plugin's own P2P
	// mode) the relay joins for the database (lsp2p_config.go).
	LiveSyncP2P []lsp2pConfig `toml:"livesync_p2p"`
	// Store is where the relay keeps the database: a bbolt file in the
	// data folder (the default) or a database on a CouchDB server
	// (store_config.go).
	Store storeConfig `toml:"store"`
}

// purgatoryConfig is the [purgatory] table; zero values mean the
// engine's defaults (engine/purgatory, engine/holdback).
type purgatoryConfig struct {
	PushedDelay     time.Duration `toml:"pushed_delay"`
	PulledDelay     time.Duration `toml:"pulled_delay"`
	ActiveFor       time.Duration `toml:"active_for"`
	SoftExpiry      time.Duration `toml:"soft_expiry"`
	RememberExpired time.Duration `toml:"remember_expired"`
	ReleaseRetry    time.Duration `toml:"release_retry"`
	SaveInterval    time.Duration `toml:"save_interval"`
}

// compactionConfig is the [compaction] table: how much revision history
// every database keeps. The zero value keeps it as CouchDB does.
type compactionConfig struct {
	// KeepRevisionBodies is how many bodies of earlier revisions each
	// document keeps (the newest), dropping older ones as documents are
	// written; 0 (the default) keeps every one until an admin compacts
	// the database (POST /{db}/_compact), as CouchDB does.
	KeepRevisionBodies int `toml:"keep_revision_bodies"`
}

// holdbackConfig is the [holdback] table: how many documents, and chunk
// ids of their held revisions, the hold-back of each database keeps held
// at once. Zero values mean the engine's defaults (engine/holdback:
// 10,000 documents per database, 2,000 per user; 1,000,000 chunk ids per
// database, 200,000 per user); negative ones are an error.
type holdbackConfig struct {
	// MaxHeldDocuments is the most documents one database holds at once,
	// from any user or upstream (holdback.Config.MaxHeldDocuments).
	MaxHeldDocuments int `toml:"max_held_documents"`
	// MaxHeldDocumentsPerUser is the most documents one database holds
	// at once for one user's pushes (holdback.Config.MaxHeldPerOwner).
	MaxHeldDocumentsPerUser int `toml:"max_held_documents_per_user"`
	// MaxHeldChunkIDs is the most chunk ids the held revisions of one
	// database need together (holdback.Config.MaxHeldChunkIDs): memory
	// grows with it.
	MaxHeldChunkIDs int `toml:"max_held_chunk_ids"`
	// MaxHeldChunkIDsPerUser is MaxHeldChunkIDs for one user's pushes
	// (holdback.Config.MaxHeldChunkIDsPerOwner).
	MaxHeldChunkIDsPerUser int `toml:"max_held_chunk_ids_per_user"`
}

// holdbackConfig combines [purgatory] and [holdback] into the engine's
// configuration; refusals name the keys to raise.
func (c *fileConfig) holdbackConfig() holdback.Config {
	hc := c.Purgatory.holdback()
	hc.MaxHeldDocuments = c.Holdback.MaxHeldDocuments
	hc.MaxHeldPerOwner = c.Holdback.MaxHeldDocumentsPerUser
	hc.MaxHeldDocumentsName = "[holdback] max_held_documents in the relay's configuration"
	hc.MaxHeldPerOwnerName = "[holdback] max_held_documents_per_user in the relay's configuration"
	hc.MaxHeldChunkIDs = c.Holdback.MaxHeldChunkIDs
	hc.MaxHeldChunkIDsPerOwner = c.Holdback.MaxHeldChunkIDsPerUser
	hc.MaxHeldChunkIDsName = "[holdback] max_held_chunk_ids in the relay's configuration"
	hc.MaxHeldChunkIDsPerOwnerName = "[holdback] max_held_chunk_ids_per_user in the relay's configuration"
	return hc
}

func (p purgatoryConfig) holdback() holdback.Config {
	return holdback.Config{
		Purgatory: purgatory.Config{
			PushedDelay: p.PushedDelay, PulledDelay: p.PulledDelay, ActiveFor: p.ActiveFor,
			SoftExpiry: p.SoftExpiry, RememberExpired: p.RememberExpired, ReleaseRetry: p.ReleaseRetry,
		},
		SaveInterval: p.SaveInterval,
	}
}

// parseConfig decodes a configuration file's text. It refuses unknown
// keys and checks nothing else (see validate).
func parseConfig(text, path string) (*fileConfig, error) {
	var c fileConfig
	md, err := toml.Decode(text, &c)
	if err != nil {
		return nil, fmt.Errorf("configuration %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("configuration %s: unknown key(s) %s", path, strings.Join(keys, ", "))
	}
	c.path = path
	c.corsSet = md.IsDefined("cors_origins")
	c.wwwAuthSet = md.IsDefined("www_authenticate")
	c.dbsDefined = md.IsDefined("databases")
	return &c, nil
}

// loadConfig reads and validates the configuration file at path.
func loadConfig(path string) (*fileConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	c, err := parseConfig(string(b), path)
	if err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// validate checks what can be checked without reading secrets or
// certificates.
func (c *fileConfig) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			bad("listen %q: want host:port, e.g. 127.0.0.1:5984 or :5984", c.Listen)
		}
	}
	c.TLS.validate(bad)
	switch c.Log.Format {
	case "", "text", "json":
	default:
		bad("log.format %q: want \"text\" or \"json\"", c.Log.Format)
	}
	if _, err := parseLevel(c.Log.Level); err != nil {
		bad("log.level: %v", err)
	}
	if c.ShutdownTimeout < 0 {
		bad("shutdown_timeout is negative")
	}
	if c.HeaderTimeout < 0 || c.BodyTimeout < 0 {
		bad("header_timeout and body_timeout must not be negative (0 or absent means the default)")
	}
	if c.Login.FailureInterval < 0 {
		bad("login.failure_interval is negative (0 or absent means the default, %s)", couchapi.DefaultFailureInterval)
	}
	if c.Compaction.KeepRevisionBodies < 0 {
		bad("compaction.keep_revision_bodies is negative: give 0 to keep every earlier body until POST /{db}/_compact, or N > 0 to keep the newest N per document")
	}
	seen := map[string]bool{}
	for i, d := range c.Databases {
		switch {
		case !couchapi.ValidDatabaseName(d.Name):
			bad("databases[%d]: %q is not a valid database name (^[a-z][a-z0-9_$()+-]*$)", i, d.Name)
		case reservedNames[d.Name]:
			bad("databases[%d]: %q is reserved for the relay's /%s endpoint", i, d.Name, d.Name)
		case seen[d.Name]:
			bad("databases: %q is listed twice", d.Name)
		}
		seen[d.Name] = true
		if d.PassphraseFile != "" && d.PassphraseEnv != "" {
			bad("databases %q: give passphrase_file or passphrase_env, not both", d.Name)
		}
		validateUpstreams(d, bad)
		validateStore(d, bad)
	}
	c.validateStores(bad)
	users := make([]couchapi.User, 0, len(c.Users))
	for i, u := range c.Users {
		n := 0
		for _, s := range []string{u.PasswordFile, u.PasswordEnv, u.PasswordHash} {
			if s != "" {
				n++
			}
		}
		if n != 1 {
			bad("users[%d] %q: give exactly one of password_file, password_env and password_hash", i, u.Name)
		}
		if u.PasswordHash != "" && !strings.HasPrefix(u.PasswordHash, "-pbkdf2") {
			bad("users[%d] %q: password_hash must be a CouchDB \"-pbkdf2:sha256-<key>,<salt>,<iterations>\" hash", i, u.Name)
		}
		pw := u.PasswordHash
		if pw == "" {
			pw = "placeholder" // the real password is read later
		}
		users = append(users, couchapi.User{Name: u.Name, Password: pw, Admin: u.Admin, Databases: u.Databases})
	}
	if len(users) == 0 {
		users = []couchapi.User{{Name: "admin", Password: "placeholder", Admin: true}}
	}
	cc := couchapi.Config{
		Databases: couchapi.NewMemoryDatabases(), Users: users, CORSOrigins: c.CORSOrigins,
		MaxRequestBytes: c.MaxRequestBytes, MaxDocumentBytes: c.MaxDocumentBytes,
		BodyTimeout: c.BodyTimeout, Login: c.Login.limits(),
	}
	if err := cc.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Purgatory.holdback().Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Holdback.MaxHeldDocuments < 0 {
		bad("holdback.max_held_documents is negative: give 0 for the default (%d) or a positive limit", holdback.DefaultMaxHeldDocuments)
	}
	if c.Holdback.MaxHeldDocumentsPerUser < 0 {
		bad("holdback.max_held_documents_per_user is negative: give 0 for the default (%d) or a positive limit", holdback.DefaultMaxHeldPerOwner)
	}
	if c.Holdback.MaxHeldChunkIDs < 0 {
		bad("holdback.max_held_chunk_ids is negative: give 0 for the default (%d) or a positive limit", holdback.DefaultMaxHeldChunkIDs)
	}
	if c.Holdback.MaxHeldChunkIDsPerUser < 0 {
		bad("holdback.max_held_chunk_ids_per_user is negative: give 0 for the default (%d) or a positive limit", holdback.DefaultMaxHeldChunkIDsPerOwner)
	}
	if err := c.Hunt.config().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("hunt: %w", err))
	}
	c.validateP2P(bad)
	c.validateLiveSyncP2P(bad)
	if len(errs) > 0 {
		where := "configuration"
		if c.path != "" {
			where += " " + c.path
		}
		return fmt.Errorf("%s: %w", where, errors.Join(errs...))
	}
	return nil
}

// dir is the folder relative paths of the file are resolved against.
func (c *fileConfig) dir() string {
	if c.path == "" {
		return "."
	}
	return filepath.Dir(c.path)
}

// resolvePath makes a path of the file absolute against its folder; "~/"
// is the home folder.
func (c *fileConfig) resolvePath(p string) string {
	if p == "" {
		return ""
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.dir(), p)
}

// readSecretFile reads a password or passphrase file; one trailing
// newline (LF or CRLF) is not part of the secret. The secret is never in
// an error message.
func readSecretFile(name, what string) (string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("reading the %s file: %w", what, err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("the %s file %s is empty", what, name)
	}
	return s, nil
}

// secretFrom reads a secret from a file or an environment variable (one
// of them is set).
func secretFrom(file, env string, getenv func(string) string, what string) (string, error) {
	if file != "" {
		return readSecretFile(file, what)
	}
	v := getenv(env)
	if v == "" {
		return "", fmt.Errorf("the %s variable %s is empty or unset", what, env)
	}
	return v, nil
}
