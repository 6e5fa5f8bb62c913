package main

import (
	"errors"
	"fmt"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

// errNotAVault refuses to rebuild a database that holds documents but no
// sync parameters.
var errNotAVault = errors.New("the database holds documents but no LiveSync sync parameters, so it is not a vault this device can read; not rebuilding it (use another database, or empty this one on the server)")

// runRebuild is push --rebuild: the plugin's "Rebuild everything"
// (commonlib src/serviceModules/Rebuilder.ts, FORMAT.md §5.4 "Lock
// lifecycle") from the local replica. In the plugin's order:
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

	// The remote as it is, read with its own settings.
	probeRep, err := env.openTempReplica()
	if err != nil {
		return err
	}
	defer probeRep.Close()
	probe, err := c.connect(spec, probeRep, connectOptions{readOnly: true, create: true})
	existing := true
	switch {
	case errors.Is(err, errNoVaultYet):
		existing = false // nothing there to lose
	case err != nil:
		fmt.Fprintf(env.stderr, "not rebuilding %s: it cannot be read with this device's settings, so nothing was changed\n", spec)
		return err
	}
	if probe != nil {
		defer probe.Close()
	}
	if !existing && spec.kind == "couchdb" {
		// No sync parameters: a new database, or one that is not a
		// LiveSync vault this device can read. Only the first is rebuilt.
		cc, err := env.openCouch(spec, c.cf)
		if err != nil {
			return err
		}
		dbInfo, err := cc.db.Info(ctx)
		cc.db.Close()
		if err != nil && !errors.Is(err, engine.ErrNotFound) {
			return &remoteError{remote: spec.String(), err: err}
		}
		if err == nil && dbInfo.DocCount > 0 {
			return &remoteError{remote: spec.String(), err: errNotAVault}
		}
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
	lock := func(rem remote) error {
		_, err := rem.UpdateMilestone(ctx, node, func(m *negotiate.Milestone, _ bool) (bool, error) {
			m.Lock(node, rem.ChunkRange(), false)
			return true, nil
		})
		return err
	}

	// 1-2. Lock, then reset.
	if existing {
		if err := lock(probe); err != nil {
			return probe.wrapErr(err)
		}
		if err := probe.Reset(ctx); err != nil {
			fmt.Fprintf(env.stderr, "the reset failed, and %s is left locked; run livesync unlock %s to let devices sync with it again\n", spec, remoteArg(spec))
			return probe.wrapErr(err)
		}
	}

	// 3. The handshake of the empty remote: a new salt, this device's
	// settings as the vault's preferred ones.
	rem, err := c.connect(spec, rep, connectOptions{create: true, newVault: newVault})
	if err != nil {
		return err
	}
	defer rem.Close()

	// 4. Lock again.
	if err := lock(rem); err != nil {
		return rem.wrapErr(err)
	}
	if err := rem.ForgetCheckpoint(ctx); err != nil {
		return err
	}

	// 5. Push, twice.
	var pushed int
	for range 2 {
		pr := newProgress(env, c.cf.quiet, false)
		res, err := rem.Replicate(ctx, rep.st, node, replicate.Push, replicateOptions{progress: pr.update, packs: pr.pack, log: env.logger(c.cf)})
		pr.finish()
		if err != nil {
			return err
		}
		pushed += res.Push.DocsWritten
		if res.journal != nil {
			pushed += res.journal.RecordsSent
		}
	}
	st := rep.remote(rem.ID())
	st.LastPush = env.now()
	if err := rep.save(ctx); err != nil {
		return err
	}
	if c.cf.json {
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "push", "rebuilt": true, "remote": rem.ID(), "pushed": pushed, "locked": true})
		return nil
	}
	fmt.Fprintf(env.stderr, "rebuilt %s: %d %s pushed with a new salt; it is locked, and other devices must fetch it again (livesync pull %s --rebuild-local, or the plugin's fetch)\n",
		rem.ID(), pushed, plural(pushed, "document", "documents"), remoteArg(spec))
	return nil
}
