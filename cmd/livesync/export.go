package main

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

func runExport(env *cliEnv, args []string) error {
	fs := newFlagSet(env, "export", "export [REMOTE] --out DIR [flags]  |  export --dump FILE --out DIR [flags]")
	dumpPath := fs.String("dump", "", "LiveSync database dump to read (CouchDB _all_docs?include_docs=true JSON; - for stdin)")
	out := fs.String("out", "", "folder to write the vault's files into (created if missing)")
	hidden := fs.Bool("hidden", false, "also write hidden files (Hidden File Sync documents, i:…)")
	deleted := fs.Bool("keep-deleted", false, "also write files that are marked deleted")
	var cf commonFlags
	addCommonFlags(fs, &cf)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	env.json = cf.json
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
		pass := cf.passphraseArg
		if pass == "" {
			if pass, err = env.passphrase(cf.passphraseFile); err != nil {
				return err
			}
		}
		return exportDump(env, *dumpPath, pass, opts)
	}
	return exportReplica(env, first(pos), cf, opts)
}

// exportOptions are export's choices.
type exportOptions struct {
	out             string
	hidden, deleted bool
}

// exportCounts is what an export did.
type exportCounts struct {
	written, skipped, failed, total int
	bytes                           int64
}

// report prints the counts and returns a partialError when files failed.
func (c exportCounts) report(env *cliEnv, out string, extra map[string]any) error {
	if env.json {
		o := map[string]any{"ok": c.failed == 0, "command": "export", "out": out, "files": c.written,
			"bytes": c.bytes, "skipped": c.skipped, "failed": c.failed}
		for k, v := range extra {
			o[k] = v
		}
		writeJSON(env.stdout, o)
	} else {
		fmt.Fprintf(env.stdout, "exported %d files (%d bytes) to %s", c.written, c.bytes, out)
		if c.skipped > 0 {
			fmt.Fprintf(env.stdout, "; skipped %d (deleted, hidden or not vault files)", c.skipped)
		}
		fmt.Fprintln(env.stdout)
	}
	if c.failed > 0 {
		return partialError{failed: c.failed, total: c.total}
	}
	return nil
}

// exportDump writes the files of a dump.
func exportDump(env *cliEnv, dumpPath, pass string, o exportOptions) error {
	docs, local, err := readDumpFile(dumpPath)
	if err != nil {
		return err
	}
	v, err := vaultOf(docs, local, pass)
	if err != nil {
		return err
	}
	codec, err := livesync.New(livesync.Config{Settings: v.settings, Salt: v.salt})
	if err != nil {
		return err
	}

	// Decode every document to its local form first: a wrong passphrase
	// shows at the first encrypted document, before anything is written.
	plain := make(map[string]livesync.Doc, len(docs))
	var files []livesync.Meta
	var broken []string
	for _, d := range docs {
		pd, err := codec.DecodeRemote(d)
		if err != nil {
			if errors.Is(err, engine.ErrDecrypt) {
				return fmt.Errorf("%w (is the passphrase right?)", err)
			}
			return err
		}
		plain[pd.ID()] = pd
		if pd.IsFileDoc() {
			meta, err := livesync.ParseMeta(pd)
			if err != nil {
				broken = append(broken, fmt.Sprintf("skip %s: %v", pd.ID(), err))
				continue
			}
			files = append(files, meta)
		}
	}
	get := func(id string) (string, error) {
		d, ok := plain[id]
		if !ok {
			return "", engine.ErrNotFound
		}
		c, err := livesync.ParseChunk(d)
		return c.Data, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	for _, line := range broken {
		fmt.Fprintln(env.stderr, line)
	}
	c, err := writeFiles(env, files, func(m livesync.Meta) ([]byte, error) { return livesync.ReadFile(m, get) }, o)
	c.failed += len(broken)
	c.total += len(broken)
	if err != nil {
		return err
	}
	return c.report(env, o.out, nil)
}

// writeFiles materialises files into o.out, each read by read. A file
// that cannot be read or written is named on stderr and skipped; a full
// disk stops the export.
func writeFiles(env *cliEnv, files []livesync.Meta, read func(livesync.Meta) ([]byte, error), o exportOptions) (exportCounts, error) {
	c := exportCounts{total: len(files)}
	for _, meta := range files {
		if err := env.ctx.Err(); err != nil {
			return c, err
		}
		rel, ok := exportPath(meta.Path, o.hidden)
		if !ok || (meta.Deleted && !o.deleted) {
			c.skipped++
			continue
		}
		data, err := read(meta)
		if err != nil {
			var le *localError
			if errors.As(err, &le) {
				return c, err
			}
			fmt.Fprintf(env.stderr, "skip %s: %v\n", meta.ID, err)
			c.failed++
			continue
		}
		dst := filepath.Join(o.out, filepath.FromSlash(rel))
		if err := writeFileAtomic(dst, data, meta.MTime); err != nil {
			if isDiskFull(err) {
				return c, &localError{o.out, err}
			}
			fmt.Fprintf(env.stderr, "skip %s: %v\n", meta.ID, err)
			c.failed++
			continue
		}
		c.written++
		c.bytes += int64(len(data))
	}
	return c, nil
}

// exportReplica writes the files of the local replica, after pulling the
// remote into it when one is given (into a temporary replica unless
// --store names one).
func exportReplica(env *cliEnv, remoteArg string, cf commonFlags, o exportOptions) error {
	cfg, err := env.loadConfig(cf.config)
	if err != nil {
		return err
	}
	var rep *replica
	var pullErr error // a partial pull (quarantined packs): reported after the export
	extra := map[string]any{}
	if remoteArg == "" {
		if rep, err = env.openReplica(storePath(cf.store, cfg), false); err != nil {
			return err
		}
		defer rep.Close()
	} else {
		spec, err := resolveRemote(cfg, remoteArg)
		if err != nil {
			return err
		}
		if cf.store != "" {
			rep, err = env.openReplica(cf.store, true)
		} else {
			rep, err = env.openTempReplica()
		}
		if err != nil {
			return err
		}
		defer rep.Close()
		// A throwaway replica only reads the remote (no trace, no
		// joining a locked one); a --store replica is a device.
		rem, err := env.connect(spec, rep, connectOptions{flags: cf, deviceName: cfg.DeviceName, readOnly: cf.store == ""})
		if err != nil {
			return err
		}
		defer rem.Close()
		node, err := rep.nodeID(env.ctx)
		if err != nil {
			return err
		}
		pr := newProgress(env, cf.quiet, false)
		res, err := rem.Replicate(env.ctx, rep.st, node, replicate.Pull, replicateOptions{progress: pr.update, packs: pr.pack})
		pr.finish()
		if err != nil {
			return err
		}
		extra["remote"] = rem.ID()
		extra["pulled"] = progressJSON(res.Pull)
		if res.journal != nil {
			extra["quarantined"] = quarantineJSON(res.quarantined)
		}
		for _, q := range res.quarantined {
			warnQuarantined(env, rem.ID(), q, res.newlyQuarantined(q))
		}
		pullErr = journalOutcome(res)
	}
	infos, err := localFiles(env.ctx, rep.st)
	if err != nil {
		return err
	}
	files := make([]livesync.Meta, len(infos))
	for i, f := range infos {
		files[i] = f.meta
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		if isDiskFull(err) {
			return &localError{o.out, err}
		}
		return err
	}
	c, err := writeFiles(env, files, func(m livesync.Meta) ([]byte, error) { return readFile(env.ctx, rep.st, m, nil) }, o)
	if err != nil {
		return err
	}
	if err := c.report(env, o.out, extra); err != nil {
		return err
	}
	return pullErr
}

// exportPath maps a document path to a safe relative file path. It refuses
// paths that would leave the output folder, and customisation-sync (ix:)
// and obsolete plugin (ps:) documents; hidden files (i:) only when asked.
func exportPath(p string, hidden bool) (string, bool) {
	switch {
	case strings.HasPrefix(p, "i:"):
		if !hidden {
			return "", false
		}
		p = p[2:]
	case strings.Contains(p, ":"):
		return "", false
	}
	p = strings.ReplaceAll(p, "\\", "/")
	clean := path.Clean("/" + p)[1:]
	if clean == "" || clean != strings.Trim(p, "/") || strings.HasPrefix(clean, "../") || clean == ".." {
		return "", false
	}
	return clean, true
}

// writeFileAtomic writes data to a temporary file beside dst and renames
// it into place, so an interrupted export never leaves a half file.
func writeFileAtomic(dst string, data []byte, mtimeMillis int64) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".livesync-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if mtimeMillis > 0 {
		t := time.UnixMilli(mtimeMillis)
		if err := os.Chtimes(tmp.Name(), t, t); err != nil {
			return err
		}
	}
	return os.Rename(tmp.Name(), dst)
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
	docs, local, err = readDump(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return docs, local, nil
}

// vault is what a dump says about its vault.
type vault struct {
	settings livesync.Settings
	salt     []byte
}

// vaultOf reads the vault's settings from the milestone's PREFERRED tweak
// values and the E2EE salt from the sync parameters. Without a milestone
// the new-vault defaults apply, with encryption turned on if any
// document carries ciphertext.
func vaultOf(docs, local []livesync.Doc, passphrase string) (vault, error) {
	v := vault{settings: livesync.Settings{Passphrase: passphrase}}
	haveMilestone := false
	for _, d := range local {
		switch d.ID() {
		case negotiate.SyncParametersDocID:
			p, err := negotiate.ParseSyncParameters(mustJSON(d))
			if err != nil {
				return v, fmt.Errorf("the sync parameters document: %w", err)
			}
			salt, err := p.Salt()
			if err != nil {
				return v, fmt.Errorf("the sync parameters document: %w", err)
			}
			v.salt = salt
		case negotiate.MilestoneDocID:
			m, err := negotiate.ParseMilestone(mustJSON(d))
			if err != nil {
				return v, fmt.Errorf("the milestone document: %w", err)
			}
			if pref, ok := m.TweakValues[negotiate.PreferredNode]; ok {
				s, err := livesync.FromTweakValues(v.settings, pref)
				if err != nil && !(errors.Is(err, engine.ErrUnsupported) && passphrase == "") {
					return v, err
				}
				v.settings = s
				haveMilestone = true
			}
		}
	}
	if !haveMilestone {
		for _, d := range docs {
			if _, ok := d["e_"]; ok {
				v.settings.Encrypt = true
				break
			}
		}
	}
	if (v.settings.Encrypt || v.settings.PathObfuscation) && passphrase == "" {
		return v, fmt.Errorf("the vault is end-to-end encrypted: set LIVESYNC_PASSPHRASE or use --passphrase-file")
	}
	if v.settings.Encrypt && v.salt == nil {
		return v, fmt.Errorf("the vault is encrypted but the dump has no %s document (its salt): add it under \"local_docs\"", negotiate.SyncParametersDocID)
	}
	return v, nil
}

func mustJSON(d livesync.Doc) []byte {
	b, _ := d.MarshalJSON()
	return b
}
