package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/vault"
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
	stop, err := cpuProfile(env)
	if err != nil {
		return err
	}
	defer stop()
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
	if r.spec.kind == "p2p" {
		return r.runP2P()
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
	// p2p are the flags of a p2p://GROUP remote.
	p2p p2pFlags
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
	fs.DurationVar(&r.interval, "interval", vault.DefaultPollInterval, "with --watch on a journal bucket: the pause between two polls (it doubles after failures, up to 5m)")
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
	addP2PFlags(fs, &r.p2p, false)
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
	if err := r.checkP2P(); err != nil {
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

// run connects and replicates, then reports the run.
func (r *replication) run() error {
	env := r.cliEnv
	rep, err := r.replica(true)
	if err != nil {
		return err
	}
	defer rep.Close()
	o := connectOptions{create: r.dir&replicate.Push != 0, newVault: r.vf.config(r.fs)}
	l, err := r.connectRetry(r.spec, rep, o, r.watch)
	if err != nil {
		return err
	}
	defer l.Close()
	if r.watch {
		fmt.Fprintf(env.stderr, "watching %s (%s); Ctrl-C to stop\n", safe(l.ID()), r.name)
	}
	start := env.now()
	res, err := r.replicate(rep, l, r.dir, vault.SyncOptions{Live: r.watch, MetadataOnly: r.metadataOnly,
		RetryQuarantined: r.retryQuarantined, Interval: r.interval})
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
	return r.report(rep, l.ID(), res, start)
}

// replicate runs one sync of l in direction dir, showing its progress
// on stderr: a bar or lines for a one-shot run, the lines of a watch for
// a live one.
func (c *command) replicate(rep *replica, l *link, dir replicate.Direction, o vault.SyncOptions) (vault.SyncResult, error) {
	stop := c.showSyncs(rep, l.ID(), l.bucket, o.Live)
	res, err := rep.v.Replicate(c.ctx, l.Link, dir, o)
	stop()
	return res, l.wrap(err)
}

// showSyncs prints what the syncs of the remote id report, until stop is
// called: each sync gets its own progress (bar or lines), a live one the
// lines of a watch.
func (c *command) showSyncs(rep *replica, id, bucket string, live bool) (stop func()) {
	var mu sync.Mutex
	var pr *progress
	end := rep.v.Watch(c.ctx, func(e vault.Event) {
		if e.Remote != id {
			return
		}
		mu.Lock()
		if e.Kind == vault.SyncStarted || pr == nil {
			if pr != nil {
				pr.finish()
			}
			pr = newProgress(c.cliEnv, c.cf.quiet, live)
		}
		p := pr
		mu.Unlock()
		switch {
		case e.Kind == vault.SyncProgress && !live && e.Sync != nil:
			p.update(*e.Sync)
		case e.Kind == vault.SyncProgress && !live && e.Pack != nil:
			p.pack(*e.Pack)
		case e.Kind == vault.SyncWritten && live:
			p.written(e.Direction, e.Written)
		case e.Kind == vault.SyncPolled && live:
			p.polled(*e.Journal)
		case e.Kind == vault.PackQuarantined && live:
			warnQuarantined(c.cliEnv, id, *e.Quarantine, true)
		case e.Kind == vault.SyncRetrying && live && e.Retry.What == "poll":
			_, msg := classify(&remoteError{remote: id, err: remoteErr(e.Retry.Err), bucket: bucket})
			fmt.Fprintf(c.stderr, "%s; retrying in %s\n", safe(msg), e.Retry.Delay)
		}
	})
	return func() {
		end()
		mu.Lock()
		defer mu.Unlock()
		if pr != nil {
			pr.finish()
		}
	}
}

// report prints the run's outcome: a summary line, or the JSON answer.
func (r *replication) report(rep *replica, id string, res vault.SyncResult, start time.Time) error {
	env := r.cliEnv
	elapsed := env.now().Sub(start)
	for _, q := range res.Quarantined {
		warnQuarantined(env, id, q, res.NewlyQuarantined(q))
	}
	if r.cf.json {
		out := map[string]any{"ok": len(res.Quarantined) == 0, "command": r.name, "remote": id, "store": rep.path, "elapsed_ms": elapsed.Milliseconds()}
		if r.dir&replicate.Pull != 0 {
			out["pulled"] = progressJSON(res.Pull)
		}
		if r.dir&replicate.Push != 0 {
			out["pushed"] = progressJSON(res.Push)
		}
		if res.Journal != nil {
			out["journal"] = journalJSON(*res.Journal)
			out["quarantined"] = quarantineJSON(res.Quarantined)
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
func journalOutcome(res vault.SyncResult) error {
	if n := len(res.Quarantined); n > 0 {
		return partialError{msg: fmt.Sprintf("%d %s could not be opened and %s set aside (the others arrived); "+
			"livesync status lists them, livesync pull --retry-quarantined tries them again", n, plural(n, "pack", "packs"), plural(n, "is", "are"))}
	}
	if res.Journal != nil && res.Journal.Rejected > 0 {
		n := res.Journal.Rejected
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
func (e *command) connectRetry(spec remoteSpec, rep *replica, o connectOptions, watch bool) (*link, error) {
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
func summary(dir replicate.Direction, res vault.SyncResult, remote string, elapsed time.Duration) string {
	secs := fmt.Sprintf("%.1f s", elapsed.Seconds())
	if j := res.Journal; j != nil {
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
