package vault

import (
	"context"
	"errors"
	"fmt"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// A locked remote: the plugin's "Rebuild everything" leaves the remote's
// milestone locked with only the rebuilding device accepted; every other
// device is refused until it fetches everything again into an empty
// replica, which makes it join (Attach with DefaultAdmit), or until
// someone unlocks the remote. Reading never joins: the lock guards
// against merging stale data, not against reading.

// ErrNotAVault refuses to rebuild a database that holds documents but no
// sync parameters.
var ErrNotAVault = errors.New("the database holds documents but no LiveSync sync parameters, so it is not a vault this device can read; not rebuilding it (use another database, or empty this one on the server)")

// LeftLockedError is a rebuild whose reset failed after the remote was
// locked: the remote stays locked until it is unlocked.
type LeftLockedError struct {
	Remote string
	Err    error
}

func (e *LeftLockedError) Error() string {
	return fmt.Sprintf("the reset of %s failed, and it is left locked: %v", e.Remote, e.Err)
}

func (e *LeftLockedError) Unwrap() error { return e.Err }

// Milestone reads the remote's milestone (nil: it has none).
func (l *Link) Milestone(ctx context.Context) (*negotiate.Milestone, error) {
	return negotiate.ReadMilestone(ctx, l.remote.Negotiate())
}

// Lock locks the remote for every device but this one (upstream's
// markRemoteLocked): the others must fetch it again before they sync.
func (v *Vault) Lock(ctx context.Context, l *Link) error {
	return v.lock(ctx, l.remote)
}

func (v *Vault) lock(ctx context.Context, r Remote) error {
	node, err := v.NodeID(ctx)
	if err != nil {
		return err
	}
	_, err = negotiate.Lock(ctx, r.Negotiate(), node, r.ChunkRange(), false, v.opts.Now())
	return err
}

// Unlock clears the remote's lock: every device may sync with it again.
// wasLocked is false, and nothing is written, when it was not locked.
func (v *Vault) Unlock(ctx context.Context, l *Link) (wasLocked bool, err error) {
	node, err := v.NodeID(ctx)
	if err != nil {
		return false, err
	}
	return negotiate.Unlock(ctx, l.remote.Negotiate(), node, l.remote.ChunkRange(), v.opts.Now())
}

// RebuildOptions are the choices of Rebuild.
type RebuildOptions struct {
	// NewVault are the settings of the rebuilt vault when the replica
	// holds none (see AttachOptions.NewVault).
	NewVault *livesync.Settings
	// Passphrase is asked when needed (see AttachOptions.Passphrase).
	Passphrase func() (string, error)
	// Confirm is asked, once the remote was read and before anything is
	// changed, whether to go on; an error stops the rebuild. Nil goes on.
	Confirm func(ctx context.Context, p RebuildPlan) error
	// Device overrides Options.Device.
	Device *negotiate.DeviceInfo
}

// RebuildPlan is what a rebuild is about to do.
type RebuildPlan struct {
	Remote string
	// Existing: the remote holds a vault, which is deleted.
	Existing bool
	// Docs counts the replica's documents, pushed with a new salt.
	Docs int64
}

// RebuildResult is what Rebuild did.
type RebuildResult struct {
	// Link is the rebuilt remote, attached.
	Link *Link
	// Pushed counts the documents (journal records) pushed.
	Pushed int
}

// Rebuild rebuilds the remote r from the replica (the plugin's "Rebuild
// everything", commonlib src/serviceModules/Rebuilder.ts): the remote is
// first read with its own settings through a throwaway replica, so a
// remote this device cannot read (wrong passphrase, wrong credentials) is
// never changed; then, after Confirm, it is locked, reset (everything in
// it deleted), attached again (a new salt, this vault's settings as the
// preferred ones), locked again and pushed twice. Other devices then find
// it locked without them and must fetch it again.
func (v *Vault) Rebuild(ctx context.Context, r Remote, o RebuildOptions) (RebuildResult, error) {
	existing, err := v.probeRemote(ctx, r, o)
	if err != nil {
		return RebuildResult{}, err
	}
	info, err := v.st.Info(ctx)
	if err != nil {
		return RebuildResult{}, err
	}
	if o.Confirm != nil {
		if err := o.Confirm(ctx, RebuildPlan{Remote: r.ID(), Existing: existing, Docs: info.DocCount}); err != nil {
			return RebuildResult{}, err
		}
	}
	if existing {
		if err := v.lock(ctx, r); err != nil {
			return RebuildResult{}, err
		}
		if err := r.Reset(ctx); err != nil {
			return RebuildResult{}, &LeftLockedError{Remote: r.ID(), Err: err}
		}
	}
	l, err := v.Attach(ctx, r, AttachOptions{Create: true, NewVault: o.NewVault, Passphrase: o.Passphrase, Device: o.Device})
	if err != nil {
		return RebuildResult{}, err
	}
	if err := v.Lock(ctx, l); err != nil {
		return RebuildResult{Link: l}, err
	}
	if err := l.ForgetCheckpoint(ctx); err != nil {
		return RebuildResult{Link: l}, err
	}
	res := RebuildResult{Link: l}
	for range 2 {
		sr, err := v.Push(ctx, l, SyncOptions{})
		if err != nil {
			return res, err
		}
		res.Pushed += sr.Push.DocsWritten
	}
	return res, nil
}

// probeRemote reads r with its own settings (else o.NewVault's) through
// a throwaway in-memory replica: existing reports a vault there; an
// error means the remote cannot be read with this device's credentials
// and passphrase, or holds documents that are not a vault this device
// can read.
func (v *Vault) probeRemote(ctx context.Context, r Remote, o RebuildOptions) (existing bool, err error) {
	st, err := store.NewMemory(store.Options{Name: "probe"})
	if err != nil {
		return false, err
	}
	defer st.Close()
	v.mu.Lock()
	p := v.passphrase
	v.mu.Unlock()
	probe, err := Open(ctx, st, Options{Passphrase: p, Device: v.opts.Device, Now: v.opts.Now, Log: v.log})
	if err != nil {
		return false, err
	}
	defer probe.Close()
	_, err = probe.Attach(ctx, r, AttachOptions{ReadOnly: true, Create: true, NewVault: o.NewVault, Passphrase: o.Passphrase, Device: o.Device})
	switch {
	case errors.Is(err, ErrNoVaultYet):
	case err != nil:
		return false, err
	default:
		return true, nil
	}
	// No sync parameters: a new database, or one that is not a LiveSync
	// vault this device can read. Only the first is rebuilt.
	if ep := r.Endpoint(); ep != nil {
		info, err := ep.Info(ctx)
		if err != nil && !errors.Is(err, engine.ErrNotFound) {
			return false, err
		}
		if err == nil && info.DocCount > 0 {
			return false, ErrNotAVault
		}
	}
	return false, nil
}
