// Package lease is a time-limited lease kept in a _local document of a
// store shared by several processes, taken and renewed by compare-and-swap,
// with a payload its holder saves for the next one.
package lease

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/livesync-go/livesync-go/engine/store"
)

// DefaultID is the _local document id of a database's hunt lease.
const DefaultID = "livesync-go/lease/hunt"

// DefaultTTL is how long a lease lasts without renewal.
const DefaultTTL = 15 * time.Second

// ErrLost means another holder has the lease.
var ErrLost = errors.New("lease: lost to another holder")

// Config configures a Lease; the zero value is valid.
type Config struct {
	ID     string        // the _local document id; "" means DefaultID
	Holder string        // this holder's name; "" means a random one
	TTL    time.Duration // 0 means DefaultTTL
}

// Lease is one holder's handle on a lease.
type Lease struct {
	st  store.LocalUpdater
	cfg Config
}

// New returns a handle on the lease cfg names in st.
func New(st store.LocalUpdater, cfg Config) *Lease { return &Lease{st: st, cfg: cfg} }

var errTODO = errors.New("lease: not implemented yet")

// Acquire takes the lease if free, expired or this holder's.
func (l *Lease) Acquire(ctx context.Context) (held bool, state json.RawMessage, err error) {
	return false, nil, errTODO
}

// Renew extends the lease and saves state.
func (l *Lease) Renew(ctx context.Context, state json.RawMessage) error { return errTODO }

// Release saves state and frees the lease.
func (l *Lease) Release(ctx context.Context, state json.RawMessage) error { return errTODO }

// Info reads the lease as stored.
func (l *Lease) Info(ctx context.Context) (holder string, until time.Time, err error) {
	return "", time.Time{}, errTODO
}

// Holder is this handle's holder name.
func (l *Lease) Holder() string { return l.cfg.Holder }
