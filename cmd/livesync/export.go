package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/livesync-go/livesync-go/adapters/folder"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/dump"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/vault"
)

func runExport(env *cliEnv, args []string) error {
	c := env.newCommand("export", "export [REMOTE] --out DIR [flags]  |  export --dump FILE --out DIR [flags]")
	dumpPath := c.fs.String("dump", "", "LiveSync database dump to read (CouchDB _all_docs?include_docs=true JSON; - for stdin)")
	out := c.fs.String("out", "", "folder to write the vault's files into (created if missing)")
	hidden := c.fs.Bool("hidden", false, "also write hidden files (Hidden File Sync documents, i:…; never a .git folder); dot-paths in normal documents are refused either way")
	deleted := c.fs.Bool("keep-deleted", false, "also write files that are marked deleted")
	if err := c.parse(args); err != nil {
		return err
	}
	pos := c.pos
	switch {
	case *dumpPath != "" && len(pos) > 0:
		return usageError{"give either a remote or --dump, not both"}
	case *out == "" && *dumpPath != "":
		return usageError{"both --dump and --out are required"}
	case *out == "":
		return usageError{"--out is required"}
	case len(pos) > 1:
		return usageError{"export takes at most one remote"}
	}
	opts := exportOptions{out: *out, hidden: *hidden, deleted: *deleted}
	if *dumpPath != "" {
		pass, err := c.dumpPassphrase()
		if err != nil {
			return err
		}
		return exportDump(env, *dumpPath, pass, opts)
	}
	return exportReplica(c, first(pos), opts)
}

// exportOptions are export's choices.
type exportOptions struct {
	out             string
	hidden, deleted bool
}

// exportCounts is what an export did.
type exportCounts struct {
	written, skipped, refused, failed, total int
	bytes                                    int64
}

// report prints the counts and returns a partialError when files failed.
// Refused documents (paths the plugin would never write there, named on
// stderr as they are met) do not fail the export: they are what a
// hostile or broken writer left on the remote, and the rest of the vault
// is still worth having.
func (c exportCounts) report(env *cliEnv, out string, extra map[string]any) error {
	if env.json {
		o := map[string]any{"ok": c.failed == 0, "command": "export", "out": out, "files": c.written,
			"bytes": c.bytes, "skipped": c.skipped, "refused": c.refused, "failed": c.failed}
		for k, v := range extra {
			o[k] = v
		}
		writeJSON(env.stdout, o)
	} else {
		fmt.Fprintf(env.stdout, "exported %d files (%d bytes) to %s", c.written, c.bytes, out)
		if c.skipped > 0 {
			fmt.Fprintf(env.stdout, "; skipped %d (deleted, hidden or not vault files)", c.skipped)
		}
		if c.refused > 0 {
			fmt.Fprintf(env.stdout, "; refused %d unsafe %s (named above)", c.refused, plural(c.refused, "path", "paths"))
		}
		fmt.Fprintln(env.stdout)
	}
	if c.failed > 0 {
		return partialError{failed: c.failed, total: c.total, verb: "written"}
	}
	return nil
}

// exportDump writes the files of a dump.
func exportDump(env *cliEnv, dumpPath, pass string, o exportOptions) error {
	docs, local, err := readDumpFile(dumpPath)
	if err != nil {
		return err
	}
	// Every document is decoded to its local form first: a wrong
	// passphrase shows at the first encrypted document, before anything
	// is written.
	v, err := dump.Decode(docs, local, pass)
	switch {
	case errors.Is(err, dump.ErrNeedPassphrase):
		return errors.New("the vault is end-to-end encrypted: set LIVESYNC_PASSPHRASE or use --passphrase-file")
	case errors.Is(err, engine.ErrDecrypt):
		return fmt.Errorf("%w (is the passphrase right?)", err)
	case err != nil:
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	for _, b := range v.Broken {
		fmt.Fprintf(env.stderr, "skip %s: %s\n", safe(b.ID), safeErr(b.Err))
	}
	c, err := writeFiles(env, v.Files, v.ReadFile, o)
	c.failed += len(v.Broken)
	c.total += len(v.Broken)
	if err != nil {
		return err
	}
	return c.report(env, o.out, nil)
}

// writeFiles materialises files into o.out, each read by read. A file
// that cannot be read or written is named on stderr and skipped; a full
// disk stops the export. Every write goes through an os.Root of o.out, so
// no path, and no symbolic link already in the folder, leads a write
// outside it; paths exportPath refuses are named on stderr and counted.
func writeFiles(env *cliEnv, files []livesync.Meta, read func(livesync.Meta) ([]byte, error), o exportOptions) (exportCounts, error) {
	c := exportCounts{total: len(files)}
	root, err := os.OpenRoot(o.out)
	if err != nil {
		return c, &localError{o.out, err}
	}
	defer root.Close()
	for _, meta := range files {
		if err := env.ctx.Err(); err != nil {
			return c, err
		}
		if meta.Deleted && !o.deleted {
			c.skipped++
			continue
		}
		rel, verdict, why := folder.Path(meta.Path, o.hidden)
		switch verdict {
		case folder.Skip:
			c.skipped++
			continue
		case folder.Refuse:
			fmt.Fprintf(env.stderr, "refused %s: %s; not written\n", docName(meta), why)
			c.refused++
			continue
		}
		data, err := read(meta)
		if err != nil {
			var le *localError
			if errors.As(err, &le) {
				return c, err
			}
			fmt.Fprintf(env.stderr, "skip %s: %s\n", docName(meta), safeErr(err))
			c.failed++
			continue
		}
		if err := folder.WriteFile(root, rel, data, meta.MTime); err != nil {
			if isDiskFull(err) {
				return c, &localError{o.out, err}
			}
			if hint := folder.LinkOut(root, rel); hint != "" {
				fmt.Fprintf(env.stderr, "skip %s: %s, outside %s: not followed, nothing written there\n", docName(meta), safe(hint), safe(o.out))
			} else {
				fmt.Fprintf(env.stderr, "skip %s: %s\n", docName(meta), safeErr(err))
			}
			c.failed++
			continue
		}
		c.written++
		c.bytes += int64(len(data))
	}
	return c, nil
}

// docName names a file's document for a message: its path, and its id
// when that differs, escaped for the terminal.
func docName(m livesync.Meta) string {
	if m.ID == m.Path {
		return safe(m.Path)
	}
	return safe(m.Path) + " (" + safe(m.ID) + ")"
}

// exportReplica writes the files of the local replica, after pulling the
// remote into it when one is given (into a temporary replica unless
// --store names one).
func exportReplica(c *command, remoteArg string, o exportOptions) error {
	env := c.cliEnv
	var rep *replica
	var err error
	var pullErr error // a partial pull (quarantined packs): reported after the export
	extra := map[string]any{}
	if remoteArg == "" {
		if rep, err = c.replica(false); err != nil {
			return err
		}
		defer rep.Close()
	} else {
		spec, err := c.remote(remoteArg)
		if err != nil {
			return err
		}
		if rep, err = c.scratchReplica(); err != nil {
			return err
		}
		defer rep.Close()
		// A throwaway replica only reads the remote (no trace, no
		// joining a locked one); a --store replica is a device.
		l, err := c.connect(spec, rep, connectOptions{readOnly: c.cf.store == ""})
		if err != nil {
			return err
		}
		res, err := c.replicate(rep, l, replicate.Pull, vault.SyncOptions{})
		// The files are exported from what the pull brought: no chunk is
		// fetched on demand.
		l.Close()
		if err != nil {
			return err
		}
		extra["remote"] = l.ID()
		extra["pulled"] = progressJSON(res.Pull)
		if res.Journal != nil {
			extra["quarantined"] = quarantineJSON(res.Quarantined)
		}
		for _, q := range res.Quarantined {
			warnQuarantined(env, l.ID(), q, res.NewlyQuarantined(q))
		}
		pullErr = journalOutcome(res)
	}
	infos, err := rep.v.List(env.ctx, "", vault.ListOptions{Deleted: true})
	if err != nil {
		return err
	}
	files := make([]livesync.Meta, len(infos))
	for i, f := range infos {
		files[i] = f.Meta
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		if isDiskFull(err) {
			return &localError{o.out, err}
		}
		return err
	}
	n, err := writeFiles(env, files, func(m livesync.Meta) ([]byte, error) {
		data, err := rep.v.ReadMeta(env.ctx, m)
		return data, rep.fileErr("", err)
	}, o)
	if err != nil {
		return err
	}
	if err := n.report(env, o.out, extra); err != nil {
		return err
	}
	return pullErr
}

func readDumpFile(name string) (docs, local []livesync.Doc, err error) {
	f := os.Stdin
	if name != "-" {
		f, err = os.Open(name)
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
	}
	docs, local, err = dump.Read(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return docs, local, nil
}
