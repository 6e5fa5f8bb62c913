package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

var (
	// ErrNoVaultYet is a read-only attach to a remote without sync
	// parameters: nothing was ever written there.
	ErrNoVaultYet = errors.New("the remote holds no vault yet (it has no sync parameters), so there is nothing to read; push a vault into it first")
	// ErrRekeyedMeanwhile is a salt that changed between the read-only
	// and the writing handshake.
	ErrRekeyedMeanwhile = errors.New("the remote's salt changed while connecting (another device rebuilt it just now); try again")
)

// DefaultSettings are the settings of a new vault that nothing else
// chooses: upstream's defaults with the chunk size of the plugin's setup
// URI presets, customChunkSize 60 (self-hosted CouchDB), or 10 on a
// journal (object storage).
func DefaultSettings(journal bool) livesync.Settings {
	if journal {
		return livesync.Settings{CustomChunkSize: 10}
	}
	return livesync.Settings{CustomChunkSize: 60}
}

// AttachOptions are what Attach asks of the remote.
type AttachOptions struct {
	// Create creates a missing database (push, sync).
	Create bool
	// ReadOnly attaches without writing anything to the remote: no
	// database, salt or milestone entry, and a locked remote is read
	// without joining it. Syncs through the link leave no checkpoint on
	// the remote and cannot push.
	ReadOnly bool
	// NewVault are the settings of a new vault, used when the replica
	// holds no vault: given, they win over the remote's preferred
	// settings; nil takes the remote's, else DefaultSettings.
	NewVault *livesync.Settings
	// Passphrase is asked when the vault needs one and the Vault has
	// none; nil means ErrNeedPassphrase.
	Passphrase func() (string, error)
	// Admit decides whether this device joins a remote that is locked
	// for it (rebuilt or cleaned by another device): it returns true to
	// join, or an error to refuse. Nil means DefaultAdmit.
	Admit func(ctx context.Context, l Locked) (join bool, err error)
	// Check relaxes the milestone checks.
	Check negotiate.CheckOptions
	// Device overrides Options.Device for this remote.
	Device *negotiate.DeviceInfo
}

// Locked is a remote that is locked for this device, as Admit sees it.
type Locked struct {
	Remote string
	// Cleaned: cleaned up rather than rebuilt.
	Cleaned bool
	// Milestone is the remote's milestone (its accepted devices).
	Milestone *negotiate.Milestone
	// Empty: the replica holds no document at all.
	Empty bool
}

// LockedError refuses a replica that holds documents on a remote that
// was rebuilt (locked) or cleaned by another device and does not list
// this device as accepted: its data predates the rebuild and must not be
// merged into the new vault. It wraps negotiate.ErrNodeLocked or
// ErrNodeCleaned.
type LockedError struct {
	Locked
}

func (e *LockedError) Error() string {
	what := "rebuilt"
	if e.Cleaned {
		what = "cleaned up"
	}
	by := ""
	if a := AcceptedDevices(e.Milestone); len(a) > 0 {
		by = " by " + strings.Join(a, ", ")
	}
	return fmt.Sprintf("the remote is locked: it was %s%s, and this local replica holds documents from before that, which must not be merged into it", what, by)
}

func (e *LockedError) Unwrap() error {
	if e.Cleaned {
		return negotiate.ErrNodeCleaned
	}
	return negotiate.ErrNodeLocked
}

// DefaultAdmit is the plugin's fetch path: an empty replica joins, one
// that holds documents is refused with a *LockedError.
func DefaultAdmit(_ context.Context, l Locked) (bool, error) {
	if !l.Empty {
		return false, &LockedError{l}
	}
	return true, nil
}

// AcceptedDevices names the accepted devices of m: the device name from
// node_info with the node id, or the node id alone
// (negotiate.AcceptedDevices).
func AcceptedDevices(m *negotiate.Milestone) []string { return negotiate.AcceptedDevices(m) }

// Attach connects the remote r to the vault: it works out the vault's
// settings (the replica's, else o.NewVault, else the remote's preferred
// ones), runs the LiveSync handshake over r.Negotiate() — first without
// writing anything, with the passphrase proven against the remote's
// data, and only then the writing handshake (registering or joining this
// device) — and registers the remote's chunk source for reads and hunts.
// The settings are recorded in the replica. A refused or failed attempt
// leaves no trace on the remote.
func (v *Vault) Attach(ctx context.Context, r Remote, o AttachOptions) (*Link, error) {
	if !remotesLinked {
		return nil, errNoRemotes
	}
	ctx, end, err := v.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	port := r.Negotiate()
	pref, hasPref, err := preferred(ctx, port)
	if err != nil {
		return nil, err
	}
	tv, settings, err := v.vaultSettings(pref, hasPref, o.NewVault, r.Objects() != nil)
	if err != nil {
		return nil, err
	}
	if settings.Passphrase, err = v.passphraseFor(ctx, settings, o); err != nil {
		return nil, err
	}
	node, err := v.NodeID(ctx)
	if err != nil {
		return nil, err
	}
	hs := negotiate.HandshakeOptions{NodeID: node, Range: r.ChunkRange(), Device: v.device(o), Settings: tv,
		CreateIfMissing: o.Create, Check: o.Check, Now: v.opts.Now}
	l, err := v.handshake(ctx, r, hs, settings, o)
	if err != nil {
		return nil, err
	}
	if err := v.setVault(ctx, tv); err != nil {
		return nil, err
	}
	if settings.Passphrase != "" {
		v.mu.Lock()
		v.passphrase = settings.Passphrase
		v.mu.Unlock()
	}
	if obj := r.Objects(); obj != nil {
		if s := v.Remote(r.ID()); s == nil || s.JournalID != obj.ID() || s.JournalPrefix != obj.Prefix() {
			err := v.updateRemote(ctx, r.ID(), func(s *RemoteState) { s.JournalID, s.JournalPrefix = obj.ID(), obj.Prefix() })
			if err != nil {
				return nil, err
			}
		}
	}
	v.addLink(l)
	return l, nil
}

// handshake runs the read-only handshake, proves the passphrase, asks
// Admit about a lock, then runs the writing handshake (unless
// o.ReadOnly), and returns the link.
func (v *Vault) handshake(ctx context.Context, r Remote, hs negotiate.HandshakeOptions, settings livesync.Settings, o AttachOptions) (*Link, error) {
	port := r.Negotiate()
	probe := hs
	probe.ReadOnly = true
	first, err := negotiate.Handshake(ctx, port, probe)
	if err != nil {
		return nil, err
	}
	l := &Link{v: v, remote: r, readOnly: o.ReadOnly}
	if first.Salt != nil || !NeedsPassphrase(settings) {
		if err := l.open(settings, first.Salt, first.Params); err != nil {
			return nil, err
		}
		if err := l.checkPassphrase(ctx); err != nil {
			return nil, err
		}
	}
	if o.ReadOnly {
		if l.codec == nil || !first.Exists {
			return nil, ErrNoVaultYet
		}
		return l, nil
	}
	if hs.AllowJoin, err = v.admit(ctx, r, first, o); err != nil {
		return nil, err
	}
	res, err := negotiate.Handshake(ctx, port, hs)
	if err != nil {
		return nil, err
	}
	if first.Salt != nil && !bytes.Equal(first.Salt, res.Salt) {
		return nil, ErrRekeyedMeanwhile
	}
	if l.codec == nil || first.Salt == nil {
		if err := l.open(settings, res.Salt, res.Params); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// admit asks o.Admit whether to join a remote locked for this device.
func (v *Vault) admit(ctx context.Context, r Remote, first negotiate.HandshakeResult, o AttachOptions) (bool, error) {
	k := first.Verdict.Kind
	if k != negotiate.VerdictNodeLocked && k != negotiate.VerdictNodeCleaned {
		return false, nil
	}
	empty, err := v.IsEmpty(ctx)
	if err != nil {
		return false, err
	}
	fn := o.Admit
	if fn == nil {
		fn = DefaultAdmit
	}
	return fn(ctx, Locked{Remote: r.ID(), Cleaned: k == negotiate.VerdictNodeCleaned, Milestone: first.Milestone, Empty: empty})
}

// preferred reads the vault's preferred settings from the remote's
// milestone (absent on a new remote).
func preferred(ctx context.Context, p negotiate.Port) (negotiate.TweakValues, bool, error) {
	m, err := negotiate.ReadMilestone(ctx, p)
	if err != nil || m == nil {
		if errors.Is(err, negotiate.ErrNoDatabase) {
			return negotiate.TweakValues{}, false, nil
		}
		return negotiate.TweakValues{}, false, err
	}
	tv, ok := m.TweakValues[negotiate.PreferredNode]
	return tv, ok, nil
}

// vaultSettings decides the settings of the vault on a remote whose
// milestone prefers pref (hasPref false: none). It returns the tweak
// values to announce and the settings without a passphrase.
func (v *Vault) vaultSettings(pref negotiate.TweakValues, hasPref bool, explicit *livesync.Settings, journal bool) (negotiate.TweakValues, livesync.Settings, error) {
	var tv negotiate.TweakValues
	if rec, err := v.TweakValues(); err == nil {
		tv = rec
	} else {
		switch {
		case explicit != nil:
			s := *explicit
			s.Passphrase = ""
			tv = s.TweakValues()
		case !hasPref:
			tv = DefaultSettings(journal).TweakValues()
		default:
			tv = pref
		}
	}
	s, err := SettingsOf(tv)
	return tv, s, err
}

// passphraseFor returns the passphrase when settings need one: the
// Vault's, else o.Passphrase's, checked against the replica's own data.
func (v *Vault) passphraseFor(ctx context.Context, settings livesync.Settings, o AttachOptions) (string, error) {
	if !NeedsPassphrase(settings) {
		return "", nil
	}
	v.mu.Lock()
	p := v.passphrase
	v.mu.Unlock()
	if p != "" {
		return p, nil
	}
	if o.Passphrase == nil {
		return "", ErrNeedPassphrase
	}
	p, err := o.Passphrase()
	if err != nil {
		return "", err
	}
	if p == "" {
		return "", ErrNeedPassphrase
	}
	if v.HasVault() {
		settings.Passphrase = p
		if err := checkLocalPassphrase(ctx, v.st, settings); err != nil {
			return "", err
		}
	}
	return p, nil
}

// device is how this device names itself on the remote.
func (v *Vault) device(o AttachOptions) negotiate.DeviceInfo {
	if o.Device != nil {
		return *o.Device
	}
	return v.opts.Device
}

// open builds the link's codec (and a journal remote's journal) with the
// remote's salt.
func (l *Link) open(settings livesync.Settings, salt []byte, params negotiate.SyncParameters) error {
	codec, err := livesync.New(livesync.Config{Settings: settings, Salt: salt})
	if err != nil {
		return err
	}
	l.codec = codec
	if l.remote.Objects() != nil {
		return l.openJournal(settings, salt, params)
	}
	l.chunks = l.remote.Chunks(codec)
	return nil
}

// checkPassphrase proves the passphrase against the remote's own data
// before anything is written anywhere (a push with a wrong passphrase
// would upload data no other device can read).
func (l *Link) checkPassphrase(ctx context.Context) error {
	if !NeedsPassphrase(l.codec.Settings()) {
		return nil
	}
	if l.remote.Objects() != nil {
		return l.checkJournalPassphrase(ctx)
	}
	ep := l.remote.Endpoint()
	if ep == nil {
		return nil
	}
	err := CheckEndpointPassphrase(ctx, ep, l.codec)
	var e *engine.Error
	if errors.Is(err, engine.ErrDecrypt) && errors.As(err, &e) {
		return &PassphraseError{Remote: l.ID(), DocID: e.DocID}
	}
	return err
}
