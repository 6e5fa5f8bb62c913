package vault

import (
	"context"
	"errors"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/purgatory"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

// Files lists the file metadata the remote holds, decoded (deleted files
// included, marked), without copying anything into the replica.
func (l *Link) Files(ctx context.Context) ([]livesync.Meta, error) {
	if l.journal != nil {
		return l.journalFiles(ctx)
	}
	return l.endpointFiles(ctx)
}

// endpointFiles pages through the remote's changes without chunks, reads
// the metadata documents and decodes them.
func (l *Link) endpointFiles(ctx context.Context) ([]livesync.Meta, error) {
	ep := l.remote.Endpoint()
	var out []livesync.Meta
	since := ""
	for {
		page, err := ep.Changes(ctx, engine.ChangesRequest{Since: since, Limit: 100, Selector: replicate.ChunksOnlineSelector})
		if err != nil {
			return nil, err
		}
		var refs []engine.DocRev
		for _, ch := range page.Results {
			if docid.IsSystemID(ch.ID) || docid.IsChunkID(ch.ID) || len(ch.Revs) == 0 {
				continue
			}
			refs = append(refs, engine.DocRev{ID: ch.ID, Rev: ch.Revs[0]})
		}
		if len(refs) > 0 {
			metas, err := l.decodeMetas(ctx, refs)
			if err != nil {
				return nil, err
			}
			out = append(out, metas...)
		}
		if len(page.Results) == 0 || page.Pending == 0 || page.LastSeq == since {
			return out, nil
		}
		since = page.LastSeq
	}
}

// decodeMetas reads and decodes the documents refs, keeping the files.
func (l *Link) decodeMetas(ctx context.Context, refs []engine.DocRev) ([]livesync.Meta, error) {
	docs, err := l.remote.Endpoint().BulkGet(ctx, refs)
	if err != nil {
		return nil, err
	}
	var out []livesync.Meta
	for _, raw := range docs {
		d, err := livesync.ParseDoc(raw)
		if err != nil {
			continue
		}
		if d, err = l.codec.DecodeRemote(d); err != nil {
			return nil, err
		}
		if !d.IsFileDoc() {
			continue
		}
		if m, err := livesync.ParseMeta(d); err == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// journalFiles reads every pack of the journal and decodes the file
// metadata records, keeping each document's newest revision. Damaged
// packs are skipped (a pull reports them).
func (l *Link) journalFiles(ctx context.Context) ([]livesync.Meta, error) {
	obj := l.remote.Objects()
	keys, err := obj.List(ctx, "")
	if err != nil {
		return nil, err
	}
	newest := map[string]livesync.Meta{}
	for _, k := range keys {
		body, err := obj.Get(ctx, k)
		if err != nil {
			return nil, err
		}
		err = journal.OpenFunc(k, body, l.cipher, journal.DefaultInflateLimit, func(r journal.Record) error {
			if r.IsChunk() {
				return nil
			}
			d, err := livesync.ParseDoc(r.Doc)
			if err != nil || !d.IsFileDoc() {
				return nil
			}
			m, err := livesync.ParseMeta(d)
			if err != nil {
				return nil
			}
			if old, ok := newest[m.ID]; !ok || purgatory.CompareRevs(m.Rev, old.Rev) > 0 {
				newest[m.ID] = m
			}
			return nil
		})
		var ee *engine.Error
		if err != nil && !(errors.As(err, &ee) && (ee.Stage == engine.StageDecrypt || ee.Stage == engine.StageDecode)) {
			return nil, err
		}
	}
	out := make([]livesync.Meta, 0, len(newest))
	for _, m := range newest {
		out = append(out, m)
	}
	return out, nil
}
