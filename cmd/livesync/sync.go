package main

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/livesync-go/livesync-go/engine/replicate"
)

func runPull(env *cliEnv, args []string) error { return runReplication(env, args, replicate.Pull) }
func runPush(env *cliEnv, args []string) error { return runReplication(env, args, replicate.Push) }
func runSync(env *cliEnv, args []string) error { return runReplication(env, args, replicate.Sync) }

// runReplication is pull, push and sync: one-shot, or live with --watch
// until Ctrl-C.
func runReplication(env *cliEnv, args []string, dir replicate.Direction) error {
	name := dir.String()
	fs := newFlagSet(env, name, name+" [REMOTE] [flags]")
	var cf commonFlags
	addCommonFlags(fs, &cf)
	var vf vaultFlags
	if dir&replicate.Push != 0 {
		addVaultFlags(fs, &vf)
	}
	watch := fs.Bool("watch", false, "keep replicating until Ctrl-C, reconnecting after failures")
	var metadataOnly *bool
	if dir&replicate.Pull != 0 {
		metadataOnly = fs.Bool("metadata-only", false, "pull metadata without chunks (LiveSync's readChunksOnline); cat --remote fetches them on demand")
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	env.json = cf.json
	if len(pos) > 1 {
		return usageError{fmt.Sprintf("%s takes at most one remote, got %d arguments", name, len(pos))}
	}
	cfg, err := env.loadConfig(cf.config)
	if err != nil {
		return err
	}
	spec, err := resolveRemote(cfg, first(pos))
	if err != nil {
		return err
	}
	rep, err := env.openReplica(storePath(cf.store, cfg), true)
	if err != nil {
		return err
	}
	defer rep.Close()
	o := connectOptions{flags: cf, create: dir&replicate.Push != 0, newVault: vf.config(fs), deviceName: cfg.DeviceName}
	rem, err := env.connectRetry(spec, rep, o, *watch)
	if err != nil {
		return err
	}
	defer rem.Close()
	node, err := rep.nodeID(env.ctx)
	if err != nil {
		return err
	}
	pr := newProgress(env, cf.quiet, *watch)
	ro := replicateOptions{live: *watch, progress: pr.update, log: env.logger(cf)}
	if *watch {
		ro.progress, ro.written = nil, pr.written
	}
	if metadataOnly != nil {
		ro.metadataOnly = *metadataOnly
	}
	if *watch {
		fmt.Fprintf(env.stderr, "watching %s (%s); Ctrl-C to stop\n", rem.ID(), name)
	}
	start := env.now()
	res, err := rem.Replicate(env.ctx, rep.st, node, dir, ro)
	pr.finish()
	if *watch {
		if errors.Is(err, env.ctx.Err()) && env.ctx.Err() != nil {
			fmt.Fprintln(env.stderr, "stopped")
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	st := rep.remote(rem.ID())
	now := env.now()
	if dir&replicate.Pull != 0 {
		st.LastPull, st.LastPullSeq = now, res.Pull.LastSeq
	}
	if dir&replicate.Push != 0 {
		st.LastPush, st.LastPushSeq = now, res.Push.LastSeq
	}
	if err := rep.save(env.ctx); err != nil {
		return err
	}
	elapsed := now.Sub(start)
	if cf.json {
		out := map[string]any{"ok": true, "command": name, "remote": rem.ID(), "store": rep.path, "elapsed_ms": elapsed.Milliseconds()}
		if dir&replicate.Pull != 0 {
			out["pulled"] = progressJSON(res.Pull)
		}
		if dir&replicate.Push != 0 {
			out["pushed"] = progressJSON(res.Push)
		}
		writeJSON(env.stdout, out)
	} else {
		fmt.Fprintln(env.stdout, summary(dir, res, rem.ID(), elapsed))
	}
	if f := res.Pull.WriteFailures + res.Push.WriteFailures; f > 0 {
		return partialError{msg: fmt.Sprintf("%d %s refused by the target (forbidden or unauthorized); the others were copied", f, plural(f, "document was", "documents were"))}
	}
	return nil
}

// connectRetry connects; with watch, an unreachable remote is retried
// after 1 s doubling to 60 s until it answers or Ctrl-C.
func (e *cliEnv) connectRetry(spec remoteSpec, rep *replica, o connectOptions, watch bool) (remote, error) {
	delay := time.Second
	for {
		rem, err := e.connect(spec, rep, o)
		if err == nil || !watch || !replicate.IsTransport(err) {
			return rem, err
		}
		_, msg := classify(err)
		fmt.Fprintf(e.stderr, "%s; retrying in %s\n", msg, delay)
		select {
		case <-e.ctx.Done():
			return nil, e.ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Minute)
	}
}

// progressJSON is the --json form of one direction's counts.
func progressJSON(p replicate.Progress) map[string]any {
	return map[string]any{"docs_read": p.DocsRead, "docs_written": p.DocsWritten,
		"write_failures": p.WriteFailures, "last_seq": p.LastSeq}
}

// summary is the one line a one-shot replication ends with.
func summary(dir replicate.Direction, res replicate.Result, remote string, elapsed time.Duration) string {
	secs := fmt.Sprintf("%.1f s", elapsed.Seconds())
	switch dir {
	case replicate.Pull:
		return fmt.Sprintf("pulled %d %s from %s in %s", res.Pull.DocsWritten, plural(res.Pull.DocsWritten, "doc", "docs"), remote, secs)
	case replicate.Push:
		return fmt.Sprintf("pushed %d %s to %s in %s", res.Push.DocsWritten, plural(res.Push.DocsWritten, "doc", "docs"), remote, secs)
	}
	return fmt.Sprintf("pulled %d, pushed %d docs with %s in %s", res.Pull.DocsWritten, res.Push.DocsWritten, remote, secs)
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// logger returns the replicator's logger: text on stderr with --verbose,
// else nil (discard).
func (e *cliEnv) logger(cf commonFlags) *slog.Logger {
	if !cf.verbose {
		return nil
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
