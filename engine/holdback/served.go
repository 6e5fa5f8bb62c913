package holdback

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/purgatory"
	"github.com/livesync-go/livesync-go/engine/store"
)

// ServedConfig configures a Served database.
type ServedConfig struct {
	// Name is the database's name, for errors.
	Name string
	// Holdback configures the hold-back (its Logger is set to Log).
	Holdback Config
	// Passphrase is the vault passphrase ("" if the configuration gives
	// none). Secret: never logged.
	Passphrase string
	// Owner names the user a write is made for (the authenticated client
	// of the request in ctx; "" for the server's own writes), whose held
	// documents count against the per-user limits. nil: no owner.
	Owner func(ctx context.Context) string
	// Log receives the hold-back's and the rebuilds' records; nil
	// discards.
	Log *slog.Logger
	// Shared says the inner store is shared with other processes that
	// serve the same database (relays in front of one CouchDB). It must
	// then be a store.LocalUpdater. The purgatory state is written only
	// while this Served is the leader (SetHunter(…, true)), and Refresh
	// adopts the holds of the others; see Refresh.
	Shared bool
}

// ServedHooks plug what runs beside a served database into it (the
// relay's bridging of the database to its upstreams).
type ServedHooks struct {
	// Hunter hunts the missing chunks of held documents; nil: none.
	Hunter purgatory.Hunter
	// ParamsChanged is called after a write of the sync parameters.
	ParamsChanged func(ctx context.Context)
	// SettingsChanged is called after a write of the milestone.
	SettingsChanged func()
	// Stop is called first by Close, without the database's lock (what
	// it stops may still write through the database).
	Stop func()
}

// Served is one served vault database: a store.Store that forwards to
// the database's current hold-back (a Store over inner). With a
// passphrase, the hold-back can decrypt obfuscated metadata only once
// the vault's salt exists; the first client writes it (the sync
// parameters) after the database was opened, so a write of that
// document, or of the milestone whose preferred settings shape the
// codec, rebuilds the hold-back with the vault's codec. The old
// hold-back saves its state and the new one resumes it, so nothing held
// is lost. Write calls hold mu for reading and the rebuild holds it for
// writing, so no write meets the closed one.
//
// NewServed reads the vault's codec; Open builds the hold-back with the
// hooks (which may be built over the Served in between).
type Served struct {
	cfg   ServedConfig
	inner store.Store
	hooks ServedHooks

	cur atomic.Pointer[Store]
	mu  sync.RWMutex
	// Guarded by mu.
	codec  *livesync.Codec // the vault's codec; nil: none (no passphrase or no salt yet)
	salt   []byte          // the salt of the codec in use; nil: no codec
	carry  Stats           // counters of hold-backs replaced by a rebuild
	closed bool
	leader bool // Shared: this process saves the purgatory state (SetHunter)

	// amu guards the arrivals kept during a rebuild (see beginSwap); a
	// leaf lock.
	amu       sync.Mutex
	recording bool
	pending   []engine.ChunkID

	// rsem serialises Refresh and SetHunter, and guards what Refresh
	// saw: a lock that a caller stops waiting for when its context ends
	// (a Refresh stuck on an unresponsive store must not hold a lost
	// leader's SetHunter beyond that caller's deadline).
	rsem      chan struct{}
	synced    bool   // a Refresh compared the area with the hold-back
	seenIndex []byte // the holding index as the last Refresh read it
	seenState []byte // contentKey of the purgatory state this hold-back restored
	// seenStateRaw is the purgatory state as the last Refresh read it.
	seenStateRaw []byte
}

var _ store.Store = (*Served)(nil)

// NewServed returns the served database over inner (which stays open
// when the Served closes: it belongs to the caller) with the vault's
// codec if the passphrase is configured and the vault has a salt. Call
// Open before serving it.
func NewServed(ctx context.Context, inner store.Store, cfg ServedConfig) *Served {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Holdback.Logger = cfg.Log
	v := &Served{cfg: cfg, inner: inner, rsem: make(chan struct{}, 1)}
	if cfg.Passphrase != "" {
		c, salt, err := vaultCodec(ctx, inner, cfg.Passphrase)
		switch {
		case err != nil:
			cfg.Log.Warn("the vault's settings could not be read; obfuscated metadata passes unheld until a client writes them", "err", err)
		case c == nil:
			cfg.Log.Info("passphrase configured; waiting for the vault's salt (written by the first client)")
		default:
			v.codec, v.salt = c, salt
		}
	}
	return v
}

// Open builds the hold-back with the hooks.
func (v *Served) Open(h ServedHooks) error {
	v.hooks = h
	hb, err := v.newHold(context.Background(), v.codec, h.Hunter)
	if err != nil {
		return fmt.Errorf("database %q: %w", v.cfg.Name, err)
	}
	v.cur.Store(hb)
	v.seenState = hb.restoredKey
	return nil
}

// noClose keeps a hold-back from closing the database it wraps: a
// Served replaces its hold-back over the same database.
type noClose struct{ store.Store }

func (noClose) Close() error { return nil }

// Codec returns the vault's codec and its salt (nil without the
// passphrase or before the vault has a salt).
func (v *Served) Codec() (*livesync.Codec, []byte) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.codec, v.salt
}

// HasPassphrase reports whether a passphrase is configured (the Mode
// says whether it is in use yet).
func (v *Served) HasPassphrase() bool { return v.cfg.Passphrase != "" }

// vaultCodec builds the vault's codec from the passphrase, the salt in
// the sync parameters and the settings in the milestone's PREFERRED tweak
// values (without a milestone, encryption and path obfuscation on:
// decoding accepts every scheme). It returns a nil codec while the vault
// has no salt.
func vaultCodec(ctx context.Context, st store.Store, passphrase string) (*livesync.Codec, []byte, error) {
	raw, err := store.LiveLocal(ctx, st, negotiate.SyncParametersLocalID)
	if raw == nil || err != nil {
		return nil, nil, err
	}
	salt, err := negotiate.SaltOf(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("the sync parameters: %w", err)
	}
	if salt == nil {
		return nil, nil, nil
	}
	s := livesync.Settings{Passphrase: passphrase, Encrypt: true, PathObfuscation: true}
	if raw, err := store.LiveLocal(ctx, st, negotiate.MilestoneLocalID); err == nil && raw != nil {
		if m, err := negotiate.ParseMilestone(raw); err == nil {
			if pref, ok := m.TweakValues[negotiate.PreferredNode]; ok {
				if fs, err := livesync.FromTweakValues(s, pref); err == nil {
					s = fs
				}
			}
		}
	}
	c, err := livesync.New(livesync.Config{Settings: s, Salt: salt})
	if err != nil {
		return nil, nil, err
	}
	return c, salt, nil
}

// rekey rebuilds the hold-back with the vault's codec when the salt it
// was built with changed (the first client wrote it, or a rebuilt vault
// replaced it), or the settings the milestone's PREFERRED gives it did
// (a client writes the sync parameters before the milestone, and a
// bridge may adopt an upstream's milestone).
func (v *Served) rekey(ctx context.Context) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return
	}
	log := v.cfg.Log
	codec, salt, err := vaultCodec(ctx, v.inner, v.cfg.Passphrase)
	if err != nil {
		log.Warn("the vault's sync parameters could not be read; the hold-back keeps its current mode", "err", err)
		return
	}
	if codec == nil || bytes.Equal(salt, v.salt) && v.codec != nil && v.codec.Settings() == codec.Settings() {
		return
	}
	old := v.cur.Load()
	v.carry = addStats(v.carry, old.Stats())
	v.beginSwap()
	if err := old.Close(); err != nil {
		log.Warn("saving the hold-back before the rebuild", "err", err)
	}
	// Not the request's context: a client that goes away must not
	// leave the database without a hold-back.
	hb, err := v.newHold(context.Background(), codec, v.hooks.Hunter)
	if err != nil {
		log.Error("the hold-back could not be rebuilt with the vault's codec; serving without it", "err", err)
		codec = nil
		if hb, err = v.newHold(context.Background(), nil, v.hooks.Hunter); err != nil {
			log.Error("the hold-back could not be reopened; writes fail until a restart", "err", err)
			v.endSwap(nil)
			return
		}
		salt = nil
	} else {
		log.Info("the vault's salt is known: obfuscated metadata is now decrypted in memory to decide hold-back")
	}
	v.endSwap(hb)
	v.salt, v.codec = salt, codec
}

// addStats adds b's counters to a's (gauges are taken from b).
func addStats(a, b Stats) Stats {
	a.Mode, a.Held, a.Documents, a.HeldByOwner = b.Mode, b.Held, b.Documents, b.HeldByOwner
	a.MaxHeldDocuments, a.MaxHeldPerOwner = b.MaxHeldDocuments, b.MaxHeldPerOwner
	a.Refused += b.Refused
	a.WrittenThrough += b.WrittenThrough
	a.Holds += b.Holds
	a.Released += b.Released
	a.Dropped += b.Dropped
	a.Unreadable += b.Unreadable
	a.Undecodable += b.Undecodable
	a.SaveErrors += b.SaveErrors
	ap, bp := &a.Purgatory, b.Purgatory
	ap.Active, ap.SoftExpired, ap.Remembered = bp.Active, bp.SoftExpired, bp.Remembered
	ap.Releases += bp.Releases
	ap.SoftExpiries += bp.SoftExpiries
	ap.Expiries += bp.Expiries
	ap.Revivals += bp.Revivals
	ap.VerifyFailures += bp.VerifyFailures
	ap.ReleaseErrors += bp.ReleaseErrors
	ap.Superseded += bp.Superseded
	return a
}

// Stats are the hold-back's gauges and counters, counting since the
// Served was opened (across rebuilds).
func (v *Served) Stats() Stats {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return addStats(v.carry, v.cur.Load().Stats())
}

// HeldFirst lists at most limit held documents with their reasons, the
// first by id, and how many are held in all.
func (v *Served) HeldFirst(limit int) ([]purgatory.HeldDoc, int) {
	return v.cur.Load().HeldFirst(limit)
}

// Mode says how the hold-back judges this database's metadata.
func (v *Served) Mode() Mode { return v.cur.Load().Mode() }

// Close calls the Stop hook, then closes the hold-back, which saves its
// purgatory state. The inner store stays open.
func (v *Served) Close() error {
	if v.hooks.Stop != nil {
		v.hooks.Stop() // before v.mu: what it stops writes through v
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil
	}
	v.closed = true
	return v.cur.Load().Close()
}

// Settle writes the releases that are due now: Store.Settle on the
// current hold-back.
func (v *Served) Settle(ctx context.Context) error {
	return do(v, func(s *Store) error { return s.Settle(ctx) })
}

// write runs a write call on the current hold-back.
func write[T any](v *Served, f func(*Store) (T, error)) (T, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return f(v.cur.Load())
}

// do runs a write call without a result on the current hold-back.
func do(v *Served, f func(*Store) error) error {
	_, err := write(v, func(s *Store) (struct{}, error) { return struct{}{}, f(s) })
	return err
}

// owned names the request's user as the owner of its writes.
func (v *Served) owned(ctx context.Context) context.Context {
	if v.cfg.Owner == nil {
		return ctx
	}
	return WithOwner(ctx, v.cfg.Owner(ctx))
}
