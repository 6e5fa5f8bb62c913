package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// FileWrite is one file of a PutFiles call.
type FileWrite struct {
	// Path is the file's vault path (see PathOf).
	Path string
	Data []byte
	WriteOptions
}

// FileResult is what PutFiles did with one file.
type FileResult struct {
	WriteResult
	// Err is set when this file alone was not written: it cannot be
	// split into chunks, or its document changed meanwhile (wrapping
	// store.ErrConflict). The other files of the call are written.
	Err error
}

// PutFiles writes files as Write would, one after the other, with
// two store transactions instead of two per file: first the chunks of
// all of them, then all their metadata. The chunks are stored (durably,
// for a persistent store) before any metadata naming them, so after a
// crash each file is in the replica either at its new revision with
// every chunk, or as it was before (the chunks already written are
// reused by the next write of the file). Files whose content is
// unchanged get no revision. A path given twice (or two paths with the
// same document id) is written in order: the second write is a new
// revision of the first, in a transaction of its own.
//
// Results are in files order. The error is a failure of the replica
// (or of ctx): then none of the files of the failing transaction has
// its metadata written, though files of earlier transactions (before a
// repeated path) may. It emits FileCreated or FileChanged per file
// written.
func (v *Vault) PutFiles(ctx context.Context, files []FileWrite) ([]FileResult, error) {
	ctx, end, err := v.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	s, err := v.settings()
	if err != nil {
		return nil, err
	}
	codec, err := livesync.New(livesync.Config{Settings: s})
	if err != nil {
		return nil, err
	}
	out := make([]FileResult, len(files))
	plans := make([]filePlan, 0, len(files))
	ids := map[string]bool{}
	for i, f := range files {
		p := v.planFile(codec, i, f)
		if p.err != nil {
			out[i].Err = p.err
			continue
		}
		if ids[p.meta.ID] {
			// The same document again: write what came before first,
			// so this write sees it as the previous revision.
			if err := v.putGroup(ctx, plans, out); err != nil {
				return nil, err
			}
			plans, ids = plans[:0], map[string]bool{}
		}
		ids[p.meta.ID] = true
		plans = append(plans, p)
	}
	if err := v.putGroup(ctx, plans, out); err != nil {
		return nil, err
	}
	return out, nil
}

// filePlan is one file of PutFiles on its way into the store.
type filePlan struct {
	i         int // index in the call's files
	meta      livesync.Meta
	chunks    []livesync.Chunk
	keepCTime bool
	created   bool
	unchanged bool
	err       error
}

// planFile splits f into its documents.
func (v *Vault) planFile(codec *livesync.Codec, i int, f FileWrite) filePlan {
	mtime := f.MTime
	if mtime.IsZero() {
		mtime = v.opts.Now()
	}
	ctime := f.CTime
	if ctime.IsZero() {
		ctime = mtime
	}
	meta, chunks, err := codec.FileDocs(f.Path, f.Data, ctime.UnixMilli(), mtime.UnixMilli())
	return filePlan{i: i, meta: meta, chunks: chunks, keepCTime: f.CTime.IsZero(), created: true, err: err}
}

// putGroup writes plans, whose document ids are distinct: it reads
// their previous revisions, then writes the chunks of the changed ones
// in one transaction and their metadata in a second, and fills out.
func (v *Vault) putGroup(ctx context.Context, plans []filePlan, out []FileResult) error {
	if len(plans) == 0 {
		return nil
	}
	var chunks []engine.Chunk
	seen := map[string]bool{}
	changed := 0
	for k := range plans {
		p := &plans[k]
		if err := previousRevision(ctx, v.st, p); err != nil {
			return err
		}
		if p.unchanged {
			continue
		}
		changed++
		for _, c := range p.chunks {
			if !seen[c.ID] {
				seen[c.ID] = true
				chunks = append(chunks, c)
			}
		}
	}
	if changed == 0 {
		for _, p := range plans {
			out[p.i].WriteResult = WriteResult{Meta: p.meta, Unchanged: true}
		}
		return nil
	}
	ids := make([]string, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID
	}
	have, err := v.st.GetChunks(ctx, ids)
	if err != nil {
		return err
	}
	// Chunks before the metadata that names them, each in a transaction
	// of its own: a replica (and, replicated in sequence order, a
	// remote) never holds metadata whose chunks were not written first.
	if err := v.st.PutChunks(ctx, chunks); err != nil {
		return err
	}
	return v.putMetas(ctx, plans, have, out)
}

// previousRevision reads the current revision of p's document: an
// unchanged file is marked so; otherwise p's metadata becomes its next
// revision (keeping the ctime when asked).
func previousRevision(ctx context.Context, st store.Store, p *filePlan) error {
	raw, err := st.Get(ctx, p.meta.ID, store.GetOptions{})
	if errors.Is(err, engine.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	d, perr := livesync.ParseDoc(raw)
	if perr == nil && d.IsFileDoc() {
		if old, perr := livesync.ParseMeta(d); perr == nil {
			if !old.Deleted && old.Size == p.meta.Size && slices.Equal(old.Children, p.meta.Children) && old.Type == p.meta.Type {
				p.meta, p.unchanged, p.created = old, true, false
				return nil
			}
			if !old.Deleted && old.CTime != 0 && p.keepCTime {
				p.meta.CTime = old.CTime
			}
			p.created = old.Deleted
		}
	}
	p.meta.Rev = d.Rev()
	return nil
}

// putMetas writes the metadata of the changed plans in one transaction
// and fills out; have are the chunks the replica held before.
func (v *Vault) putMetas(ctx context.Context, plans []filePlan, have map[string]engine.Chunk, out []FileResult) error {
	var docs []json.RawMessage
	var written []*filePlan
	counted := map[string]bool{}
	for k := range plans {
		p := &plans[k]
		if p.unchanged {
			out[p.i].WriteResult = WriteResult{Meta: p.meta, Unchanged: true}
			continue
		}
		b, err := p.meta.Doc().MarshalJSON()
		if err != nil {
			return err
		}
		docs = append(docs, b)
		written = append(written, p)
		// A chunk is new to the first file of the call that needs it,
		// as if the files had been written one by one.
		n := 0
		for _, c := range p.chunks {
			if _, ok := have[c.ID]; !ok && !counted[c.ID] {
				counted[c.ID] = true
				n++
			}
		}
		out[p.i].NewChunks = n
	}
	res, err := v.st.PutBatch(ctx, docs)
	if err != nil {
		return err
	}
	if len(res) != len(docs) {
		return fmt.Errorf("vault: put files: %d results for %d documents", len(res), len(docs))
	}
	for k, p := range written {
		r := res[k]
		if r.Error != "" {
			cause := store.ErrInvalid
			if r.Error == "conflict" {
				cause = store.ErrConflict
			}
			out[p.i] = FileResult{Err: &engine.Error{Op: "write file", DocID: p.meta.ID, Stage: engine.StageStorage,
				Err: fmt.Errorf("%s: %w", r.Reason, cause)}}
			continue
		}
		p.meta.Rev = r.Rev
		out[p.i].Meta = p.meta
		kind := FileChanged
		if p.created {
			kind = FileCreated
		}
		v.emit(Event{Kind: kind, Path: p.meta.Path, DocID: p.meta.ID, Rev: p.meta.Rev})
	}
	return nil
}
