package main

import (
	"errors"
	"fmt"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// errNotAVault refuses to rebuild a database that holds documents but no
// sync parameters.
var errNotAVault = errors.New("the database holds documents but no LiveSync sync parameters, so it is not a vault this device can read; not rebuilding it (use another database, or empty this one on the server)")

// runRebuild is push --rebuild: the plugin's "Rebuild everything"
// (commonlib src/serviceModules/Rebuilder.ts) from the local replica. In the plugin's order:
//
//  1. lock the remote (accepted_nodes becomes this device alone);
//  2. reset it: destroy and create the database again, or delete every
//     object under the bucket's prefix;
//  3. the handshake creates the sync parameters with a fresh salt, the
//     version document and the milestone;
//  4. lock it again (the reset dropped the milestone);
//  5. push everything, twice.
//
// Other devices then find the remote locked without them and must fetch
// it again (pull --rebuild-local here, "fetch" in the plugin), exactly as
// after the plugin's own rebuild. Before anything is changed, the remote
// is read with its own settings through a throwaway replica: a remote
// this device cannot read (wrong passphrase, wrong credentials) is never
// reset, and the user confirms (--yes in scripts).
func runRebuild(c *command, spec remoteSpec, newVault vaultConfig, yes bool) error {
	env, ctx := c.cliEnv, c.ctx
	rep, err := c.replica(false)
	if err != nil {
		return err
	}
	defer rep.Close()
	info, err := rep.st.Info(ctx)
	if err != nil {
		return err
	}

	existing, err := probeRemote(c, spec, rep)
	if err != nil {
		return err
	}
	if existing != nil {
		defer existing.Close()
	}
	question := fmt.Sprintf("Rebuild %s from this replica (%d %s)? Everything in it is deleted, and every other device must fetch it again",
		spec, info.DocCount, plural(int(info.DocCount), "document", "documents"))
	if err := env.confirm(yes, question); err != nil {
		return err
	}
	node, err := rep.nodeID(ctx)
	if err != nil {
		return err
	}

	// 1-2. Lock, then reset.
	if existing != nil {
		if _, err := negotiate.Lock(ctx, existing.Remote().Negotiate(), node, existing.Remote().ChunkRange(), false, env.now()); err != nil {
			return existing.wrap(err)
		}
		if err := existing.Remote().Reset(ctx); err != nil {
			fmt.Fprintf(env.stderr, "the reset failed, and %s is left locked; run livesync unlock %s to let devices sync with it again\n", spec, remoteArg(spec))
			return existing.wrap(err)
		}
	}

	// 3. The handshake of the empty remote: a new salt, this device's
	// settings as the vault's preferred ones.
	l, err := c.connect(spec, rep, connectOptions{create: true, newVault: newVault})
	if err != nil {
		return err
	}
	defer l.Close()

	// 4. Lock again.
	if _, err := negotiate.Lock(ctx, l.Remote().Negotiate(), node, l.Remote().ChunkRange(), false, env.now()); err != nil {
		return l.wrap(err)
	}
	if err := l.ForgetCheckpoint(ctx); err != nil {
		return l.wrap(err)
	}

	// 5. Push, twice.
	var pushed int
	for range 2 {
		res, err := c.replicate(rep, l, replicate.Push, vault.SyncOptions{})
		if err != nil {
			return err
		}
		pushed += res.Push.DocsWritten
		if res.Journal != nil {
			pushed += res.Journal.RecordsSent
		}
	}
	if c.cf.json {
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "push", "rebuilt": true, "remote": l.ID(), "pushed": pushed, "locked": true})
		return nil
	}
	fmt.Fprintf(env.stderr, "rebuilt %s: %d %s pushed with a new salt; it is locked, and other devices must fetch it again (livesync pull %s --rebuild-local, or the plugin's fetch)\n",
		l.ID(), pushed, plural(pushed, "document", "documents"), remoteArg(spec))
	return nil
}

// probeRemote reads the remote as it is, with its own settings, through a
// throwaway replica. It returns the remote attached read-only to that
// replica (the caller closes it), or nil when the remote holds no vault
// yet; a remote this device cannot read, or a database that holds
// documents but no vault, is an error.
func probeRemote(c *command, spec remoteSpec, rep *replica) (*link, error) {
	probeRep, err := c.openTempReplica()
	if err != nil {
		return nil, err
	}
	probe, err := c.connect(spec, probeRep, connectOptions{readOnly: true, create: true})
	switch {
	case err == nil:
		return &link{Link: probe.Link, v: probe.v, bucket: probe.bucket, closeAlso: probeRep}, nil
	case !errors.Is(err, vault.ErrNoVaultYet):
		probeRep.Close()
		fmt.Fprintf(c.stderr, "not rebuilding %s: it cannot be read with this device's settings, so nothing was changed\n", spec)
		return nil, err
	}
	probeRep.Close()
	if spec.kind != "couchdb" {
		return nil, nil
	}
	// No sync parameters: a new database, or one that is not a LiveSync
	// vault this device can read. Only the first is rebuilt.
	cc, err := c.openCouch(spec, c.cf)
	if err != nil {
		return nil, err
	}
	dbInfo, err := cc.db.Info(c.ctx)
	cc.db.Close()
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return nil, &remoteError{remote: spec.String(), err: err}
	}
	if err == nil && dbInfo.DocCount > 0 {
		return nil, &remoteError{remote: spec.String(), err: errNotAVault}
	}
	return nil, nil
}
