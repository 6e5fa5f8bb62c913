package holdback

import (
	"context"
	"encoding/json"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// The store.Store methods of Served: reads go to the current hold-back,
// writes go to it under the read lock a rebuild waits for.

// Info describes the database.
func (v *Served) Info(ctx context.Context) (engine.EndpointInfo, error) {
	return v.cur.Load().Info(ctx)
}

// Changes lists the database's changes. It takes no lock: a longpoll may
// wait long, and reads go to the database, which a rebuild keeps.
func (v *Served) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	return v.cur.Load().Changes(ctx, req)
}

// RevsDiff reports the revisions the database lacks; held ones count as
// present.
func (v *Served) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	return write(v, func(s *Store) (map[string][]string, error) { return s.RevsDiff(ctx, revs) })
}

// BulkGet reads revisions; held ones are left out.
func (v *Served) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	return v.cur.Load().BulkGet(ctx, revs)
}

// GetRevs reads several revisions of one document in one store read
// (open_revs, _bulk_get); a held revision is missing.
func (v *Served) GetRevs(ctx context.Context, id string, opts store.RevsOptions) ([]store.RevDocs, error) {
	return v.cur.Load().GetRevs(ctx, id, opts)
}

// BulkDocsFrom writes revisions replicated from source (an upstream's
// throttle key) through the hold-back: held metadata gets the pulled
// delay and is hunted there first.
func (v *Served) BulkDocsFrom(ctx context.Context, source string, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	return write(v, func(s *Store) ([]engine.BulkDocResult, error) { return s.BulkDocsFrom(ctx, source, docs) })
}

// ChunksArrived tells the hold-back that chunks were stored by another
// path (the hunt's deliveries).
// During a rebuild they are also kept for the new hold-back, which may
// have read the store before they were written.
func (v *Served) ChunksArrived(ids []engine.ChunkID) {
	v.amu.Lock()
	if v.recording {
		v.pending = append(v.pending, ids...)
	}
	cur := v.cur.Load()
	v.amu.Unlock()
	cur.ChunksArrived(ids)
}

// BulkDocs writes replicated revisions through the hold-back; metadata
// held for an authenticated user's push counts against that user's
// limit.
func (v *Served) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	ctx = v.owned(ctx)
	return write(v, func(s *Store) ([]engine.BulkDocResult, error) { return s.BulkDocs(ctx, docs) })
}

// PutBatch writes local edits of several documents atomically (a
// _bulk_docs request without new_edits=false), through the hold-back.
func (v *Served) PutBatch(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	return write(v, func(s *Store) ([]engine.BulkDocResult, error) { return s.PutBatch(ctx, docs) })
}

// GetLocal reads a _local document.
func (v *Served) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	return v.cur.Load().GetLocal(ctx, id)
}

// PutLocal writes a _local document. A write of the sync parameters may
// rebuild the hold-back with the vault's codec and calls the
// ParamsChanged hook; a write of the milestone may rebuild it too (its
// PREFERRED settings shape the codec) and calls SettingsChanged.
func (v *Served) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	err := do(v, func(s *Store) error { return s.PutLocal(ctx, id, doc) })
	if err != nil {
		return err
	}
	switch id {
	case negotiate.SyncParametersLocalID:
		if v.HasPassphrase() {
			v.rekey(ctx)
		}
		if v.hooks.ParamsChanged != nil {
			v.hooks.ParamsChanged(ctx)
		}
	case negotiate.MilestoneLocalID:
		if v.HasPassphrase() {
			v.rekey(ctx)
		}
		if v.hooks.SettingsChanged != nil {
			v.hooks.SettingsChanged()
		}
	}
	return nil
}

// GetChunks reads chunks.
func (v *Served) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	return v.cur.Load().GetChunks(ctx, ids)
}

// PutChunks writes chunks; held documents they complete are released.
func (v *Served) PutChunks(ctx context.Context, chunks []engine.Chunk) error {
	return do(v, func(s *Store) error { return s.PutChunks(ctx, chunks) })
}

// Get reads a document; a held revision is not found.
func (v *Served) Get(ctx context.Context, id string, opts store.GetOptions) (json.RawMessage, error) {
	return v.cur.Load().Get(ctx, id, opts)
}

// Put writes a local edit (never held).
func (v *Served) Put(ctx context.Context, doc json.RawMessage) (string, error) {
	ctx = v.owned(ctx)
	return write(v, func(s *Store) (string, error) { return s.Put(ctx, doc) })
}

// AllDocs lists the documents; documents with only held revisions are
// not listed.
func (v *Served) AllDocs(ctx context.Context, opts store.AllDocsOptions) ([]store.DocInfo, error) {
	return v.cur.Load().AllDocs(ctx, opts)
}

// Compact drops earlier revisions' bodies and stems the documents; held
// revisions are not touched.
func (v *Served) Compact(ctx context.Context) error {
	return do(v, func(s *Store) error { return s.Compact(ctx) })
}

// RevsLimit returns the database's revs limit.
func (v *Served) RevsLimit(ctx context.Context) (int, error) {
	return v.cur.Load().RevsLimit(ctx)
}

// SetRevsLimit sets the database's revs limit.
func (v *Served) SetRevsLimit(ctx context.Context, n int) error {
	return do(v, func(s *Store) error { return s.SetRevsLimit(ctx, n) })
}
