// Package couchdir serves databases kept on a CouchDB server.
package couchdir

import (
	"context"
	"errors"
	"log/slog"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Config configures Open.
type Config struct {
	Server couchdb.Config    // URL and credentials; Database is ignored
	Names  map[string]string // served name → CouchDB database name
	Log    *slog.Logger
}

// Databases is a couchapi.Databases over one CouchDB server.
type Databases struct{ cfg Config }

var _ couchapi.Databases = (*Databases)(nil)

var errTODO = errors.New("couchdir: not implemented yet")

// Open returns the Databases of cfg.
func Open(ctx context.Context, cfg Config) (*Databases, error) { return nil, errTODO }

// Open returns the named database's store.
func (d *Databases) Open(ctx context.Context, name string) (store.Store, error) { return nil, errTODO }

// Create creates a configured database on the server.
func (d *Databases) Create(ctx context.Context, name string) error { return errTODO }

// Delete is refused.
func (d *Databases) Delete(ctx context.Context, name string) error { return errTODO }

// List returns the configured names.
func (d *Databases) List(ctx context.Context) ([]string, error) { return nil, errTODO }

// Close closes every open store.
func (d *Databases) Close() error { return nil }

// ServerUUID returns the CouchDB server's uuid.
func (d *Databases) ServerUUID(ctx context.Context) (string, error) { return "", errTODO }
