package couchapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"
)

// Defaults of Config.
const (
	// DefaultMaxRequestBytes is the request body limit when
	// Config.MaxRequestBytes is zero: 4 MiB. (CouchDB's own default
	// max_http_request_size is 4 GiB; LiveSync's setup wizard reports any
	// value below 4294967296 as a problem, see Config.MaxRequestBytes.)
	DefaultMaxRequestBytes = 4 << 20
	// DefaultMaxDocumentBytes is the document size limit when
	// Config.MaxDocumentBytes is zero: 50,000,000 bytes, the value
	// LiveSync provisions (engine/FORMAT.md §5.1).
	DefaultMaxDocumentBytes = 50_000_000
	// DefaultCookieTimeout is the session lifetime when
	// Config.CookieTimeout is zero: CouchDB's chttpd_auth/timeout, 600 s.
	DefaultCookieTimeout = 10 * time.Minute
	// DefaultPasswordIterations is the PBKDF2-SHA256 iteration count used
	// to hash plaintext passwords when Config.PasswordIterations is zero
	// (CouchDB 3.5's default).
	DefaultPasswordIterations = 600_000
	// DefaultChangesTimeout is how long a longpoll or continuous feed
	// without heartbeat waits for changes when Config.ChangesTimeout is
	// zero: CouchDB's chttpd/changes_timeout, 60 s.
	DefaultChangesTimeout = 60 * time.Second
	// DefaultBodyTimeout is how long a request body may take to arrive
	// when Config.BodyTimeout is zero: 2 minutes (a 4 MiB batch at
	// 35 KB/s).
	DefaultBodyTimeout = 2 * time.Minute
)

// CouchDBVersion is the CouchDB version the server announces (GET / and
// the Server header): the API level it follows. LiveSync's setup wizard
// reads it to choose which configuration keys to check.
const CouchDBVersion = "3.5.0"

// Config configures a Server. Databases is required; the zero value of
// every other field is the documented default.
type Config struct {
	// Databases holds the databases the server serves.
	Databases Databases
	// Users are the accounts that may log in. Without users and without
	// anonymous access nobody could use the server, which Validate
	// refuses.
	Users []User
	// AllowAnonymousRead lets requests without credentials read every
	// database (GET/HEAD, _changes, _all_docs, _bulk_get, _revs_diff).
	// Default false, as LiveSync's require_valid_user.
	AllowAnonymousRead bool
	// AllowAnonymousWrite lets requests without credentials write
	// documents (never create or delete databases). Default false.
	AllowAnonymousWrite bool
	// CORSOrigins are the origins a browser may call the server from with
	// credentials, e.g. "app://obsidian.md", "capacitor://localhost",
	// "http://localhost" (LiveSync's set); "*" allows any origin. Empty
	// disables CORS.
	CORSOrigins []string
	// MaxRequestBytes caps a request body; larger bodies (also chunked
	// ones) are answered 413 {"error":"too_large"} before anything is
	// stored. 0 means DefaultMaxRequestBytes. The configuration endpoint
	// reports it as chttpd/max_http_request_size; LiveSync's wizard flags
	// values below 4294967296 (4 GiB) but replicates fine with less, as
	// long as one batch fits.
	MaxRequestBytes int64
	// MaxDocumentBytes caps one document's JSON size: larger ones are
	// answered 413 {"error":"document_too_large"}. 0 means
	// DefaultMaxDocumentBytes.
	MaxDocumentBytes int64
	// CookieSecret signs session cookies (HMAC-SHA256). nil means 32
	// random bytes, so sessions end when the process does; give a fixed
	// secret to keep them across restarts. At least 16 bytes if set.
	CookieSecret []byte
	// CookieTimeout is how long a session cookie stays valid after it was
	// issued or last refreshed. 0 means DefaultCookieTimeout.
	CookieTimeout time.Duration
	// PasswordIterations is the PBKDF2-SHA256 iteration count for
	// passwords given in plaintext. 0 means DefaultPasswordIterations.
	PasswordIterations int
	// WWWAuthenticate, if set (e.g. `Basic realm="couchdb"`), is sent with
	// 401 answers and reported as httpd/WWW-Authenticate, as CouchDB does
	// when configured. Empty (the default) never sends it: a browser
	// client would show its own login dialog.
	WWWAuthenticate string
	// ChangesTimeout bounds a longpoll or continuous feed that has no
	// heartbeat (a client's timeout parameter can only lower it). 0 means
	// DefaultChangesTimeout.
	ChangesTimeout time.Duration
	// BodyTimeout is how long a request body may take to arrive in full,
	// from when the server starts reading it; a late body is answered 408
	// and its connection closed. A refused request's body (no or wrong
	// credentials, too large, not JSON) is never read: its connection
	// closes at once. Feeds are not limited by it once their body is
	// read. 0 means DefaultBodyTimeout. Bound the time to send the
	// headers with http.Server.ReadHeaderTimeout.
	BodyTimeout time.Duration
	// Login limits failed logins per client address and per user (429
	// with Retry-After beyond them). The zero value is the defaults of
	// LoginLimits.
	Login LoginLimits
	// UUID is the server's uuid in GET /. PouchDB builds its replication
	// ids (and so its checkpoint documents) from it: keep it stable across
	// restarts. Empty means a random one per Server.
	UUID string
	// Compression chooses whether answers are gzipped for clients that
	// accept it. The zero value, CompressionGzip, compresses non-streaming
	// JSON answers of at least CompressMinBytes and never a longpoll or
	// continuous feed; CompressionOff turns compression off.
	Compression Compression
	// Log receives request errors and authentication failures (never
	// bodies, passwords or cookies). nil discards.
	Log *slog.Logger
	// Hooks are optional callbacks, e.g. for metrics.
	Hooks Hooks
}

// User is an account of the server.
type User struct {
	// Name is the login name; it must not be empty or contain ':'.
	Name string
	// Password is the password in plaintext (hashed with PBKDF2-SHA256 when
	// the server starts, then forgotten) or a CouchDB password hash:
	// "-pbkdf2:sha256-<derived key hex>,<salt>,<iterations>" (also sha,
	// sha224, sha384, sha512, and the legacy "-pbkdf2-" SHA-1 form).
	Password string
	// Admin users may use every database, create and delete any, and read
	// the admins section of the configuration.
	Admin bool
	// Databases are the databases a non-admin user may read, write,
	// create and delete.
	Databases []string
}

// Hooks are callbacks the server calls; nil fields are skipped. They run
// on the request's goroutine and must be fast and safe for concurrent use.
type Hooks struct {
	// OnRequest is called once per request after it has been answered,
	// with the route template (e.g. "/{db}/_changes"), the status sent
	// and the time the request took (for a feed, until it ended).
	OnRequest func(route string, status int, dur time.Duration)
}

// Validate reports whether the configuration is usable.
func (c Config) Validate() error {
	if c.Databases == nil {
		return errors.New("couchapi: Databases is required")
	}
	if len(c.Users) == 0 && !c.AllowAnonymousRead && !c.AllowAnonymousWrite {
		return errors.New("couchapi: no users and no anonymous access: nobody could use the server")
	}
	seen := map[string]bool{}
	for i, u := range c.Users {
		if u.Name == "" || strings.ContainsAny(u.Name, ":\x00") {
			return fmt.Errorf("couchapi: user %d: name must be non-empty and contain no ':'", i)
		}
		if seen[u.Name] {
			return fmt.Errorf("couchapi: user %q is listed twice", u.Name)
		}
		seen[u.Name] = true
		if u.Password == "" {
			return fmt.Errorf("couchapi: user %q has no password", u.Name)
		}
		if strings.HasPrefix(u.Password, "-hashed-") {
			return fmt.Errorf("couchapi: user %q: the legacy -hashed- password scheme is not supported; give the password or a -pbkdf2 hash", u.Name)
		}
		if strings.HasPrefix(u.Password, "-pbkdf2") {
			if _, err := parseHash(u.Password); err != nil {
				return fmt.Errorf("couchapi: user %q: %v", u.Name, err)
			}
		}
		for _, db := range u.Databases {
			if !ValidDatabaseName(db) {
				return fmt.Errorf("couchapi: user %q: %q is not a valid database name", u.Name, db)
			}
		}
	}
	for _, o := range c.CORSOrigins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return fmt.Errorf("couchapi: CORS origin %q is not scheme://host[:port] or *", o)
		}
	}
	switch {
	case c.MaxRequestBytes < 0:
		return errors.New("couchapi: MaxRequestBytes is negative")
	case c.MaxDocumentBytes < 0:
		return errors.New("couchapi: MaxDocumentBytes is negative")
	case c.CookieSecret != nil && len(c.CookieSecret) < 16:
		return errors.New("couchapi: CookieSecret must be at least 16 bytes")
	case c.CookieTimeout < 0:
		return errors.New("couchapi: CookieTimeout is negative")
	case c.PasswordIterations < 0:
		return errors.New("couchapi: PasswordIterations is negative")
	case c.ChangesTimeout < 0:
		return errors.New("couchapi: ChangesTimeout is negative")
	case c.BodyTimeout < 0:
		return errors.New("couchapi: BodyTimeout is negative")
	case c.Compression != CompressionGzip && c.Compression != CompressionOff:
		return fmt.Errorf("couchapi: unknown Compression %d", c.Compression)
	case strings.ContainsAny(c.WWWAuthenticate, "\r\n"):
		return errors.New("couchapi: WWWAuthenticate contains a line break")
	}
	return c.Login.validate()
}

func (c Config) maxRequestBytes() int64 { return orDefault(c.MaxRequestBytes, DefaultMaxRequestBytes) }

func (c Config) maxDocumentBytes() int64 {
	return orDefault(c.MaxDocumentBytes, DefaultMaxDocumentBytes)
}

func (c Config) cookieTimeout() time.Duration {
	return orDefault(c.CookieTimeout, DefaultCookieTimeout)
}

func (c Config) passwordIterations() int {
	return orDefault(c.PasswordIterations, DefaultPasswordIterations)
}

func (c Config) changesTimeout() time.Duration {
	return orDefault(c.ChangesTimeout, DefaultChangesTimeout)
}

func (c Config) bodyTimeout() time.Duration { return orDefault(c.BodyTimeout, DefaultBodyTimeout) }

// orDefault is v, or def when v is the zero value (configuration fields
// whose zero value means the documented default).
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
