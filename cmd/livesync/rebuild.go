package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/livesync-go/livesync-go/engine/vault"
)

// runRebuild is push --rebuild: the plugin's "Rebuild everything" from
// the local replica (vault.Vault.Rebuild: the remote is read first with
// its own settings, then locked, reset, given a new salt, locked again
// and pushed twice), with the CLI's confirmation (--yes in scripts) and
// words. Other devices must then fetch the remote again (pull
// --rebuild-local here, "fetch" in the plugin).
func runRebuild(c *command, spec remoteSpec, newVault vaultConfig, yes bool) error {
	rep, err := c.replica(false)
	if err != nil {
		return err
	}
	defer rep.Close()
	r, bucket, err := c.openRemote(spec)
	if err != nil {
		return rebuildErr(c, rep, spec, bucket, false, err)
	}
	defer r.Close()
	cfg, err := c.config()
	if err != nil {
		return err
	}
	dev := deviceInfoFor(cfg.DeviceName, rep, spec)
	confirmed := false
	o := vault.RebuildOptions{Device: &dev, NewVault: newVaultOf(spec, newVault),
		Passphrase: func() (string, error) { return c.passphraseFor(&spec, c.cf) },
		Confirm: func(_ context.Context, p vault.RebuildPlan) error {
			confirmed = true
			return c.confirm(yes, fmt.Sprintf("Rebuild %s from this replica (%d %s)? Everything in it is deleted, and every other device must fetch it again",
				spec, p.Docs, plural(int(p.Docs), "document", "documents")))
		}}
	stop := c.showSyncs(rep, r.ID(), bucket, false)
	res, err := rep.v.Rebuild(c.ctx, r, o)
	stop()
	if res.Link != nil {
		defer rep.v.Detach(res.Link)
	}
	if err != nil {
		return rebuildErr(c, rep, spec, bucket, confirmed, err)
	}
	if c.cf.json {
		writeJSON(c.stdout, map[string]any{"ok": true, "command": "push", "rebuilt": true, "remote": r.ID(), "pushed": res.Pushed, "locked": true})
		return nil
	}
	fmt.Fprintf(c.stderr, "rebuilt %s: %d %s pushed with a new salt; it is locked, and other devices must fetch it again (livesync pull %s --rebuild-local, or the plugin's fetch)\n",
		r.ID(), res.Pushed, plural(res.Pushed, "document", "documents"), remoteArg(spec))
	return nil
}

// rebuildErr says what a failed rebuild left: a remote that could not be
// read was not changed, a failed reset left it locked.
func rebuildErr(c *command, rep *replica, spec remoteSpec, bucket string, confirmed bool, err error) error {
	var ue usageError
	var ll *vault.LeftLockedError
	switch {
	case errors.Is(err, context.Canceled):
		return err
	case errors.As(err, &ll):
		fmt.Fprintf(c.stderr, "the reset failed, and %s is left locked; run livesync unlock %s to let devices sync with it again\n", spec, remoteArg(spec))
		err = ll.Err
	case !confirmed && !errors.Is(err, vault.ErrNotAVault):
		fmt.Fprintf(c.stderr, "not rebuilding %s: it cannot be read with this device's settings, so nothing was changed\n", spec)
	}
	var pe *vault.PassphraseError
	if errors.As(err, &ue) || (errors.As(err, &pe) && pe.Remote == "") {
		return rep.fileErr("", err)
	}
	return &remoteError{remote: spec.String(), err: remoteErr(err), bucket: bucket}
}
