package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/vault"
)

func runLs(env *cliEnv, args []string) error {
	c := env.newCommand("ls", "ls [PREFIX] [--remote REMOTE] [--deleted] [flags]")
	remoteArg := c.fs.String("remote", "", "list the remote directly instead of the local replica")
	deleted := c.fs.Bool("deleted", false, "also list deleted files")
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.pos) > 1 {
		return usageError{"ls takes at most one path prefix"}
	}
	prefix := first(c.pos)
	var files []vault.File
	var err error
	if *remoteArg != "" {
		files, err = remoteFiles(c, *remoteArg)
	} else {
		files, err = replicaFiles(c)
	}
	if err != nil {
		return err
	}
	var shown []vault.File
	for _, f := range files {
		if (f.Meta.Deleted && !*deleted) || !strings.HasPrefix(f.Meta.Path, prefix) {
			continue
		}
		shown = append(shown, f)
	}
	if c.cf.json {
		rows := make([]map[string]any, 0, len(shown))
		for _, f := range shown {
			row := map[string]any{"path": f.Meta.Path, "id": f.Meta.ID, "rev": f.Meta.Rev, "size": f.Meta.Size,
				"mtime": f.Meta.MTime, "ctime": f.Meta.CTime, "deleted": f.Meta.Deleted, "chunks": f.Chunks}
			if f.LocalChunks >= 0 {
				row["chunks_local"] = f.LocalChunks
				row["chunks_missing"] = f.Chunks - f.LocalChunks
			}
			rows = append(rows, row)
		}
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "ls", "files": rows})
		return nil
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SIZE\tMODIFIED\tCHUNKS\t  PATH")
	for _, f := range shown {
		chunks := fmt.Sprint(f.Chunks)
		if f.LocalChunks >= 0 {
			chunks = fmt.Sprintf("%d/%d", f.LocalChunks, f.Chunks)
		}
		p := safe(f.Meta.Path)
		if f.Meta.Deleted {
			p += " (deleted)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t  %s\n", f.Meta.Size, time.UnixMilli(f.Meta.MTime).Format("2006-01-02 15:04:05"), chunks, p)
	}
	return tw.Flush()
}

// replicaFiles lists the files of the local replica.
func replicaFiles(c *command) ([]vault.File, error) {
	rep, err := c.replica(false)
	if err != nil {
		return nil, err
	}
	defer rep.Close()
	return rep.v.List(c.ctx, "", vault.ListOptions{Deleted: true})
}

// remoteFiles lists the files of a remote, read without writing to it.
func remoteFiles(c *command, arg string) ([]vault.File, error) {
	spec, err := c.remote(arg)
	if err != nil {
		return nil, err
	}
	// The handshake needs this device's node id: the replica's if there
	// is one, else a temporary replica's.
	rep, err := c.existingReplica()
	if err == nil && rep == nil {
		rep, err = c.openTempReplica()
	}
	if err != nil {
		return nil, err
	}
	defer rep.Close()
	l, err := c.connect(spec, rep, connectOptions{readOnly: true})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	metas, err := l.Files(c.ctx)
	if err != nil {
		return nil, l.wrap(err)
	}
	var files []vault.File
	for _, m := range metas {
		files = append(files, vault.File{Meta: m, LocalChunks: -1, Chunks: len(vault.Distinct(m.Children))})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Meta.Path < files[j].Meta.Path })
	return files, nil
}

// vaultPathOf turns a path given by the user into a vault path
// (vault.PathOf); a path that leaves the vault is a usage error.
func vaultPathOf(p string) (string, error) {
	vp, err := vault.PathOf(p)
	if err != nil {
		return "", usageError{strings.TrimSuffix(err.Error(), ": "+vault.ErrBadPath.Error())}
	}
	return vp, nil
}

// localVault makes sure the replica holds a vault, and gives it the
// passphrase when it needs one (checked against the replica's own
// documents). It returns the vault's settings with the passphrase.
func (c *command) localVault(rep *replica) (livesync.Settings, error) {
	if !rep.v.HasVault() {
		return livesync.Settings{}, fmt.Errorf("the local replica %s holds no vault yet: pull from a remote first", rep.path)
	}
	s, err := rep.v.Settings()
	if err != nil {
		return s, err
	}
	if vault.NeedsPassphrase(s) {
		cfg, err := c.config()
		if err != nil {
			return s, err
		}
		if s.Passphrase, err = c.passphraseFor(defaultSpec(cfg), c.cf); err != nil {
			return s, err
		}
		if err := checkLocalPassphrase(c.ctx, rep, s); err != nil {
			return s, err
		}
	}
	return s, nil
}

// checkLocalPassphrase checks the passphrase of s against the replica's
// own documents (vault.Vault.SetPassphrase), and gives it to the vault.
func checkLocalPassphrase(ctx context.Context, rep *replica, s livesync.Settings) error {
	return rep.fileErr("", rep.v.SetPassphrase(ctx, s.Passphrase))
}

// fileErr puts an error of the vault's file operations on path p in the
// CLI's words: the local replica named by its path, and what to do
// about a missing file or missing chunks.
func (r *replica) fileErr(p string, err error) error {
	var pe *vault.PassphraseError
	var me *vault.MissingChunksError
	switch {
	case errors.As(err, &pe) && pe.Remote == "":
		return &passphraseError{remote: "the local replica " + r.path, docID: pe.DocID, what: pe.What}
	case errors.As(err, &me) && me.Fetched:
		return fmt.Errorf("%d of %d chunks are neither local nor on the remote: %w", me.Missing, me.Total, me.Err)
	case errors.As(err, &me) && len(me.NoFetch) > 0:
		return fmt.Errorf("%d of %d chunks of %q are not in the local replica, and %s cannot fetch chunks by id "+
			"(a journal bucket needs direct_fetch = true, or ?direct-fetch=1 in its URL): pull them instead: %w",
			me.Missing, me.Total, me.Path, strings.Join(me.NoFetch, ", "), engine.ErrMissingChunk)
	case errors.As(err, &me):
		return fmt.Errorf("%d of %d chunks of %q are not in the local replica: pull them, or give --remote to fetch them: %w",
			me.Missing, me.Total, me.Path, engine.ErrMissingChunk)
	case errors.Is(err, engine.ErrNotFound) && p != "":
		var le *localError
		if !errors.As(err, &le) {
			return fmt.Errorf("no file %q in the local replica: %w", p, engine.ErrNotFound)
		}
	}
	return err
}

// defaultSpec is the configuration's default remote (for its passphrase
// file), or nil.
func defaultSpec(cfg *config) *remoteSpec {
	if cfg.DefaultRemote == "" {
		return nil
	}
	spec, err := resolveRemote(cfg, cfg.DefaultRemote)
	if err != nil {
		return nil
	}
	return &spec
}

func runCat(env *cliEnv, args []string) error {
	c := env.newCommand("cat", "cat PATH [--remote REMOTE] [flags]")
	remoteArg := c.fs.String("remote", "", "fetch chunks missing from the local replica from this remote (they are kept)")
	if err := c.parse(args); err != nil {
		return err
	}
	env.json = false // cat answers with the file's bytes, never JSON
	if len(c.pos) != 1 {
		return usageError{"cat takes one vault path"}
	}
	p, err := vaultPathOf(c.pos[0])
	if err != nil {
		return err
	}
	rep, err := c.replica(*remoteArg != "")
	if err != nil {
		return err
	}
	defer rep.Close()
	if *remoteArg != "" {
		spec, err := c.remote(*remoteArg)
		if err != nil {
			return err
		}
		l, err := c.connect(spec, rep, connectOptions{readOnly: true})
		if err != nil {
			return err
		}
		defer l.Close()
	}
	if _, err := c.localVault(rep); err != nil {
		return err
	}
	data, err := rep.v.Read(env.ctx, p)
	if err != nil {
		return rep.fileErr(p, err)
	}
	if _, err := env.stdout.Write(data); err != nil {
		return &localError{"stdout", err}
	}
	return nil
}

func runPut(env *cliEnv, args []string) error {
	c := env.newCommand("put", "put PATH [FILE|-] [flags]")
	var vf vaultFlags
	addVaultFlags(c.fs, &vf)
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.pos) < 1 || len(c.pos) > 2 {
		return usageError{"put takes a vault path and a file (or - for stdin)"}
	}
	p, err := vaultPathOf(c.pos[0])
	if err != nil {
		return err
	}
	cfg, err := c.config()
	if err != nil {
		return err
	}
	var data []byte
	mtime := env.now().UnixMilli()
	if src := first(c.pos[1:]); src == "" || src == "-" {
		if data, err = io.ReadAll(env.stdin); err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
	} else {
		info, err := os.Stat(src)
		if err != nil {
			return err
		}
		if data, err = os.ReadFile(src); err != nil {
			return err
		}
		mtime = info.ModTime().UnixMilli()
	}
	rep, err := c.replica(true)
	if err != nil {
		return err
	}
	defer rep.Close()
	if !rep.v.HasVault() {
		// A new vault: the command line's settings, else the default
		// remote's from the configuration.
		vc, journal := vf.config(c.fs), false
		if spec := defaultSpec(cfg); spec != nil {
			vc, journal = spec.cfg.vaultConfig.merge(vc), spec.kind == "s3"
		}
		if err := rep.v.Create(env.ctx, newVaultSettings(vc, journal)); err != nil {
			return err
		}
	}
	if _, err := c.localVault(rep); err != nil {
		return err
	}
	res, err := rep.v.Write(env.ctx, p, data, vault.WriteOptions{MTime: time.UnixMilli(mtime)})
	if err != nil {
		return err
	}
	n := len(vault.Distinct(res.Meta.Children))
	if c.cf.json {
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "put", "path": p, "id": res.Meta.ID, "rev": res.Meta.Rev,
			"size": len(data), "chunks": n, "new_chunks": res.NewChunks, "unchanged": res.Unchanged})
		return nil
	}
	if res.Unchanged {
		fmt.Fprintf(env.stdout, "%s: unchanged\n", safe(p))
	} else {
		fmt.Fprintf(env.stdout, "%s: %d bytes, %d %s (%d new), revision %s\n", safe(p), len(data), n, plural(n, "chunk", "chunks"), res.NewChunks, res.Meta.Rev)
	}
	return nil
}

func runRm(env *cliEnv, args []string) error {
	c := env.newCommand("rm", "rm PATH [flags]")
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.pos) != 1 {
		return usageError{"rm takes one vault path"}
	}
	p, err := vaultPathOf(c.pos[0])
	if err != nil {
		return err
	}
	rep, err := c.replica(false)
	if err != nil {
		return err
	}
	defer rep.Close()
	if _, err := c.localVault(rep); err != nil {
		return err
	}
	m, err := rep.v.Delete(env.ctx, p)
	if err != nil {
		return rep.fileErr(p, err)
	}
	rev := m.Rev
	if c.cf.json {
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "rm", "path": m.Path, "id": m.ID, "rev": rev})
		return nil
	}
	fmt.Fprintf(env.stdout, "%s: deleted, revision %s\n", safe(m.Path), safe(rev))
	return nil
}
