package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	diag "github.com/livesync-go/livesync-go/engine/negotiate/doctor"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// finding is one diagnosis of doctor.
type finding = vault.Finding

// Finding states.
const (
	statusOK      = vault.FindingOK
	statusWarning = vault.FindingWarning
	statusProblem = vault.FindingProblem
	statusSkipped = vault.FindingSkipped
)

// doctor examines a remote without writing to it (no handshake, no
// milestone update): the adapters' doctors (couchdb.DB.Doctor,
// minio.Bucket.Doctor) run the checks in this CLI's words, then doctor
// adds what the local replica set aside and prints the findings.
type doctor struct {
	env      *cliEnv
	spec     remoteSpec
	flags    commonFlags
	db       *couchdb.DB   // a CouchDB remote
	bucket   *minio.Bucket // a journal bucket
	rep      *replica      // nil without a local replica
	findings []finding
}

func (d *doctor) add(f finding) { d.findings = append(d.findings, f) }

func runDoctor(env *cliEnv, args []string) error {
	c := env.newCommand("doctor", "doctor [REMOTE] [flags]")
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.pos) > 1 {
		return usageError{"doctor takes at most one remote"}
	}
	spec, err := c.remote(first(c.pos))
	if err != nil {
		return err
	}
	if spec.kind == "p2p" {
		return refuseP2P(spec, "doctor")
	}
	d := &doctor{env: env, spec: spec, flags: c.cf}
	if spec.kind == "s3" {
		if d.bucket, err = env.openBucket(spec, c.cf); err != nil {
			return err
		}
	} else {
		cfg, err := env.couchConfig(spec, c.cf)
		if err != nil {
			return err
		}
		if d.db, err = couchdb.New(cfg); err != nil {
			return usageError{err.Error()}
		}
		defer d.db.Close()
	}
	if d.rep, err = c.existingReplica(); err != nil {
		return err
	}
	if d.rep != nil {
		defer d.rep.Close()
	}
	d.run(env.ctx)
	if err := env.ctx.Err(); err != nil {
		return err
	}
	return d.report()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// run runs the adapter's checks, then the local ones of a bucket.
func (d *doctor) run(ctx context.Context) {
	o := d.options(ctx)
	if d.bucket != nil {
		var complete bool
		d.findings, complete = d.bucket.Doctor(ctx, o)
		if complete {
			d.checkQuarantine(ctx)
		}
		return
	}
	d.findings = d.db.Doctor(ctx, o)
}

// options are the doctor's words: this CLI's exit codes, error lines and
// command lines, and what the local replica holds.
func (d *doctor) options(ctx context.Context) diag.Options {
	o := diag.Options{
		Codes:   diag.Codes{Failed: exitFailed, Unreachable: exitUnreachable, Auth: exitAuth, Refused: exitRefused, Passphrase: exitPassphrase},
		Explain: classify,
		Cause: func(err error) string {
			var ee *engine.Error
			if errors.As(err, &ee) {
				return transportCause(ee)
			}
			return err.Error()
		},
		Command:    d.action,
		Line:       commandLine,
		Passphrase: func() (string, error) { return d.env.passphraseFor(&d.spec, d.flags) },
	}
	o.NewVault = vault.DefaultSettings(d.bucket != nil).TweakValues()
	if d.rep == nil {
		return o
	}
	o.Local.Present = true
	o.Local.NodeID, o.Local.NodeIDErr = d.rep.nodeIDIfAny(ctx)
	if t, err := d.rep.v.TweakValues(); err == nil {
		o.Local.Tweaks = &t
	}
	empty, err := d.rep.isEmpty(ctx)
	o.Local.Empty = err == nil && empty
	o.Local.ChunkIDs = func() []string { return d.localChunkIDs(ctx) }
	return o
}

// localChunkIDs are a few of the replica's encrypted chunk ids.
func (d *doctor) localChunkIDs(ctx context.Context) []string {
	infos, err := d.rep.st.AllDocs(ctx, store.AllDocsOptions{StartKey: docid.PrefixChunk + "+", EndKey: docid.PrefixChunk + "+\uffff", Limit: 20})
	if err != nil {
		return nil
	}
	var ids []string
	for _, in := range infos {
		ids = append(ids, in.ID)
	}
	return ids
}

// action is the command line of an action the advice names.
func (d *doctor) action(a diag.Action) []string {
	switch a {
	case diag.Push:
		return d.command("push")
	case diag.Pull:
		return d.command("pull")
	case diag.PullRebuildLocal:
		return d.command("pull", "--rebuild-local")
	case diag.PullFresh:
		return d.commandStore("pull", d.freshStore())
	case diag.Unlock:
		return d.command("unlock")
	case diag.PushRebuild:
		return d.command("push", "--rebuild")
	}
	return nil
}

// command is a livesync command on this doctor's remote, with the
// --config and --store it was given, as arguments.
func (d *doctor) command(name string, args ...string) []string {
	return d.commandStore(name, d.flags.store, args...)
}

// commandStore is command with the local replica store ("" for none).
func (d *doctor) commandStore(name, store string, args ...string) []string {
	out := append([]string{name, d.spec.commandArg()}, args...)
	if d.flags.config != "" {
		out = append(out, "--config", d.flags.config)
	}
	if store != "" {
		out = append(out, "--store", store)
	}
	return out
}

// freshStore is a path for a new local replica beside this one.
func (d *doctor) freshStore() string {
	path := defaultStore
	if d.rep != nil {
		path = d.rep.path
	}
	dir, base := filepath.Split(path)
	name := strings.TrimSuffix(base, filepath.Ext(base))
	for i := 1; ; i++ {
		p := filepath.Join(dir, fmt.Sprintf("%s-fresh%d%s", name, i, filepath.Ext(base)))
		if !fileExists(p) {
			return p
		}
	}
}

// commandLine is args as a shell command line.
func commandLine(args []string) string {
	q := []string{"livesync"}
	for _, a := range args {
		q = append(q, shellQuote(a))
	}
	return strings.Join(q, " ")
}

// report prints the findings and returns the error of the first problem.
func (d *doctor) report() error {
	problems := 0
	var firstCode int
	for _, f := range d.findings {
		if f.Status == statusProblem {
			if problems == 0 {
				firstCode = f.Code
			}
			problems++
		}
	}
	if d.env.json {
		writeJSON(d.env.stdout, map[string]any{"ok": problems == 0, "command": "doctor", "remote": d.spec.String(), "findings": d.findings})
	} else {
		fmt.Fprintf(d.env.stdout, "checking %s\n", safe(d.spec.String()))
		for _, f := range d.findings {
			label := map[string]string{statusOK: "ok", statusWarning: "WARNING", statusProblem: "PROBLEM", statusSkipped: "skipped"}[f.Status]
			fmt.Fprintf(d.env.stdout, "  %-8s %-16s %s\n", label, safe(f.Check), safe(f.Message))
			for _, det := range f.Details {
				fmt.Fprintf(d.env.stdout, "  %-8s %-16s   %s\n", "", "", safe(det))
			}
			if f.Advice != "" {
				fmt.Fprintf(d.env.stdout, "  %-8s %-16s -> %s\n", "", "", safe(f.Advice))
			}
		}
	}
	if problems == 0 {
		return nil
	}
	return &doctorError{code: firstCode, problems: problems}
}

// doctorError ends doctor with the exit code of its first problem.
type doctorError struct{ code, problems int }

func (e *doctorError) Error() string {
	return fmt.Sprintf("%d %s found (see above)", e.problems, plural(e.problems, "problem", "problems"))
}
