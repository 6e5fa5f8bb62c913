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
	r, err := parseReplication(env, args, dir)
	if err != nil {
		return err
	}
	if r.rebuild {
		return runRebuild(r.command, r.spec, r.vf.config(r.fs), r.yes)
	}
	if r.rebuildLocal {
		path, err := r.storePath()
		if err != nil {
			return err
		}
		n, err := env.discardReplica(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stderr, "discarded the local replica's %d %s; fetching everything again from %s\n", n, plural(int(n), "document", "documents"), r.spec)
	}
	return r.run()
}

// replication is a parsed pull, push or sync command line.
type replication struct {
	*command
	dir      replicate.Direction
	name     string // "pull", "push" or "sync"
	spec     remoteSpec
	vf       vaultFlags
	watch    bool
	interval time.Duration
	// metadataOnly, retryQuarantined and rebuildLocal are pull's and
	// sync's; rebuild and yes are push's.
	metadataOnly, retryQuarantined, rebuildLocal, rebuild, yes bool
}

// parseReplication parses and checks the command line of pull, push or
// sync, and resolves the remote.
func parseReplication(env *cliEnv, args []string, dir replicate.Direction) (*replication, error) {
	name := dir.String()
	r := &replication{command: env.newCommand(name, name+" [REMOTE] [flags]"), dir: dir, name: name}
	fs := r.fs
	if dir&replicate.Push != 0 {
		addVaultFlags(fs, &r.vf)
	}
	fs.BoolVar(&r.watch, "watch", false, "keep replicating until Ctrl-C, reconnecting after failures")
	fs.DurationVar(&r.interval, "interval", defaultPollInterval, "with --watch on a journal bucket: the pause between two polls (it doubles after failures, up to 5m)")
	if dir&replicate.Pull != 0 {
		fs.BoolVar(&r.rebuildLocal, "rebuild-local", false, "discard the local replica's documents and fetch everything again (the plugin's \"fetch\"), joining a remote that another device rebuilt")
	}
	if dir == replicate.Push {
		fs.BoolVar(&r.rebuild, "rebuild", false, "rebuild the remote from this replica (the plugin's \"Rebuild everything\"): lock it, delete everything in it, push this replica with a new salt; every other device must then fetch it again")
		fs.BoolVar(&r.yes, "yes", false, "with --rebuild: do not ask for confirmation (for scripts)")
	}
	if dir&replicate.Pull != 0 {
		fs.BoolVar(&r.metadataOnly, "metadata-only", false, "pull metadata without chunks (LiveSync's readChunksOnline); cat --remote and hunt --retry fetch them on demand (CouchDB remotes)")
		fs.BoolVar(&r.retryQuarantined, "retry-quarantined", false, "journal buckets: try the packs that could not be opened before (quarantined) again")
	}
	if err := r.parse(args); err != nil {
		return nil, err
	}
	if len(r.pos) > 1 {
		return nil, usageError{fmt.Sprintf("%s takes at most one remote, got %d arguments", name, len(r.pos))}
	}
	if r.interval <= 0 {
		return nil, usageError{"--interval must be positive"}
	}
	var err error
	if r.spec, err = r.remote(first(r.pos)); err != nil {
		return nil, err
	}
	if r.spec.kind == "s3" && r.metadataOnly {
		return nil, usageError{"--metadata-only needs a CouchDB remote: journal packs carry chunks and metadata together"}
	}
	if r.spec.kind != "s3" {
		if r.retryQuarantined {
			return nil, usageError{"--retry-quarantined applies to journal buckets (s3://) only"}
		}
		if flagSet(fs, "interval") {
			return nil, usageError{"--interval applies to journal buckets (s3://) only: a CouchDB remote is followed through its changes feed"}
		}
	}
	if r.yes && !r.rebuild {
		return nil, usageError{"--yes goes with --rebuild"}
	}
	if r.rebuild && r.watch {
		return nil, usageError{"--rebuild runs once: leave out --watch"}
	}
	return r, nil
}

// run connects and replicates, then records and reports the run.
func (r *replication) run() error {
	env := r.cliEnv
	rep, err := r.replica(true)
	if err != nil {
		return err
	}
	defer rep.Close()
	o := connectOptions{create: r.dir&replicate.Push != 0, newVault: r.vf.config(r.fs)}
	rem, err := r.connectRetry(r.spec, rep, o, r.watch)
	if err != nil {
		return err
	}
	defer rem.Close()
	node, err := rep.nodeID(env.ctx)
	if err != nil {
		return err
	}
	pr := newProgress(env, r.cf.quiet, r.watch)
	held := newHeldTracker(rep, rem.ID(), env.now)
	ro := r.options(rem, pr, held)
	if r.watch {
		fmt.Fprintf(env.stderr, "watching %s (%s); Ctrl-C to stop\n", safe(rem.ID()), r.name)
	}
	start := env.now()
	res, err := rem.Replicate(env.ctx, rep.st, node, r.dir, ro)
	pr.finish()
	if ro.holder != nil {
		// What arrived is recorded even after a failure or Ctrl-C (with
		// a context of its own: env.ctx may be the one cancelled).
		if herr := held.commit(context.WithoutCancel(env.ctx)); herr != nil && err == nil {
			err = herr
		}
	}
	if r.watch {
		if errors.Is(err, env.ctx.Err()) && env.ctx.Err() != nil {
			fmt.Fprintln(env.stderr, "stopped")
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	return r.report(rep, rem.ID(), res, start)
}

// options are the replication options of the run: progress, the record
// of held files, and for --watch the lines a live run prints.
func (r *replication) options(rem remote, pr *progress, held *heldTracker) replicateOptions {
	env := r.cliEnv
	ro := replicateOptions{live: r.watch, progress: pr.update, packs: pr.pack, log: env.logger(r.cf), interval: r.interval,
		metadataOnly: r.metadataOnly, retryQuarantined: r.retryQuarantined}
	if r.dir&replicate.Pull != 0 {
		ro.holder = held
	}
	if !r.watch {
		return ro
	}
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
		ro.polled = func(res journalsync.Result) {
			polled(res)
			if err := held.commit(env.ctx); err != nil && env.ctx.Err() == nil {
				fmt.Fprintf(env.stderr, "warning: %s\n", safeErr(err))
			}
		}
	}
	return ro
}

// report records when the replica last met the remote and prints the
// run's outcome: a summary line, or the JSON answer.
func (r *replication) report(rep *replica, id string, res syncResult, start time.Time) error {
	env := r.cliEnv
	st := rep.remote(id)
	now := env.now()
	if r.dir&replicate.Pull != 0 {
		st.LastPull = now
		if res.Pull.LastSeq != "" {
			st.LastPullSeq = res.Pull.LastSeq
		}
	}
	if r.dir&replicate.Push != 0 {
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
		warnQuarantined(env, id, q, res.newlyQuarantined(q))
	}
	if r.cf.json {
		out := map[string]any{"ok": len(res.quarantined) == 0, "command": r.name, "remote": id, "store": rep.path, "elapsed_ms": elapsed.Milliseconds()}
		if r.dir&replicate.Pull != 0 {
			out["pulled"] = progressJSON(res.Pull)
		}
		if r.dir&replicate.Push != 0 {
			out["pushed"] = progressJSON(res.Push)
		}
		if res.journal != nil {
			out["journal"] = journalJSON(*res.journal)
			out["quarantined"] = quarantineJSON(res.quarantined)
		}
		writeJSON(env.stdout, out)
	} else {
		fmt.Fprintln(env.stdout, safe(summary(r.dir, res, id, elapsed)))
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
func (e *command) connectRetry(spec remoteSpec, rep *replica, o connectOptions, watch bool) (remote, error) {
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
