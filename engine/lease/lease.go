// Package lease is a time-limited lease kept in a _local document of a
// store shared by several processes, taken and renewed by compare-and-swap,
// with a payload its holder saves for the next one.
//
// The lease document is
//
//	{"holder": "<name>", "until": <unix ms>, "state": <any JSON>}
//
// A lease is free when it has no holder or its until has passed. Every
// change is one store.LocalUpdater.UpdateLocal: the decision (free,
// expired, still ours) is taken on the document as stored, and the
// store writes the result only if nobody wrote in between, so two
// processes racing for a free lease cannot both get it.
//
// Times are each process's wall clock: a holder's lease runs until its
// own now+TTL, and another process sees it expired at its own clock's
// until. Clocks that differ by d move the handover by d, and a holder
// whose clock is behind may renew a lease another already took as
// expired (its Renew then fails with ErrLost, since the holder changed).
// Keep the TTL far above the skew between the processes (NTP keeps it
// to milliseconds; the default TTL is 15 s) and renew well before it
// runs out (every TTL/3).
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Prefix starts the ids of the _local documents leases are kept in. A
// Store that serves clients refuses them (holdback reserves it), so no
// client can take or forge a lease.
const Prefix = "livesync-go/lease/"

// DefaultID is the _local document id of a database's hunt lease.
const DefaultID = Prefix + "hunt"

// DefaultTTL is how long a lease lasts without renewal.
const DefaultTTL = 15 * time.Second

// ErrLost means another holder has the lease (or nobody does any more):
// this holder's Renew or Release changed nothing.
var ErrLost = errors.New("lease: lost to another holder")

// Config configures a Lease; the zero value is valid.
type Config struct {
	ID     string        // the _local document id; "" means DefaultID
	Holder string        // this holder's name; "" means a random one
	TTL    time.Duration // 0 means DefaultTTL
}

// Lease is one holder's handle on a lease. It keeps nothing but its
// configuration: every call decides on the document as stored. It is
// safe for concurrent use.
type Lease struct {
	st  store.LocalUpdater
	cfg Config
}

// New returns a handle on the lease cfg names in st.
func New(st store.LocalUpdater, cfg Config) *Lease {
	if cfg.ID == "" {
		cfg.ID = DefaultID
	}
	if cfg.Holder == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		cfg.Holder = hex.EncodeToString(b)
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	return &Lease{st: st, cfg: cfg}
}

// doc is the lease document.
type doc struct {
	Holder string          `json:"holder"`
	Until  int64           `json:"until"` // unix ms; 0 when free
	State  json.RawMessage `json:"state,omitempty"`
}

// decode reads a stored lease document. One that cannot be read (not
// JSON, not an object, fields of the wrong type, a state that is not
// JSON) is treated as free with no state, rather than as an error: every
// process would otherwise refuse to take it until someone repaired it by
// hand, and no process could ever hold it again. What is lost is only
// the last holder's payload (the next holder starts afresh). nil means
// absent (free).
func decode(b json.RawMessage) doc {
	var d doc
	if b == nil || json.Unmarshal(b, &d) != nil {
		return doc{}
	}
	if d.State != nil && (string(d.State) == "null" || !json.Valid(d.State)) {
		d.State = nil
	}
	return d
}

// live reports whether d is held by someone at now.
func (d doc) live(now time.Time) bool {
	return d.Holder != "" && now.UnixMilli() < d.Until
}

func (l *Lease) encode(d doc) (json.RawMessage, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("lease %q: %w", l.cfg.ID, err)
	}
	return b, nil
}

// Grant is what Take found and did.
type Grant struct {
	// Held is true when this holder has the lease now.
	Held bool
	// State is the payload the last holder saved (nil if none), whether
	// or not the lease was taken.
	State json.RawMessage
	// Unclean is true when Held and the last holder did not release the
	// lease: it ran out, was this holder's own from a run that never
	// released it, or could not be read. Whatever that holder did after
	// it last saved State is then unknown.
	Unclean bool
}

// Take takes the lease if it is free, expired or already this holder's,
// and extends it to now+TTL. Held is false (err nil) when another
// holder's lease is still valid.
func (l *Lease) Take(ctx context.Context) (Grant, error) {
	var g Grant
	err := l.st.UpdateLocal(ctx, l.cfg.ID, func(old json.RawMessage) (json.RawMessage, error) {
		now := time.Now()
		d := decode(old)
		g = Grant{State: d.State} // set afresh: the store may run this again
		if d.live(now) && d.Holder != l.cfg.Holder {
			return old, nil
		}
		g.Held = true
		g.Unclean = old != nil && (d.Holder != "" || !readable(old))
		d.Holder, d.Until = l.cfg.Holder, now.Add(l.cfg.TTL).UnixMilli()
		return l.encode(d)
	})
	if err != nil {
		return Grant{}, fmt.Errorf("lease %q: acquire: %w", l.cfg.ID, err)
	}
	return g, nil
}

// Acquire is Take without telling whether the last holder released the
// lease.
func (l *Lease) Acquire(ctx context.Context) (held bool, state json.RawMessage, err error) {
	g, err := l.Take(ctx)
	return g.Held, g.State, err
}

// readable reports whether b is a lease document as this package writes
// them.
func readable(b json.RawMessage) bool {
	var d doc
	return json.Unmarshal(b, &d) == nil
}

// Renew extends the lease to now+TTL and saves state (nil keeps the
// saved one) if this holder still has it, even past its until as long as
// nobody took it meanwhile (whoever takes it writes its own name, and a
// release writes none, so the name still being this holder's proves
// nobody else held it). ErrLost when another took it or it was released.
func (l *Lease) Renew(ctx context.Context, state json.RawMessage) error {
	err := l.st.UpdateLocal(ctx, l.cfg.ID, func(old json.RawMessage) (json.RawMessage, error) {
		now := time.Now()
		d := decode(old)
		if d.Holder != l.cfg.Holder {
			return nil, ErrLost
		}
		d.Until = now.Add(l.cfg.TTL).UnixMilli()
		if state != nil {
			d.State = state
		}
		return l.encode(d)
	})
	if err != nil {
		return fmt.Errorf("lease %q: renew: %w", l.cfg.ID, err)
	}
	return nil
}

// Release saves state (nil keeps the saved one) and frees the lease if
// this holder still has it (as Renew: even past its until if nobody took
// it). ErrLost when it does not: then nothing is written, and the holder
// that has it keeps its own state.
func (l *Lease) Release(ctx context.Context, state json.RawMessage) error {
	err := l.st.UpdateLocal(ctx, l.cfg.ID, func(old json.RawMessage) (json.RawMessage, error) {
		d := decode(old)
		if d.Holder != l.cfg.Holder {
			return nil, ErrLost
		}
		d.Holder, d.Until = "", 0
		if state != nil {
			d.State = state
		}
		return l.encode(d)
	})
	if err != nil {
		return fmt.Errorf("lease %q: release: %w", l.cfg.ID, err)
	}
	return nil
}

// Info reads the lease as stored: its holder and until, even when that
// has passed (compare it with the time), or "" and the zero time when it
// is free (never taken, released, or unreadable).
func (l *Lease) Info(ctx context.Context) (holder string, until time.Time, err error) {
	var raw json.RawMessage
	if r, ok := l.st.(store.LocalReader); ok {
		raw, err = r.GetLocal(ctx, l.cfg.ID)
		if errors.Is(err, engine.ErrNotFound) {
			raw, err = nil, nil
		}
	} else {
		err = l.st.UpdateLocal(ctx, l.cfg.ID, func(old json.RawMessage) (json.RawMessage, error) {
			raw = old
			return old, nil // the same bytes: nothing is written
		})
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("lease %q: info: %w", l.cfg.ID, err)
	}
	d := decode(raw)
	if d.Holder == "" {
		return "", time.Time{}, nil
	}
	return d.Holder, time.UnixMilli(d.Until), nil
}

// Holder is this handle's holder name.
func (l *Lease) Holder() string { return l.cfg.Holder }

// TTL is how long an Acquire or Renew makes the lease last.
func (l *Lease) TTL() time.Duration { return l.cfg.TTL }
