package vault

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/activity"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/fetch"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// ErrNoVault means the replica holds no vault yet: no settings were
// given to Open and no remote was attached (whose settings it would
// take).
var ErrNoVault = errors.New("vault: the local replica holds no vault yet: attach a remote first, or open it with settings for a new vault")

// ErrNeedPassphrase means the vault is end-to-end encrypted or has
// obfuscated paths and no passphrase was given.
var ErrNeedPassphrase = errors.New("vault: the vault is end-to-end encrypted or has obfuscated paths, and no passphrase was given")

// ErrClosed is returned by operations on a closed Vault.
var ErrClosed = errors.New("vault: closed")

// Options configure a Vault. The zero value opens the replica's vault as
// recorded, with every default.
type Options struct {
	// Settings are the settings of a new vault, recorded in the replica
	// when it holds none yet (their tweak values; never the passphrase).
	// Nil: the replica's record, or the settings of the first remote
	// attached. Ignored when the replica holds a vault.
	Settings *livesync.Settings
	// Passphrase is the vault's passphrase, needed when it is end-to-end
	// encrypted or obfuscates paths. It is checked against the replica's
	// own documents. Settings.Passphrase is used when this is empty.
	Passphrase string
	// Device is how this device names itself in remotes' milestones
	// (AttachOptions.Device overrides it per remote).
	Device negotiate.DeviceInfo
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives the engine's action logs (replication, journal, hunt);
	// nil discards. Nothing is decided from it: Watch reports what
	// happens.
	Log *slog.Logger
	// Fetch configures the fetcher of chunks read from remotes (zero:
	// upstream's defaults).
	Fetch fetch.Config
	// Hunt configures the hunt for the chunks of held files (zero: its
	// defaults).
	Hunt hunt.Config
	// PollInterval is the pause between two polls of a live sync with a
	// journal (default 10 s; it doubles after failures, up to 5 min).
	PollInterval time.Duration
}

// Vault is a LiveSync vault over a local replica. It is safe for
// concurrent use. Close releases it.
type Vault struct {
	st   store.Store
	opts Options
	log  *slog.Logger

	// The read path: one activity tracker, claim coordinator, fetcher
	// and wait layer for every Read.
	act     *activity.Tracker
	claims  *fetch.Coordinator
	fetcher *fetch.Fetcher
	layer   *fetch.Layer

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	ops    sync.WaitGroup // operations in progress (Close waits)

	mu         sync.Mutex
	closed     bool
	rec        *record
	passphrase string
	node       string
	links      []*Link // attached remotes, in attach order
	heldMu     sync.Mutex

	wmu      sync.Mutex
	watchers map[*watcher]struct{}
}

// Open returns the vault of the replica st. The replica keeps the
// vault's settings (without the passphrase) and what it knows of each
// remote in the _local document RecordID. Open does not close st; the
// caller does, after Close.
func Open(ctx context.Context, st store.Store, o Options) (*Vault, error) {
	if st == nil {
		return nil, errors.New("vault: Open needs a store")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rec, err := loadRecord(ctx, st)
	if err != nil {
		return nil, err
	}
	if rec == nil && o.Settings != nil {
		s := *o.Settings
		s.Passphrase = ""
		rec = &record{Tweaks: s.TweakValues()}
		if err := saveRecord(ctx, st, rec); err != nil {
			return nil, err
		}
	}
	p := o.Passphrase
	if p == "" && o.Settings != nil {
		p = o.Settings.Passphrase
	}
	v := &Vault{st: st, opts: o, log: log, rec: rec}
	if err := v.usePassphrase(ctx, p); err != nil {
		return nil, err
	}
	if err := v.startReads(); err != nil {
		return nil, err
	}
	v.ctx, v.cancel = context.WithCancel(context.Background())
	return v, nil
}

// startReads builds the read path: one fetcher and wait layer shared by
// every Read, the hunt and the claims.
func (v *Vault) startReads() error {
	v.act = activity.New(v.log)
	v.claims = fetch.NewCoordinator()
	f, err := fetch.New(v.opts.Fetch, fetch.Deps{Local: v.st, Activity: v.act, Claims: v.claims})
	if err != nil {
		v.claims.Close()
		v.act.Close()
		return err
	}
	v.fetcher = f
	l, err := fetch.NewLayer(fetch.LayerConfig{Logger: v.log}, fetch.LayerDeps{Local: v.st, Activity: v.act, Claims: v.claims, Fetcher: f})
	if err != nil {
		f.Close()
		v.claims.Close()
		v.act.Close()
		return err
	}
	v.layer = l
	return nil
}

// Close cancels what the vault runs (live syncs, hunts, reads waiting
// for chunks), waits for them, and releases the read path. It leaves no
// goroutine, claim or timer behind. It closes neither the store nor the
// attached remotes. Later calls do nothing.
func (v *Vault) Close() error {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil
	}
	v.closed = true
	v.mu.Unlock()
	v.cancel()
	v.ops.Wait()
	v.stopWatchers()
	v.layer.Close()
	v.fetcher.Close()
	v.claims.Close()
	v.act.Close()
	v.mu.Lock()
	v.links = nil
	v.mu.Unlock()
	return nil
}

// begin starts an operation: its context also ends at Close, and Close
// waits for end.
func (v *Vault) begin(ctx context.Context) (context.Context, func(), error) {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil, nil, ErrClosed
	}
	v.ops.Add(1)
	v.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(v.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
		v.ops.Done()
	}, nil
}

// Store is the vault's local replica.
func (v *Vault) Store() store.Store { return v.st }

// HasVault reports whether the replica holds a vault (its settings).
func (v *Vault) HasVault() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.rec != nil
}

// Settings returns the vault's settings without the passphrase, or
// ErrNoVault.
func (v *Vault) Settings() (livesync.Settings, error) {
	v.mu.Lock()
	rec := v.rec
	v.mu.Unlock()
	if rec == nil {
		return livesync.Settings{}, ErrNoVault
	}
	return SettingsOf(rec.Tweaks)
}

// TweakValues returns the vault's recorded tweak values, or ErrNoVault.
func (v *Vault) TweakValues() (negotiate.TweakValues, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.rec == nil {
		return negotiate.TweakValues{}, ErrNoVault
	}
	return v.rec.Tweaks, nil
}

// NeedsPassphrase reports whether the vault needs a passphrase (false
// while the replica holds no vault).
func (v *Vault) NeedsPassphrase() bool {
	s, err := v.Settings()
	return err == nil && NeedsPassphrase(s)
}

// SetPassphrase gives the vault's passphrase, checked against the
// replica's own documents (a *PassphraseError when they were written
// with another).
func (v *Vault) SetPassphrase(ctx context.Context, p string) error {
	return v.usePassphrase(ctx, p)
}

func (v *Vault) usePassphrase(ctx context.Context, p string) error {
	if p == "" {
		return nil
	}
	s, err := v.Settings()
	if err == nil && NeedsPassphrase(s) {
		s.Passphrase = p
		if err := checkLocalPassphrase(ctx, v.st, s); err != nil {
			return err
		}
	}
	v.mu.Lock()
	v.passphrase = p
	v.mu.Unlock()
	return nil
}

// settings returns the vault's settings with the passphrase; it fails
// with ErrNoVault, or ErrNeedPassphrase when one is needed and missing.
func (v *Vault) settings() (livesync.Settings, error) {
	s, err := v.Settings()
	if err != nil {
		return s, err
	}
	if NeedsPassphrase(s) {
		v.mu.Lock()
		s.Passphrase = v.passphrase
		v.mu.Unlock()
		if s.Passphrase == "" {
			return s, ErrNeedPassphrase
		}
	}
	return s, nil
}

// ids returns the document-id rules of the vault.
func (v *Vault) ids() (*docid.Mapper, error) {
	s, err := v.settings()
	if err != nil {
		return nil, err
	}
	return IDMapper(s), nil
}

// IDMapper returns the document-id rules of settings s.
func IDMapper(s livesync.Settings) *docid.Mapper {
	o := docid.Options{CaseSensitive: s.CaseSensitive}
	if s.PathObfuscation {
		o.ObfuscationPassphrase = s.Passphrase
	}
	return docid.New(o)
}

// NodeID returns this device's node id in the replica, creating it on
// first use.
func (v *Vault) NodeID(ctx context.Context) (string, error) {
	v.mu.Lock()
	node := v.node
	v.mu.Unlock()
	if node != "" {
		return node, nil
	}
	node, err := NodeID(ctx, v.st)
	if err != nil {
		return "", err
	}
	v.mu.Lock()
	v.node = node
	v.mu.Unlock()
	return node, nil
}

// Remote returns what the replica remembers of the remote id (nil: never
// synced).
func (v *Vault) Remote(id string) *RemoteState {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.rec == nil || v.rec.Remotes[id] == nil {
		return nil
	}
	s := *v.rec.Remotes[id]
	return &s
}

// Remotes returns what the replica remembers of every remote, by ID.
func (v *Vault) Remotes() map[string]RemoteState {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]RemoteState{}
	if v.rec != nil {
		for id, s := range v.rec.Remotes {
			out[id] = *s
		}
	}
	return out
}

// updateRemote changes the replica's memory of remote id with fn and
// saves the record.
func (v *Vault) updateRemote(ctx context.Context, id string, fn func(*RemoteState)) error {
	v.mu.Lock()
	if v.rec == nil {
		v.mu.Unlock()
		return ErrNoVault
	}
	if v.rec.Remotes == nil {
		v.rec.Remotes = map[string]*RemoteState{}
	}
	s := v.rec.Remotes[id]
	if s == nil {
		s = &RemoteState{}
		v.rec.Remotes[id] = s
	}
	fn(s)
	b, err := json.Marshal(v.rec)
	v.mu.Unlock()
	if err != nil {
		return err
	}
	return v.st.PutLocal(ctx, RecordID, b)
}

// Create records s as the settings of the replica's vault when it holds
// none yet (a new vault; a replica holds one vault, so it does nothing
// otherwise), and takes s.Passphrase as the passphrase when none was
// given.
func (v *Vault) Create(ctx context.Context, s livesync.Settings) error {
	p := s.Passphrase
	s.Passphrase = ""
	if err := v.setVault(ctx, s.TweakValues()); err != nil {
		return err
	}
	v.mu.Lock()
	has := v.passphrase != ""
	v.mu.Unlock()
	if p == "" || has {
		return nil
	}
	return v.usePassphrase(ctx, p)
}

// setVault records the vault's settings once: a replica holds one vault.
func (v *Vault) setVault(ctx context.Context, tv negotiate.TweakValues) error {
	v.mu.Lock()
	if v.rec != nil {
		v.mu.Unlock()
		return nil
	}
	v.rec = &record{Tweaks: tv}
	b, err := json.Marshal(v.rec)
	v.mu.Unlock()
	if err != nil {
		return err
	}
	return v.st.PutLocal(ctx, RecordID, b)
}

// IsEmpty reports whether the replica holds no document at all (deleted
// ones included): nothing of it could be merged into a remote.
func (v *Vault) IsEmpty(ctx context.Context) (bool, error) {
	page, err := v.st.Changes(ctx, engine.ChangesRequest{Limit: 1})
	if err != nil {
		return false, err
	}
	return len(page.Results) == 0, nil
}
