package couchdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/decorate"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// Remote is a CouchDB database as a vault remote: the replication
// endpoint, the handshake's records and chunk retrieval by id.
type Remote struct {
	id string
	db *DB
}

var _ vault.Remote = (*Remote)(nil)

// RemoteOptions configure NewRemote.
type RemoteOptions struct {
	// ID names the remote in the vault's records; "" means the database's
	// URL without credentials (DatabaseURL).
	ID string
}

// NewRemote opens the database of cfg as a vault remote. It does not
// contact the server.
func NewRemote(cfg Config, o RemoteOptions) (*Remote, error) {
	db, err := New(cfg)
	if err != nil {
		return nil, err
	}
	id := o.ID
	if id == "" {
		id = DatabaseURL(cfg)
	}
	return &Remote{id: id, db: db}, nil
}

// SplitURL splits a database's URL ("https://host:6984/path/db") into the
// server's URL and the database name: the database is the last path
// segment. User info is dropped; pass credentials in Config.
func SplitURL(raw string) (server, database string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("couchdb: the database URL does not parse: %w", RedactURLError(err))
	}
	s := *u
	s.User, s.RawQuery, s.Fragment = nil, "", ""
	path := strings.Trim(s.Path, "/")
	database = path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		database = path[i+1:]
		s.Path = "/" + path[:i]
	} else {
		s.Path = ""
	}
	s.RawPath = ""
	return s.String(), database, nil
}

// ParseURL parses a database's URL,
// http(s)://[user[:password]@]host[:port][/path]/database, into the
// Config that reaches it: the server's URL without credentials, query or
// fragment (SplitURL), the database (the last path segment) and the user
// and password the URL holds. No error repeats the password.
func ParseURL(raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("the remote is not a valid URL: %w", RedactURLError(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return Config{}, fmt.Errorf("the remote URL's scheme %q: want http or https", u.Scheme)
	}
	server, database, err := SplitURL(raw)
	if err != nil {
		return Config{}, err
	}
	var cfg Config
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Password, _ = u.User.Password()
		u.User = nil
	}
	if database == "" || u.Host == "" {
		return Config{}, fmt.Errorf("the remote URL %s names no database: use https://host:5984/DATABASE", u.Redacted())
	}
	cfg.URL, cfg.Database = server, database
	return cfg, nil
}

// RedactURLError drops the URL from a url.Parse error, which may hold a
// password.
func RedactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// DatabaseURL is cfg's database URL without credentials.
func DatabaseURL(cfg Config) string {
	return strings.TrimRight(cfg.URL, "/") + "/" + url.PathEscape(cfg.Database)
}

// DB is the remote's database.
func (r *Remote) DB() *DB { return r.db }

// ID names the remote without credentials.
func (r *Remote) ID() string { return r.id }

// Negotiate is the database itself: its _local documents and the version
// document.
func (r *Remote) Negotiate() negotiate.Port { return r.db }

// ChunkRange is negotiate.CouchDBChunkRange.
func (r *Remote) ChunkRange() negotiate.ChunkRange { return negotiate.CouchDBChunkRange }

// Endpoint is the database as a replication endpoint whose bulk writes
// store a batch's chunks before its other documents.
func (r *Remote) Endpoint() engine.Endpoint { return ChunksFirst(r.db) }

// Objects is nil: a database is not a journal.
func (r *Remote) Objects() journalsync.Objects { return nil }

// Chunks is the database's chunk source decoding with codec.
func (r *Remote) Chunks(codec *livesync.Codec) engine.ChunkSource { return r.db.ChunkSource(codec) }

// Reset destroys the database and creates it again, empty.
func (r *Remote) Reset(ctx context.Context) error {
	if err := r.db.Destroy(ctx); err != nil && !errors.Is(err, engine.ErrNotFound) {
		return err
	}
	return r.db.Create(ctx)
}

// Close releases the client's connections.
func (r *Remote) Close() error { return r.db.Close() }

// ChunksFirst wraps an endpoint so that its bulk writes send a batch's
// chunks before its other documents (decorate.ChunksFirst).
func ChunksFirst(ep engine.Endpoint) engine.Endpoint { return decorate.ChunksFirst(ep) }

// rawDocID reads a document's _id.
func rawDocID(raw json.RawMessage) string {
	var d struct {
		ID string `json:"_id"`
	}
	_ = json.Unmarshal(raw, &d)
	return d.ID
}
