package vault

import (
	"context"
	"errors"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/purgatory"
)

// Files lists the file metadata the remote holds, decoded (deleted files
// included, marked), without copying anything into the replica.
func (l *Link) Files(ctx context.Context) ([]livesync.Meta, error) {
	if l.journal != nil {
		return l.journalFiles(ctx)
	}
	return EndpointFiles(ctx, l.remote.Endpoint(), l.codec)
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
