package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/livesync-go/livesync-go/engine"
)

// RawChunk is a chunk document in the database's remote form (encrypted
// for an end-to-end encrypted vault), as JSON with its _rev: what the
// bridge's hunt sources fetch and its hunt's local side stores, never
// decrypted. It is not an engine.Chunk, whose Data is plaintext.
type RawChunk struct {
	ID  engine.ChunkID
	Doc json.RawMessage
}

// envelope carries c through the hunt, whose ports speak engine.Chunk:
// Data holds the document. Only chunk sources of the bridge's hunt make
// envelopes and only huntLocal opens them.
func (c RawChunk) envelope() engine.Chunk { return engine.Chunk{ID: c.ID, Data: string(c.Doc)} }

// Envelope is c as the bridge's hunt carries it, for a chunk source that
// is not an upstream (a relay's peers) added to Bridge.Hunt with
// AddSource: the hunt's local side stores it as the bridge's own
// sources' chunks are stored.
func (c RawChunk) Envelope() engine.Chunk { return c.envelope() }

// openEnvelope returns the RawChunk an envelope carries, checked: a JSON
// object whose _id is the chunk's id, with a revision.
func openEnvelope(c engine.Chunk) (RawChunk, error) {
	var head struct {
		ID  string `json:"_id"`
		Rev string `json:"_rev"`
	}
	raw := json.RawMessage(c.Data)
	if err := json.Unmarshal(raw, &head); err != nil || head.ID != c.ID || head.Rev == "" {
		return RawChunk{}, &engine.Error{Op: "store hunted chunk", DocID: c.ID, Stage: engine.StageDecode,
			Err: fmt.Errorf("not a chunk document with its revision: %w", engine.ErrMalformed)}
	}
	return RawChunk{ID: c.ID, Doc: raw}, nil
}

// huntLocal is the hunt's engine.LocalChunks over the database: PutChunks
// opens the envelopes and writes their documents, remote form and
// revision unchanged, with new_edits=false through the hold-back, which
// releases the held notes they complete. Chunks already stored are
// skipped, so a chunk fetched twice never becomes a conflict.
type huntLocal struct{ v Local }

// GetChunks reports which chunks the database stores (the Data of an
// encrypted chunk is its ciphertext; the hunt only checks presence).
func (l huntLocal) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	return l.v.GetChunks(ctx, ids)
}

// PutChunks writes envelopes of RawChunks.
func (l huntLocal) PutChunks(ctx context.Context, chunks []engine.Chunk) error {
	ids := make([]engine.ChunkID, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID
	}
	have, err := l.v.GetChunks(ctx, ids)
	if err != nil {
		return err
	}
	var docs []json.RawMessage
	for _, c := range chunks {
		if _, ok := have[c.ID]; ok {
			continue
		}
		rc, err := openEnvelope(c)
		if err != nil {
			return err
		}
		docs = append(docs, rc.Doc)
	}
	if len(docs) == 0 {
		return nil
	}
	res, err := l.v.BulkDocs(ctx, docs)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range res {
		if r.Error != "" {
			errs = append(errs, &engine.Error{Op: "store hunted chunk", DocID: r.ID, Stage: engine.StageStorage,
				Err: fmt.Errorf("%s: %s", r.Error, r.Reason)})
		}
	}
	return errors.Join(errs...)
}
