package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// A file is held when the replica has its metadata but not all of its
// chunks (a metadata-only pull, an interrupted one, or chunks that never
// reached the remote): it cannot be read or exported until they arrive.
// The vault records since when each file is held, which remote its
// metadata came from, and what the last hunt for its chunks found
// (vault.Vault.Held).
//
// The CLI keeps no hunt running between commands: nothing is hunted in
// the background, so there is never a next attempt scheduled. "livesync
// hunt --retry" makes one pass at once (vault.Vault.Hunt with Once), with
// engine/hunt's per-source throttle, on every remote that can fetch
// chunks by id.

func runHunt(env *cliEnv, args []string) error {
	c := env.newCommand("hunt", "hunt [--retry [REMOTE...]] [flags]")
	retry := c.fs.Bool("retry", false, "hunt the missing chunks now, on the named remotes (default: every remote of the configuration) that can fetch by id")
	perMinute := c.fs.Int("per-minute", hunt.DefaultMaxPerWindow, "with --retry: requests per minute to each remote at most (one request asks for up to 100 chunks of one file)")
	var pf p2pFlags
	addP2PFlags(c.fs, &pf, false)
	if err := c.parse(args); err != nil {
		return err
	}
	if *perMinute < 1 {
		return usageError{"--per-minute must be at least 1"}
	}
	if len(c.pos) > 0 && !*retry {
		return usageError{"hunt lists the held files of the local replica; name remotes only with --retry (hunt --retry REMOTE...)"}
	}
	rep, err := c.replica(false)
	if err != nil {
		return err
	}
	defer rep.Close()
	files, err := rep.v.Held(env.ctx)
	if err != nil {
		return err
	}
	if !*retry {
		return printHeld(env, files)
	}
	return retryHunt(c, rep, files, c.pos, pf, &hunt.Config{MaxPerWindow: *perMinute, Window: time.Minute})
}

// printHeld lists the held files.
func printHeld(env *cliEnv, files []vault.HeldFile) error {
	if env.json {
		rows := make([]map[string]any, 0, len(files))
		for _, f := range files {
			rows = append(rows, heldJSON(f, nil))
		}
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "hunt", "held": rows})
		return nil
	}
	if len(files) == 0 {
		fmt.Fprintln(env.stdout, "nothing is held: every file's chunks are in the local replica")
		return nil
	}
	missing := 0
	for _, f := range files {
		missing += len(f.Missing)
	}
	fmt.Fprintf(env.stdout, "%d %s held: the local replica has %s metadata but not %d of %s chunks, so %s cannot be read or exported yet\n\n",
		len(files), plural(len(files), "file is", "files are"), plural(len(files), "its", "their"),
		missing, plural(len(files), "its", "their"), plural(len(files), "it", "they"))
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tMISSING\tHELD SINCE\tFROM\tLAST HUNT")
	for _, f := range files {
		since, from, last := "unknown", "-", "never"
		if !f.Since.IsZero() {
			since = f.Since.Local().Format("2006-01-02 15:04:05")
		}
		if f.Source != "" {
			from = f.Source
		}
		if !f.LastAttempt.IsZero() {
			last = f.LastAttempt.Local().Format("2006-01-02 15:04:05")
			if f.LastResult != "" {
				last += ": " + f.LastResult
			}
		}
		fmt.Fprintf(tw, "%s\t%d of %d\t%s\t%s\t%s\n", safe(f.Meta.Path), len(f.Missing), f.Chunks, since, safe(from), safe(last))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, "\nnext hunt: none scheduled (the CLI hunts only when asked); \"livesync hunt --retry\" fetches the missing chunks from every remote that can fetch by id")
	return nil
}

// heldJSON is the --json form of a held file (reasons: why it is still
// held after a hunt).
func heldJSON(f vault.HeldFile, reasons []string) map[string]any {
	row := map[string]any{"path": f.Meta.Path, "id": f.Meta.ID, "rev": f.Meta.Rev, "chunks": f.Chunks,
		"missing": len(f.Missing), "since": timeJSON(f.Since), "source": nil, "last_attempt": timeJSON(f.LastAttempt),
		"last_result": nil, "next_attempt": nil}
	if f.Source != "" {
		row["source"] = f.Source
	}
	if f.LastResult != "" {
		row["last_result"] = f.LastResult
	}
	if reasons != nil {
		row["reasons"] = reasons
	}
	return row
}

// huntRemote is one remote named for a hunt: attached, or not.
type huntRemote struct {
	remote string // the remote's ID (its URL)
	link   *link  // nil when attaching failed
	err    error  // why attaching failed
}

// fetches reports whether the remote can be asked for chunks by id.
func (h huntRemote) fetches() bool {
	if h.link == nil {
		return false
	}
	src := h.link.Chunks()
	return src != nil && src.CanFetchDirect()
}

// retryHunt attaches the remotes, hunts the held files' chunks in one
// pass, and reports what was released and what is still missing and
// why.
func retryHunt(c *command, rep *replica, files []vault.HeldFile, names []string, pf p2pFlags, hc *hunt.Config) error {
	env := c.cliEnv
	if len(files) == 0 {
		if env.json {
			writeJSON(env.stdout, map[string]any{"ok": true, "command": "hunt", "retry": true, "released": []any{}, "held": []any{}})
		} else {
			fmt.Fprintln(env.stdout, "nothing is held: every file's chunks are in the local replica")
		}
		return nil
	}
	named, err := attachForHunt(c, rep, names, pf)
	var remotes []*vault.Link
	for _, h := range named {
		if h.link != nil {
			defer h.link.Close()
			remotes = append(remotes, h.link.Link)
		}
	}
	if err != nil {
		return err
	}
	if !c.cf.quiet {
		total, fetching := 0, 0
		for _, f := range files {
			total += len(f.Missing)
		}
		for _, h := range named {
			if h.fetches() {
				fetching++
			}
		}
		if fetching > 0 {
			fmt.Fprintf(env.stderr, "hunting %d %s of %d %s on %d %s\n", total, plural(total, "chunk", "chunks"),
				len(files), plural(len(files), "file", "files"), fetching, plural(fetching, "remote", "remotes"))
		}
	}
	explain := func(err error) string { _, msg := classify(err); return msg }
	stop := rep.v.Watch(c.ctx, func(e vault.Event) {
		if e.Kind == vault.HuntFound && !c.cf.quiet {
			fmt.Fprintf(env.stderr, "found %d/%d chunks\n", e.Hunt.Found, e.Hunt.Total)
		}
	})
	res, err := rep.v.Hunt(c.ctx, vault.HuntOptions{Once: true, Remotes: remotes, Config: hc, Explain: explain})
	stop()
	if err != nil {
		return err
	}
	return reportHunt(env, files, named, res, explain)
}

// attachForHunt attaches the remotes names (default: every remote of the
// configuration) read-only, in order, and warns about those that cannot
// be asked. When none can be asked and one failed, that failure is the
// error. A p2p:// remote is each approved peer of its group found within
// --wait.
func attachForHunt(c *command, rep *replica, names []string, pf p2pFlags) ([]huntRemote, error) {
	cfg, err := c.config()
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		for name := range cfg.Remotes {
			names = append(names, name)
		}
		sort.Strings(names)
		if len(names) == 0 {
			return nil, usageError{"no remote to hunt on: name them (hunt --retry REMOTE...), or add remotes to the configuration file"}
		}
	}
	if _, err := c.localVault(rep); err != nil {
		return nil, err
	}
	var named []huntRemote
	var firstErr error
	for _, name := range names {
		spec, err := resolveRemote(cfg, name)
		if err != nil {
			return named, err
		}
		if spec.kind == "p2p" {
			peers, err := c.p2pHuntRemotes(rep, spec, pf)
			if err != nil {
				return named, err
			}
			for _, h := range peers {
				firstErr = cmp.Or(firstErr, h.err)
			}
			named = append(named, peers...)
			continue
		}
		l, err := c.connect(spec, rep, connectOptions{readOnly: true})
		if err != nil {
			var ue usageError
			if errors.As(err, &ue) || errors.Is(err, context.Canceled) {
				return named, err
			}
			firstErr = cmp.Or(firstErr, err)
			named = append(named, huntRemote{remote: spec.String(), err: err})
			continue
		}
		named = append(named, huntRemote{remote: l.ID(), link: l})
	}
	fetching := 0
	for _, h := range named {
		switch {
		case h.err != nil:
			_, msg := classify(h.err)
			fmt.Fprintf(c.stderr, "warning: not hunting on %s: %s\n", safe(h.remote), safe(msg))
		case !h.fetches():
			fmt.Fprintf(c.stderr, "warning: not hunting on %s: it %s\n", safe(h.remote), safe(noFetchNote(h.link)))
		default:
			fetching++
		}
	}
	if fetching == 0 && firstErr != nil {
		return named, firstErr
	}
	return named, nil
}

// noFetchNote says why a remote is not asked for chunks by id.
func noFetchNote(l *link) string {
	if l.Journal() != nil {
		return "cannot fetch chunks by id (a journal bucket needs direct_fetch = true, or ?direct-fetch=1 in its URL)"
	}
	return "cannot fetch chunks by id"
}

// reportHunt prints what a hunt released and what is still held, and
// why; files still held are a partial failure.
func reportHunt(env *cliEnv, files []vault.HeldFile, named []huntRemote, res vault.HuntResult, explain func(error) string) error {
	texts := func(f vault.HeldFile) []string {
		out := make([]string, len(f.Reasons))
		for i, r := range f.Reasons {
			out[i] = r.Text(explain)
		}
		return out
	}
	if env.json {
		rel := make([]map[string]any, 0, len(res.Released))
		for _, f := range res.Released {
			rel = append(rel, map[string]any{"path": f.Meta.Path, "id": f.Meta.ID, "rev": f.Meta.Rev, "chunks_fetched": len(f.Missing)})
		}
		hs := make([]map[string]any, 0, len(res.Held))
		for _, f := range res.Held {
			hs = append(hs, heldJSON(f, texts(f)))
		}
		writeJSON(env.stdout, map[string]any{"ok": len(res.Held) == 0, "command": "hunt", "retry": true,
			"sources": huntSourcesJSON(named, res), "released": rel, "held": hs})
	} else {
		for _, f := range res.Released {
			fmt.Fprintf(env.stdout, "released %s (%d %s fetched)\n", safe(f.Meta.Path), len(f.Missing), plural(len(f.Missing), "chunk", "chunks"))
		}
		for _, f := range res.Held {
			why := safe(strings.Join(texts(f), "; "))
			if len(f.Missing) == 0 {
				fmt.Fprintf(env.stdout, "still held %s: %s\n", safe(f.Meta.Path), why)
				continue
			}
			fmt.Fprintf(env.stdout, "still held %s: %d of %d chunks missing: %s\n", safe(f.Meta.Path), len(f.Missing), f.Chunks, why)
		}
		fmt.Fprintf(env.stdout, "hunted %d %s: %d released, %d still held\n", len(files), plural(len(files), "file", "files"), len(res.Released), len(res.Held))
	}
	if len(res.Held) > 0 {
		return partialError{msg: fmt.Sprintf("%d of %d files are still held (see above)", len(res.Held), len(files))}
	}
	return nil
}

// huntSourcesJSON is the --json form of the remotes of a hunt, in the
// order they were named.
func huntSourcesJSON(named []huntRemote, res vault.HuntResult) []map[string]any {
	stats := map[string]vault.HuntSource{}
	for _, s := range res.Sources {
		stats[s.Remote] = s
	}
	srcs := make([]map[string]any, 0, len(named))
	for _, h := range named {
		row := map[string]any{"remote": h.remote}
		switch {
		case h.err != nil:
			code, msg := classify(h.err)
			row["status"], row["error"], row["exit_code"] = "failed", msg, code
		case !h.fetches():
			row["status"], row["error"] = "skipped", noFetchNote(h.link)
		default:
			st := stats[h.remote].Stats
			row["status"] = "ok"
			row["requests"], row["chunks_found"], row["answered_missing"], row["failed_requests"] = st.Requests, st.Chunks, st.Missing, st.Failed
		}
		srcs = append(srcs, row)
	}
	return srcs
}
