package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// ErrBadPath means a path is not a vault path.
var ErrBadPath = errors.New("vault: not a vault path")

// File is one file of the vault as the replica holds it.
type File struct {
	Meta livesync.Meta
	// Chunks counts the distinct chunks the file needs; LocalChunks
	// those the replica holds (-1: not known, for a remote's listing).
	Chunks, LocalChunks int
}

// Held reports whether the file is not deleted and lacks chunks locally.
func (f File) Held() bool { return !f.Meta.Deleted && f.LocalChunks >= 0 && f.LocalChunks < f.Chunks }

// ListOptions choose what List returns.
type ListOptions struct {
	// Deleted also lists deleted files (marked in Meta.Deleted).
	Deleted bool
}

// WriteOptions are the times of a written file.
type WriteOptions struct {
	// MTime is the modification time (zero: now).
	MTime time.Time
	// CTime is the creation time (zero: kept from the file's previous
	// revision, else MTime).
	CTime time.Time
}

// WriteResult is what Write did.
type WriteResult struct {
	Meta livesync.Meta
	// NewChunks counts the chunks the replica did not hold yet.
	NewChunks int
	// Unchanged: the file already had this content; no revision was
	// written.
	Unchanged bool
}

// PathOf turns a path into a vault path: slashes, no leading "/", and
// the "i:" prefix of Hidden File Sync for a path with a dot-file or
// dot-folder. It refuses paths that leave the vault (an error wrapping
// ErrBadPath).
func PathOf(p string) (string, error) {
	p = strings.ReplaceAll(p, "\\", "/")
	clean := path.Clean("/" + p)[1:]
	if clean == "" || strings.Contains(clean, ":") {
		return "", fmt.Errorf("%q is not a vault path (use the file's path inside the vault, like notes/today.md): %w", p, ErrBadPath)
	}
	if strings.HasPrefix(clean, ".") || strings.Contains(clean, "/.") {
		return "i:" + clean, nil
	}
	return clean, nil
}

// List returns the files of the replica whose path starts with prefix
// (winning revisions), with how many of their chunks are local, sorted
// by path. It needs no passphrase.
func (v *Vault) List(ctx context.Context, prefix string, o ListOptions) ([]File, error) {
	all, err := localFiles(ctx, v.st)
	if err != nil {
		return nil, err
	}
	var out []File
	for _, f := range all {
		if (f.Meta.Deleted && !o.Deleted) || !strings.HasPrefix(f.Meta.Path, prefix) {
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

// Stat returns the file at vault path p (not deleted), or an error
// wrapping engine.ErrNotFound.
func (v *Vault) Stat(ctx context.Context, p string) (File, error) {
	ids, err := v.ids()
	if err != nil {
		return File{}, err
	}
	m, err := findFile(ctx, v.st, ids, p)
	if err != nil {
		return File{}, err
	}
	return fileOf(ctx, v.st, m)
}

// localFiles returns the file metadata of the replica (winning
// revisions, deleted files included) with their chunk counts, by path.
func localFiles(ctx context.Context, st store.Store) ([]File, error) {
	infos, err := st.AllDocs(ctx, store.AllDocsOptions{})
	if err != nil {
		return nil, err
	}
	var out []File
	for _, in := range infos {
		if docid.IsChunkID(in.ID) || docid.IsSystemID(in.ID) {
			continue
		}
		m, ok, err := metaOf(ctx, st, in.ID)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		f, err := fileOf(ctx, st, m)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Meta.Path < out[j].Meta.Path })
	return out, nil
}

// metaOf reads the winning revision of doc as file metadata (ok false:
// absent, or not a file).
func metaOf(ctx context.Context, st store.Store, doc string) (livesync.Meta, bool, error) {
	raw, err := st.Get(ctx, doc, store.GetOptions{})
	if errors.Is(err, engine.ErrNotFound) {
		return livesync.Meta{}, false, nil
	}
	if err != nil {
		return livesync.Meta{}, false, err
	}
	d, err := livesync.ParseDoc(raw)
	if err != nil || !d.IsFileDoc() {
		return livesync.Meta{}, false, nil
	}
	m, err := livesync.ParseMeta(d)
	if err != nil {
		return livesync.Meta{}, false, nil
	}
	return m, true, nil
}

// fileOf counts m's chunks, and those the replica holds.
func fileOf(ctx context.Context, st engine.LocalChunks, m livesync.Meta) (File, error) {
	ids := Distinct(m.Children)
	have, err := st.GetChunks(ctx, ids)
	if err != nil {
		return File{}, err
	}
	return File{Meta: m, Chunks: len(ids), LocalChunks: len(have)}, nil
}

// Distinct returns the ids without repeats, in order of first use.
func Distinct(ids []string) []string {
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

// findFile returns the metadata of the file at vault path p: by its id,
// else by scanning for its path (ids of files written by other tools may
// not follow the rules).
func findFile(ctx context.Context, st store.Store, ids *docid.Mapper, p string) (livesync.Meta, error) {
	m, ok, err := metaOf(ctx, st, ids.FromPath(p))
	if err != nil {
		return livesync.Meta{}, err
	}
	if ok && !m.Deleted {
		return m, nil
	}
	files, err := localFiles(ctx, st)
	if err != nil {
		return livesync.Meta{}, err
	}
	for _, f := range files {
		if f.Meta.Path == p && !f.Meta.Deleted {
			return f.Meta, nil
		}
	}
	return livesync.Meta{}, &engine.Error{Op: "vault: find file", DocID: p, Stage: engine.StageStorage,
		Err: fmt.Errorf("no such file in the local replica: %w", engine.ErrNotFound)}
}

// Write writes a file into the replica as LiveSync does: its chunks
// first, then its metadata as a new revision of the file's document
// (keeping its ctime). A file whose content is unchanged gets no new
// revision. It emits FileCreated or FileChanged.
func (v *Vault) Write(ctx context.Context, p string, data []byte, o WriteOptions) (WriteResult, error) {
	ctx, end, err := v.begin(ctx)
	if err != nil {
		return WriteResult{}, err
	}
	defer end()
	s, err := v.settings()
	if err != nil {
		return WriteResult{}, err
	}
	codec, err := livesync.New(livesync.Config{Settings: s})
	if err != nil {
		return WriteResult{}, err
	}
	mtime := o.MTime
	if mtime.IsZero() {
		mtime = v.opts.Now()
	}
	ctime := o.CTime
	if ctime.IsZero() {
		ctime = mtime
	}
	res, created, err := putFile(ctx, v.st, codec, p, data, ctime.UnixMilli(), mtime.UnixMilli(), o.CTime.IsZero())
	if err != nil || res.Unchanged {
		return res, err
	}
	kind := FileChanged
	if created {
		kind = FileCreated
	}
	v.emit(Event{Kind: kind, Path: res.Meta.Path, DocID: res.Meta.ID, Rev: res.Meta.Rev})
	return res, nil
}

// putFile writes the file's chunks, then its metadata. keepCTime keeps
// the ctime of a previous revision that is not deleted. created reports
// a document that did not exist or was deleted.
func putFile(ctx context.Context, st store.Store, codec *livesync.Codec, p string, data []byte, ctime, mtime int64, keepCTime bool) (res WriteResult, created bool, err error) {
	meta, chunks, err := codec.FileDocs(p, data, ctime, mtime)
	if err != nil {
		return WriteResult{}, false, err
	}
	var prevRev string
	created = true
	switch raw, err := st.Get(ctx, meta.ID, store.GetOptions{}); {
	case err == nil:
		d, perr := livesync.ParseDoc(raw)
		if perr == nil && d.IsFileDoc() {
			if old, perr := livesync.ParseMeta(d); perr == nil {
				if !old.Deleted && old.Size == meta.Size && slices.Equal(old.Children, meta.Children) && old.Type == meta.Type {
					return WriteResult{Meta: old, Unchanged: true}, false, nil
				}
				if !old.Deleted && old.CTime != 0 && keepCTime {
					meta.CTime = old.CTime
				}
				created = old.Deleted
			}
		}
		prevRev = d.Rev()
	case !errors.Is(err, engine.ErrNotFound):
		return WriteResult{}, false, err
	}
	ids := make([]string, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID
	}
	have, err := st.GetChunks(ctx, ids)
	if err != nil {
		return WriteResult{}, false, err
	}
	// Chunks before the metadata that names them: a replica (and,
	// replicated in sequence order, a remote) never holds metadata whose
	// chunks were not written first.
	if err := st.PutChunks(ctx, chunks); err != nil {
		return WriteResult{}, false, err
	}
	meta.Rev = prevRev
	b, err := meta.Doc().MarshalJSON()
	if err != nil {
		return WriteResult{}, false, err
	}
	rev, err := st.Put(ctx, b)
	if err != nil {
		return WriteResult{}, false, err
	}
	meta.Rev = rev
	return WriteResult{Meta: meta, NewChunks: len(chunks) - len(have)}, created, nil
}

// Delete deletes the file at vault path p as the plugin does: a new
// revision of its metadata with deleted: true and mtime now, the body
// kept (not a _deleted tombstone, so the plugin's chunks-online
// selectors still see it); a hidden file's also gets size 0 and no
// children. It returns the new revision and emits FileDeleted.
func (v *Vault) Delete(ctx context.Context, p string) (livesync.Meta, error) {
	ctx, end, err := v.begin(ctx)
	if err != nil {
		return livesync.Meta{}, err
	}
	defer end()
	ids, err := v.ids()
	if err != nil {
		return livesync.Meta{}, err
	}
	m, err := findFile(ctx, v.st, ids, p)
	if err != nil {
		return livesync.Meta{}, err
	}
	m.Deleted = true
	m.MTime = v.opts.Now().UnixMilli()
	if docid.IsHiddenFileID(m.ID) {
		m.Size, m.Children = 0, []string{}
	}
	b, err := json.Marshal(m.Doc())
	if err != nil {
		return livesync.Meta{}, err
	}
	if m.Rev, err = v.st.Put(ctx, b); err != nil {
		return livesync.Meta{}, err
	}
	v.emit(Event{Kind: FileDeleted, Path: m.Path, DocID: m.ID, Rev: m.Rev})
	return m, nil
}

// Read returns the content of the file at vault path p. Chunks missing
// from the replica are fetched from the attached remotes that can fetch
// by id (and kept); without one, the error wraps
// engine.ErrMissingChunk.
func (v *Vault) Read(ctx context.Context, p string) ([]byte, error) {
	ids, err := v.ids()
	if err != nil {
		return nil, err
	}
	m, err := findFile(ctx, v.st, ids, p)
	if err != nil {
		return nil, err
	}
	return v.ReadMeta(ctx, m)
}

// ReadMeta returns the content of the file m (metadata from List or
// Stat), as Read does.
func (v *Vault) ReadMeta(ctx context.Context, m livesync.Meta) ([]byte, error) {
	ctx, end, err := v.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	ids := Distinct(m.Children)
	have, err := v.st.GetChunks(ctx, ids)
	if err != nil {
		return nil, err
	}
	if len(have) < len(ids) {
		if have, err = v.fetchMissing(ctx, m, ids, len(have)); err != nil {
			return nil, err
		}
	}
	return readWith(m, have)
}

// readWith reassembles m from the chunks have.
func readWith(m livesync.Meta, have map[string]engine.Chunk) ([]byte, error) {
	return livesync.ReadFile(m, func(id string) (string, error) {
		c, ok := have[id]
		if !ok {
			return "", engine.ErrNotFound
		}
		return c.Data, nil
	})
}

// PassphraseError says the vault's data cannot be decrypted with the
// passphrase given. It wraps engine.ErrDecrypt.
type PassphraseError struct {
	// Remote is the ID of the remote whose data did not decrypt, "" for
	// the local replica.
	Remote string
	// DocID names the document (or pack) that did not decrypt.
	DocID string
	// What DocID names: "document" or "pack".
	What string
}

func (e *PassphraseError) Error() string {
	what := e.What
	if what == "" {
		what = "document"
	}
	if e.Remote == "" {
		return fmt.Sprintf("the passphrase is not the one the local replica was written with (%s %q)", what, e.DocID)
	}
	return fmt.Sprintf("cannot decrypt %s (%s %q): the passphrase is wrong, or the remote was re-keyed with a new salt", e.Remote, what, e.DocID)
}

func (e *PassphraseError) Unwrap() error { return engine.ErrDecrypt }

// checkLocalPassphrase checks the passphrase against the replica's own
// documents: chunk ids (with E2EE) and obfuscated file ids are keyed by
// the passphrase, so the ids of a few stored chunks and files are
// computed again. Another passphrase would write documents no other
// device of the vault can read or find. Nothing is stored.
func checkLocalPassphrase(ctx context.Context, st store.Store, s livesync.Settings) error {
	codec, err := livesync.New(livesync.Config{Settings: s})
	if err != nil {
		return err
	}
	const probes = 5
	if s.Encrypt {
		infos, err := st.AllDocs(ctx, store.AllDocsOptions{StartKey: docid.PrefixChunk + "+", EndKey: docid.PrefixChunk + "+\uffff", Limit: probes})
		if err != nil {
			return err
		}
		ids := make([]string, len(infos))
		for i, in := range infos {
			ids[i] = in.ID
		}
		have, err := st.GetChunks(ctx, ids)
		if err != nil {
			return err
		}
		matched := false
		for _, c := range have {
			matched = matched || codec.ChunkID(c.Data) == c.ID
		}
		if len(have) > 0 && !matched {
			return &PassphraseError{DocID: ids[0]}
		}
	}
	if s.PathObfuscation {
		infos, err := st.AllDocs(ctx, store.AllDocsOptions{StartKey: docid.PrefixObfuscated, EndKey: docid.PrefixObfuscated + "\uffff", Limit: probes})
		if err != nil {
			return err
		}
		checked, matched := 0, 0
		for _, in := range infos {
			m, ok, err := metaOf(ctx, st, in.ID)
			if err != nil || !ok {
				continue
			}
			checked++
			if codec.DocID(m.Path) == m.ID {
				matched++
			}
		}
		if checked > 0 && matched == 0 {
			return &PassphraseError{DocID: infos[0].ID}
		}
	}
	return nil
}
