package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/livesync-go/livesync-go/engine/journalsync"
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
	interval := fs.Duration("interval", defaultPollInterval, "with --watch on a journal bucket: the pause between two polls (it doubles after failures, up to 5m)")
	var metadataOnly, retryQuarantined, rebuildLocal, rebuild, yes *bool
	if dir&replicate.Pull != 0 {
		rebuildLocal = fs.Bool("rebuild-local", false, "discard the local replica's documents and fetch everything again (the plugin's \"fetch\"), joining a remote that another device rebuilt")
	}
	if dir == replicate.Push {
		rebuild = fs.Bool("rebuild", false, "rebuild the remote from this replica (the plugin's \"Rebuild everything\"): lock it, delete everything in it, push this replica with a new salt; every other device must then fetch it again")
		yes = fs.Bool("yes", false, "with --rebuild: do not ask for confirmation (for scripts)")
	}
	if dir&replicate.Pull != 0 {
		metadataOnly = fs.Bool("metadata-only", false, "pull metadata without chunks (LiveSync's readChunksOnline); cat --remote and hunt --retry fetch them on demand (CouchDB remotes)")
		retryQuarantined = fs.Bool("retry-quarantined", false, "journal buckets: try the packs that could not be opened before (quarantined) again")
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	env.json = cf.json
	if len(pos) > 1 {
		return usageError{fmt.Sprintf("%s takes at most one remote, got %d arguments", name, len(pos))}
	}
	if *interval <= 0 {
		return usageError{"--interval must be positive"}
	}
	cfg, err := env.loadConfig(cf.config)
	if err != nil {
		return err
	}
	spec, err := resolveRemote(cfg, first(pos))
	if err != nil {
		return err
	}
	if spec.kind == "s3" && metadataOnly != nil && *metadataOnly {
		return usageError{"--metadata-only needs a CouchDB remote: journal packs carry chunks and metadata together"}
	}
	if spec.kind != "s3" {
		if retryQuarantined != nil && *retryQuarantined {
			return usageError{"--retry-quarantined applies to journal buckets (s3://) only"}
		}
		if flagSet(fs, "interval") {
			return usageError{"--interval applies to journal buckets (s3://) only: a CouchDB remote is followed through its changes feed"}
		}
	}
	if yes != nil && *yes && !*rebuild {
		return usageError{"--yes goes with --rebuild"}
	}
	if rebuild != nil && *rebuild {
		if *watch {
			return usageError{"--rebuild runs once: leave out --watch"}
		}
		return runRebuild(env, spec, cf, cfg, vf.config(fs), *yes)
	}
	if rebuildLocal != nil && *rebuildLocal {
		n, err := env.discardReplica(storePath(cf.store, cfg))
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stderr, "discarded the local replica's %d %s; fetching everything again from %s\n", n, plural(int(n), "document", "documents"), spec)
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
	held := newHeldTracker(rep, rem.ID(), env.now)
	ro := replicateOptions{live: *watch, progress: pr.update, packs: pr.pack, log: env.logger(cf), interval: *interval}
	if dir&replicate.Pull != 0 {
		ro.holder = held
	}
	if *watch {
		ro.progress, ro.packs, ro.written = nil, nil, pr.written
		ro.polled = pr.polled
		ro.warn = func(q journalsync.Quarantine) { warnQuarantined(env, rem.ID(), q, true) }
		ro.retrying = func(err error, wait time.Duration) {
			_, msg := classify(err)
			fmt.Fprintf(env.stderr, "%s; retrying in %s\n", safe(msg), wait)
			_ = held.commit(env.ctx)
		}
		if ro.holder != nil {
			polled := ro.polled
			ro.polled = func(r journalsync.Result) {
				polled(r)
				if err := held.commit(env.ctx); err != nil && env.ctx.Err() == nil {
					fmt.Fprintf(env.stderr, "warning: %s\n", safeErr(err))
				}
			}
		}
	}
	if metadataOnly != nil {
		ro.metadataOnly = *metadataOnly
	}
	if retryQuarantined != nil {
		ro.retryQuarantined = *retryQuarantined
	}
	if *watch {
		fmt.Fprintf(env.stderr, "watching %s (%s); Ctrl-C to stop\n", safe(rem.ID()), name)
	}
	start := env.now()
	res, err := rem.Replicate(env.ctx, rep.st, node, dir, ro)
	pr.finish()
	if ro.holder != nil {
		// What arrived is recorded even after a failure or Ctrl-C (with
		// a context of its own: env.ctx may be the one cancelled).
		if herr := held.commit(context.WithoutCancel(env.ctx)); herr != nil && err == nil {
			err = herr
		}
	}
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
		st.LastPull = now
		if res.Pull.LastSeq != "" {
			st.LastPullSeq = res.Pull.LastSeq
		}
	}
	if dir&replicate.Push != 0 {
		st.LastPush = now
		if res.Push.LastSeq != "" {
			st.LastPushSeq = res.Push.LastSeq
		}
	}
	if err := rep.save(env.ctx); err != nil {
		return err
	}
	elapsed := now.Sub(start)
	for _, q := range res.quarantined {
		warnQuarantined(env, rem.ID(), q, res.newlyQuarantined(q))
	}
	if cf.json {
		out := map[string]any{"ok": len(res.quarantined) == 0, "command": name, "remote": rem.ID(), "store": rep.path, "elapsed_ms": elapsed.Milliseconds()}
		if dir&replicate.Pull != 0 {
			out["pulled"] = progressJSON(res.Pull)
		}
		if dir&replicate.Push != 0 {
			out["pushed"] = progressJSON(res.Push)
		}
		if res.journal != nil {
			out["journal"] = journalJSON(*res.journal)
			out["quarantined"] = quarantineJSON(res.quarantined)
		}
		writeJSON(env.stdout, out)
	} else {
		fmt.Fprintln(env.stdout, safe(summary(dir, res, rem.ID(), elapsed)))
	}
	if f := res.Pull.WriteFailures + res.Push.WriteFailures; f > 0 {
		return partialError{msg: fmt.Sprintf("%d %s refused by the target (forbidden or unauthorized); the others were copied", f, plural(f, "document was", "documents were"))}
	}
	return journalOutcome(res)
}

// journalOutcome is the partial failure of a journal run: packs in
// quarantine, or received documents the local replica refused.
func journalOutcome(res syncResult) error {
	if n := len(res.quarantined); n > 0 {
		return partialError{msg: fmt.Sprintf("%d %s could not be opened and %s set aside (the others arrived); "+
			"livesync status lists them, livesync pull --retry-quarantined tries them again", n, plural(n, "pack", "packs"), plural(n, "is", "are"))}
	}
	if res.journal != nil && res.journal.Rejected > 0 {
		n := res.journal.Rejected
		return partialError{msg: fmt.Sprintf("the local replica refused %d received %s (run with --verbose to see which)", n, plural(n, "document", "documents"))}
	}
	return nil
}

// warnQuarantined prints one line about a quarantined pack.
func warnQuarantined(env *cliEnv, remote string, q journalsync.Quarantine, isNew bool) {
	what := "is still quarantined"
	if isNew {
		what = "could not be opened and was set aside"
	}
	fmt.Fprintf(env.stderr, "warning: %s: pack %s %s (stage %s): %s\n", safe(remote), safe(q.Key), what, safe(q.Stage), safe(q.Err))
}

// quarantineJSON is the --json form of quarantined packs.
func quarantineJSON(qs []journalsync.Quarantine) []map[string]any {
	out := make([]map[string]any, 0, len(qs))
	for _, q := range qs {
		out = append(out, map[string]any{"key": q.Key, "stage": q.Stage, "error": q.Err, "at": timeJSON(q.At)})
	}
	return out
}

// journalJSON is the --json form of a journal run's counts.
func journalJSON(r journalsync.Result) map[string]any {
	return map[string]any{"packs_received": r.PacksReceived, "docs_written": r.DocsWritten, "chunks_received": r.ChunksReceived,
		"rejected": r.Rejected, "packs_sent": r.PacksSent, "records_sent": r.RecordsSent, "bytes_sent": r.BytesSent,
		"newly_quarantined": len(r.Quarantined)}
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
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
		fmt.Fprintf(e.stderr, "%s; retrying in %s\n", safe(msg), delay)
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
func summary(dir replicate.Direction, res syncResult, remote string, elapsed time.Duration) string {
	secs := fmt.Sprintf("%.1f s", elapsed.Seconds())
	if j := res.journal; j != nil {
		recv := fmt.Sprintf("received %d %s (%d docs, %d chunks)", j.PacksReceived, plural(j.PacksReceived, "pack", "packs"), j.DocsWritten, j.ChunksReceived)
		sent := fmt.Sprintf("sent %d %s (%d records)", j.PacksSent, plural(j.PacksSent, "pack", "packs"), j.RecordsSent)
		switch dir {
		case replicate.Pull:
			return fmt.Sprintf("%s from %s in %s", recv, remote, secs)
		case replicate.Push:
			return fmt.Sprintf("%s to %s in %s", sent, remote, secs)
		}
		return fmt.Sprintf("%s, %s with %s in %s", recv, sent, remote, secs)
	}
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
