package holdback

import (
	"context"
	"encoding/json"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/purgatory"
	"github.com/livesync-go/livesync-go/engine/store"
)

// PutBatch writes local edits (new_edits=true) of several documents in
// one inner PutBatch call, so the batch is as atomic as the inner store
// makes it (nothing of it is written when it fails). Like Put, nothing
// is held: chunks written are announced, and a revision written to a
// held document goes through the purgatory (see bindLocalEdit).
func (s *Store) PutBatch(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.gate.RUnlock()
	var notes []string
	for _, raw := range docs {
		if d, err := livesync.ParseDoc(raw); err == nil && !docid.IsChunkID(d.ID()) {
			notes = append(notes, d.ID())
		}
	}
	unlock := s.locks.lock(notes)
	defer unlock()
	results, err := s.inner.PutBatch(ctx, docs)
	if err != nil {
		return nil, err
	}
	var arrived []engine.ChunkID
	for i, r := range results {
		if r.Error != "" || i >= len(docs) {
			continue
		}
		d, err := livesync.ParseDoc(docs[i])
		if err != nil {
			continue
		}
		switch {
		case docid.IsChunkID(r.ID):
			if !d.Deleted() {
				arrived = append(arrived, r.ID)
			}
		case s.isHeld(r.ID):
			s.bindLocalEdit(ctx, r.ID, r.Rev)
		}
	}
	if len(arrived) > 0 {
		s.p.ChunksArrived(arrived)
	}
	return results, nil
}

// bindLocalEdit sends rev, a local edit just written to the held
// document id, through the purgatory when it is complete, so that an
// older held revision is never released after it (what Put does for one
// document). The caller holds id's key lock. A failure is logged: the
// edit is written all the same.
func (s *Store) bindLocalEdit(ctx context.Context, id, rev string) {
	body, err := s.inner.Get(ctx, id, store.GetOptions{Rev: rev, Revs: true})
	if err != nil {
		s.log.Warn("holdback: could not bind a local edit of a held document", "doc", id, "rev", rev, "err", err)
		return
	}
	j := classify(s.codec, body)
	switch {
	case !j.note:
		return
	case j.kind != kindMeta:
		j.r = hold.Revision{Doc: id, Rev: rev} // cannot be judged: needs no chunk
	case len(j.r.Chunks) > 0:
		got, err := s.inner.GetChunks(ctx, j.r.Chunks)
		if err != nil || !complete(j.r, got, nil) {
			return // incomplete: served already, nothing to bind
		}
	}
	results := make([]engine.BulkDocResult, 1)
	if err := s.hold(ctx, purgatory.ClientPush, Owner(ctx), []json.RawMessage{body}, []judged{j}, []int{0}, results); err != nil {
		s.log.Warn("holdback: could not bind a local edit of a held document", "doc", id, "rev", rev, "err", err)
	}
}
