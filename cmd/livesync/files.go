package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/activity"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/fetch"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// fileInfo is one file of a listing.
type fileInfo struct {
	meta        livesync.Meta
	localChunks int // distinct children held locally (-1: not known)
	chunks      int // distinct children
}

// localFiles returns the file metadata of the replica (winning revisions;
// soft-deleted files included, marked) with how many of their chunks are
// local, sorted by path.
func localFiles(ctx context.Context, st store.Store) ([]fileInfo, error) {
	infos, err := st.AllDocs(ctx, store.AllDocsOptions{})
	if err != nil {
		return nil, err
	}
	var out []fileInfo
	for _, in := range infos {
		if docid.IsChunkID(in.ID) || docid.IsSystemID(in.ID) {
			continue
		}
		raw, err := st.Get(ctx, in.ID, store.GetOptions{})
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		d, err := livesync.ParseDoc(raw)
		if err != nil || !d.IsFileDoc() {
			continue
		}
		m, err := livesync.ParseMeta(d)
		if err != nil {
			continue
		}
		ids := distinct(m.Children)
		have, err := st.GetChunks(ctx, ids)
		if err != nil {
			return nil, err
		}
		out = append(out, fileInfo{meta: m, localChunks: len(have), chunks: len(ids)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].meta.Path < out[j].meta.Path })
	return out, nil
}

// distinct returns the ids without repeats, in order of first use.
func distinct(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

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
	var files []fileInfo
	var err error
	if *remoteArg != "" {
		files, err = remoteFiles(c, *remoteArg)
	} else {
		files, err = replicaFiles(c)
	}
	if err != nil {
		return err
	}
	var shown []fileInfo
	for _, f := range files {
		if (f.meta.Deleted && !*deleted) || !strings.HasPrefix(f.meta.Path, prefix) {
			continue
		}
		shown = append(shown, f)
	}
	if c.cf.json {
		rows := make([]map[string]any, 0, len(shown))
		for _, f := range shown {
			row := map[string]any{"path": f.meta.Path, "id": f.meta.ID, "rev": f.meta.Rev, "size": f.meta.Size,
				"mtime": f.meta.MTime, "ctime": f.meta.CTime, "deleted": f.meta.Deleted, "chunks": f.chunks}
			if f.localChunks >= 0 {
				row["chunks_local"] = f.localChunks
				row["chunks_missing"] = f.chunks - f.localChunks
			}
			rows = append(rows, row)
		}
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "ls", "files": rows})
		return nil
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SIZE\tMODIFIED\tCHUNKS\t  PATH")
	for _, f := range shown {
		chunks := fmt.Sprint(f.chunks)
		if f.localChunks >= 0 {
			chunks = fmt.Sprintf("%d/%d", f.localChunks, f.chunks)
		}
		p := safe(f.meta.Path)
		if f.meta.Deleted {
			p += " (deleted)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t  %s\n", f.meta.Size, time.UnixMilli(f.meta.MTime).Format("2006-01-02 15:04:05"), chunks, p)
	}
	return tw.Flush()
}

// replicaFiles lists the files of the local replica.
func replicaFiles(c *command) ([]fileInfo, error) {
	rep, err := c.replica(false)
	if err != nil {
		return nil, err
	}
	defer rep.Close()
	return localFiles(c.ctx, rep.st)
}

// remoteFiles lists the files of a remote, read without writing to it.
func remoteFiles(c *command, arg string) ([]fileInfo, error) {
	spec, err := c.remote(arg)
	if err != nil {
		return nil, err
	}
	// The handshake needs this device's node id: the replica's if there
	// is one, else a temporary replica's.
	path, _ := c.storePath()
	var rep *replica
	if _, serr := os.Stat(path); serr == nil {
		rep, err = c.openReplica(path, false)
	} else {
		rep, err = c.openTempReplica()
	}
	if err != nil {
		return nil, err
	}
	defer rep.Close()
	rem, err := c.connect(spec, rep, connectOptions{readOnly: true})
	if err != nil {
		return nil, err
	}
	defer rem.Close()
	metas, err := rem.Files(c.ctx)
	if err != nil {
		return nil, err
	}
	var files []fileInfo
	for _, m := range metas {
		files = append(files, fileInfo{meta: m, localChunks: -1, chunks: len(distinct(m.Children))})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].meta.Path < files[j].meta.Path })
	return files, nil
}

// vaultPathOf turns a path given by the user into a vault path: slashes,
// no leading "/", and the "i:" prefix of Hidden File Sync for a path
// with a dot-file or dot-folder. It refuses paths that leave the vault.
func vaultPathOf(p string) (string, error) {
	p = strings.ReplaceAll(p, "\\", "/")
	clean := path.Clean("/" + p)[1:]
	if clean == "" || strings.Contains(clean, ":") {
		return "", usageError{fmt.Sprintf("%q is not a vault path (use the file's path inside the vault, like notes/today.md)", p)}
	}
	if strings.HasPrefix(clean, ".") || strings.Contains(clean, "/.") {
		return "i:" + clean, nil
	}
	return clean, nil
}

// localVault returns the settings of the replica's vault with the
// passphrase when the vault needs one.
func (c *command) localVault(rep *replica) (livesync.Settings, error) {
	if rep.vault == nil {
		return livesync.Settings{}, fmt.Errorf("the local replica %s holds no vault yet: pull from a remote first", rep.path)
	}
	s, err := settingsOf(rep.vault.Tweaks)
	if err != nil {
		return s, err
	}
	if needsPassphrase(s) {
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

// checkLocalPassphrase checks the passphrase against the replica's own
// documents: chunk ids (with E2EE) and obfuscated file ids are keyed by
// the passphrase, so the ids of a few stored chunks and files are
// computed again. Another passphrase would write documents no other
// device of the vault can read or find. Nothing new is stored: the check
// uses only what the replica already holds.
func checkLocalPassphrase(ctx context.Context, rep *replica, s livesync.Settings) error {
	codec, err := livesync.New(livesync.Config{Settings: s})
	if err != nil {
		return err
	}
	const probes = 5
	if s.Encrypt {
		infos, err := rep.st.AllDocs(ctx, store.AllDocsOptions{StartKey: docid.PrefixChunk + "+", EndKey: docid.PrefixChunk + "+\uffff", Limit: probes})
		if err != nil {
			return err
		}
		ids := make([]string, len(infos))
		for i, in := range infos {
			ids[i] = in.ID
		}
		have, err := rep.st.GetChunks(ctx, ids)
		if err != nil {
			return err
		}
		if len(have) > 0 && !anyMatch(have, func(c engine.Chunk) bool { return codec.ChunkID(c.Data) == c.ID }) {
			return &passphraseError{remote: "the local replica " + rep.path, docID: ids[0]}
		}
	}
	if s.PathObfuscation {
		infos, err := rep.st.AllDocs(ctx, store.AllDocsOptions{StartKey: docid.PrefixObfuscated, EndKey: docid.PrefixObfuscated + "\uffff", Limit: probes})
		if err != nil {
			return err
		}
		checked, matched := 0, 0
		for _, in := range infos {
			raw, err := rep.st.Get(ctx, in.ID, store.GetOptions{})
			if err != nil {
				continue
			}
			d, err := livesync.ParseDoc(raw)
			if err != nil || !d.IsFileDoc() {
				continue
			}
			m, err := livesync.ParseMeta(d)
			if err != nil {
				continue
			}
			checked++
			if codec.DocID(m.Path) == m.ID {
				matched++
			}
		}
		if checked > 0 && matched == 0 {
			return &passphraseError{remote: "the local replica " + rep.path, docID: infos[0].ID}
		}
	}
	return nil
}

func anyMatch(m map[string]engine.Chunk, ok func(engine.Chunk) bool) bool {
	for _, c := range m {
		if ok(c) {
			return true
		}
	}
	return false
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

// findFile returns the metadata of the file at vault path p: by its id,
// else by scanning for its path (ids of files written by other tools may
// not follow the rules).
func findFile(ctx context.Context, st store.Store, ids *docid.Mapper, p string) (livesync.Meta, error) {
	raw, err := st.Get(ctx, ids.FromPath(p), store.GetOptions{})
	if err == nil {
		if d, err := livesync.ParseDoc(raw); err == nil && d.IsFileDoc() {
			if m, err := livesync.ParseMeta(d); err == nil && !m.Deleted {
				return m, nil
			}
		}
	} else if !errors.Is(err, engine.ErrNotFound) {
		return livesync.Meta{}, err
	}
	files, err := localFiles(ctx, st)
	if err != nil {
		return livesync.Meta{}, err
	}
	for _, f := range files {
		if f.meta.Path == p && !f.meta.Deleted {
			return f.meta, nil
		}
	}
	return livesync.Meta{}, fmt.Errorf("no file %q in the local replica: %w", p, engine.ErrNotFound)
}

// idMapper returns the document-id rules of settings s.
func idMapper(s livesync.Settings) *docid.Mapper {
	o := docid.Options{CaseSensitive: s.CaseSensitive}
	if s.PathObfuscation {
		o.ObfuscationPassphrase = s.Passphrase
	}
	return docid.New(o)
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
	var rem remote
	if *remoteArg != "" {
		spec, err := c.remote(*remoteArg)
		if err != nil {
			return err
		}
		if rem, err = c.connect(spec, rep, connectOptions{readOnly: true}); err != nil {
			return err
		}
		defer rem.Close()
	}
	s, err := c.localVault(rep)
	if err != nil {
		return err
	}
	m, err := findFile(env.ctx, rep.st, idMapper(s), p)
	if err != nil {
		return err
	}
	data, err := readFile(env.ctx, rep.st, m, rem)
	if err != nil {
		return err
	}
	if _, err := env.stdout.Write(data); err != nil {
		return &localError{"stdout", err}
	}
	return nil
}

// readFile reassembles a file from the replica's chunks; with a remote,
// missing chunks are fetched from it through engine/fetch (batched,
// throttled, retried as LiveSync does) and kept in the replica.
func readFile(ctx context.Context, st store.Store, m livesync.Meta, rem remote) ([]byte, error) {
	ids := distinct(m.Children)
	have, err := st.GetChunks(ctx, ids)
	if err != nil {
		return nil, err
	}
	if len(have) < len(ids) {
		if rem != nil && rem.Chunks() == nil {
			return nil, fmt.Errorf("%d of %d chunks of %q are not in the local replica, and %s cannot fetch chunks by id "+
				"(a journal bucket needs direct_fetch = true, or ?direct-fetch=1 in its URL): pull them instead: %w",
				len(ids)-len(have), len(ids), m.Path, rem.ID(), engine.ErrMissingChunk)
		}
		if rem == nil {
			return nil, fmt.Errorf("%d of %d chunks of %q are not in the local replica: pull them, or give --remote to fetch them: %w",
				len(ids)-len(have), len(ids), m.Path, engine.ErrMissingChunk)
		}
		if have, err = fetchChunks(ctx, st, rem.Chunks(), ids); err != nil {
			return nil, err
		}
	}
	return livesync.ReadFile(m, func(id string) (string, error) {
		c, ok := have[id]
		if !ok {
			return "", engine.ErrNotFound
		}
		return c.Data, nil
	})
}

// fetchChunks reads ids through the fetch layer: local ones from st, the
// others from src, persisted into st on arrival.
func fetchChunks(ctx context.Context, st store.Store, src engine.ChunkSource, ids []string) (map[string]engine.Chunk, error) {
	act := activity.New(nil)
	defer act.Close()
	claims := fetch.NewCoordinator()
	defer claims.Close()
	f, err := fetch.New(fetch.Config{}, fetch.Deps{Source: src, Local: st, Activity: act, Claims: claims})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	layer, err := fetch.NewLayer(fetch.LayerConfig{}, fetch.LayerDeps{Local: st, Activity: act, Claims: claims, Fetcher: f})
	if err != nil {
		return nil, err
	}
	defer layer.Close()
	res, err := layer.Get(ctx, ids, fetch.ReadOptions{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]engine.Chunk, len(ids))
	missing := 0
	var firstErr error
	for i, r := range res {
		if r.OK {
			out[ids[i]] = r.Chunk
			continue
		}
		var ee *engine.Error
		if errors.As(r.Err, &ee) && (ee.Stage == engine.StageTransport || ee.Stage == engine.StageAuth) {
			return nil, r.Err
		}
		missing++
		if firstErr == nil {
			firstErr = r.Err
		}
	}
	if missing > 0 {
		return nil, fmt.Errorf("%d of %d chunks are neither local nor on the remote: %w", missing, len(ids), firstErr)
	}
	return out, nil
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
	if rep.vault == nil {
		// A new vault: the command line's settings, else the default
		// remote's from the configuration.
		vc := vf.config(c.fs)
		if spec := defaultSpec(cfg); spec != nil {
			vc = spec.cfg.vaultConfig.merge(vc)
			if spec.kind == "s3" && vc.CustomChunkSize == nil {
				size := journalChunkSize
				vc.CustomChunkSize = &size
			}
		}
		if err := rep.setVault(env.ctx, newVaultSettings(vc).TweakValues()); err != nil {
			return err
		}
	}
	s, err := c.localVault(rep)
	if err != nil {
		return err
	}
	codec, err := livesync.New(livesync.Config{Settings: s})
	if err != nil {
		return err
	}
	res, err := putFile(env.ctx, rep.st, codec, p, data, mtime)
	if err != nil {
		return err
	}
	if c.cf.json {
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "put", "path": p, "id": res.meta.ID, "rev": res.meta.Rev,
			"size": len(data), "chunks": len(distinct(res.meta.Children)), "new_chunks": res.newChunks, "unchanged": res.unchanged})
		return nil
	}
	if res.unchanged {
		fmt.Fprintf(env.stdout, "%s: unchanged\n", safe(p))
	} else {
		n := len(distinct(res.meta.Children))
		fmt.Fprintf(env.stdout, "%s: %d bytes, %d %s (%d new), revision %s\n", safe(p), len(data), n, plural(n, "chunk", "chunks"), res.newChunks, res.meta.Rev)
	}
	return nil
}

// putResult is what putFile did.
type putResult struct {
	meta      livesync.Meta
	newChunks int
	unchanged bool
}

// putFile writes a file into the replica as LiveSync does: its chunks
// first, then its metadata as a new revision of the file's document
// (keeping its ctime). A file whose content is unchanged gets no new
// revision.
func putFile(ctx context.Context, st store.Store, codec *livesync.Codec, p string, data []byte, mtime int64) (putResult, error) {
	meta, chunks, err := codec.FileDocs(p, data, mtime, mtime)
	if err != nil {
		return putResult{}, err
	}
	var prevRev string
	switch raw, err := st.Get(ctx, meta.ID, store.GetOptions{}); {
	case err == nil:
		d, perr := livesync.ParseDoc(raw)
		if perr == nil && d.IsFileDoc() {
			if old, perr := livesync.ParseMeta(d); perr == nil {
				if !old.Deleted && old.Size == meta.Size && slicesEqual(old.Children, meta.Children) && old.Type == meta.Type {
					return putResult{meta: old, unchanged: true}, nil
				}
				if !old.Deleted && old.CTime != 0 {
					meta.CTime = old.CTime
				}
			}
		}
		prevRev = d.Rev()
	case !errors.Is(err, engine.ErrNotFound):
		return putResult{}, err
	}
	ids := make([]string, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID
	}
	have, err := st.GetChunks(ctx, ids)
	if err != nil {
		return putResult{}, err
	}
	// Chunks before the metadata that names them (FORMAT.md §3.1): a
	// replica (and, replicated in sequence order, a remote) never holds
	// metadata whose chunks were not written first.
	if err := st.PutChunks(ctx, chunks); err != nil {
		return putResult{}, err
	}
	meta.Rev = prevRev
	b, err := meta.Doc().MarshalJSON()
	if err != nil {
		return putResult{}, err
	}
	rev, err := st.Put(ctx, b)
	if err != nil {
		return putResult{}, err
	}
	meta.Rev = rev
	return putResult{meta: meta, newChunks: len(chunks) - len(have)}, nil
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
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
	s, err := c.localVault(rep)
	if err != nil {
		return err
	}
	m, err := findFile(env.ctx, rep.st, idMapper(s), p)
	if err != nil {
		return err
	}
	rev, err := deleteFile(env.ctx, rep.st, m, env.now())
	if err != nil {
		return err
	}
	if c.cf.json {
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "rm", "path": m.Path, "id": m.ID, "rev": rev})
		return nil
	}
	fmt.Fprintf(env.stdout, "%s: deleted, revision %s\n", safe(m.Path), safe(rev))
	return nil
}

// deleteFile deletes a file as the plugin does (FORMAT.md §1.3): a new
// revision of its metadata with deleted: true and mtime now, the body
// kept (not a _deleted tombstone, so readChunksOnline selectors still see
// it); a hidden file's also gets size 0 and no children.
func deleteFile(ctx context.Context, st store.Store, m livesync.Meta, now time.Time) (string, error) {
	m.Deleted = true
	m.MTime = now.UnixMilli()
	if docid.IsHiddenFileID(m.ID) {
		m.Size, m.Children = 0, []string{}
	}
	d := m.Doc()
	b, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	return st.Put(ctx, b)
}
