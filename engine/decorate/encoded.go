package decorate

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// EncodedStore is a view, in the remote form (chunks encrypted, metadata
// obfuscated, as a CouchDB server of the vault holds them), of a store
// that keeps the local plaintext form: the inverse of CodecView. What it
// serves (BulkGet, GetChunks) is encoded, what it is sent (BulkDocs) is
// decoded before it is written; ids, revisions, the changes feed and
// _local documents pass unchanged. A replica serves its vault to peers
// through it.
type EncodedStore struct {
	st    store.Store
	codec func(ctx context.Context) (*livesync.Codec, error)
}

var _ engine.Endpoint = (*EncodedStore)(nil)

// Encoded returns the remote-form view of st. codec is asked for the
// codec on every call that encodes or decodes (its salt may only be known
// once a peer's handshake has written it); its error is the call's.
func Encoded(st store.Store, codec func(ctx context.Context) (*livesync.Codec, error)) *EncodedStore {
	return &EncodedStore{st: st, codec: codec}
}

// Info is the store's.
func (e *EncodedStore) Info(ctx context.Context) (engine.EndpointInfo, error) { return e.st.Info(ctx) }

// Changes is the store's feed; a selector sees the local form.
func (e *EncodedStore) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	return e.st.Changes(ctx, req)
}

// RevsDiff is the store's: encoding keeps ids and revisions.
func (e *EncodedStore) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	return e.st.RevsDiff(ctx, revs)
}

// BulkGet reads the revisions and encodes each to the remote form,
// _revisions kept.
func (e *EncodedStore) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	docs, err := e.st.BulkGet(ctx, revs)
	if err != nil || len(docs) == 0 {
		return docs, err
	}
	c, err := e.codec(ctx)
	if err != nil {
		return nil, err
	}
	for i, raw := range docs {
		if docs[i], err = convert(raw, c.EncodeRemote, "encode document", engine.StageEncode); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// BulkDocs decodes each document to the local form and writes them
// (new_edits=false).
func (e *EncodedStore) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	if len(docs) == 0 {
		return e.st.BulkDocs(ctx, docs)
	}
	c, err := e.codec(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, len(docs))
	for i, raw := range docs {
		if out[i], err = convert(raw, c.DecodeRemote, "decode document", engine.StageDecode); err != nil {
			return nil, err
		}
	}
	return e.st.BulkDocs(ctx, out)
}

// GetLocal is the store's.
func (e *EncodedStore) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	return e.st.GetLocal(ctx, id)
}

// PutLocal is the store's.
func (e *EncodedStore) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	return e.st.PutLocal(ctx, id, doc)
}

// GetChunks reads chunks and returns their data in the remote form
// (encrypted for an end-to-end encrypted vault, compressed when the
// settings compress).
func (e *EncodedStore) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	have, err := e.st.GetChunks(ctx, ids)
	if err != nil || len(have) == 0 {
		return have, err
	}
	c, err := e.codec(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[engine.ChunkID]engine.Chunk, len(have))
	for id, ch := range have {
		d, err := c.EncodeRemote(livesync.ChunkDoc(livesync.Chunk{ID: ch.ID, Data: ch.Data}))
		if err != nil {
			return nil, err
		}
		var body struct {
			Data string `json:"data"`
		}
		if err := json.Unmarshal(d["data"], &body.Data); err != nil {
			return nil, &engine.Error{Op: "encode chunk", DocID: id, Stage: engine.StageEncode, Err: engine.ErrMalformed}
		}
		out[id] = engine.Chunk{ID: id, Data: body.Data}
	}
	return out, nil
}

// ChunkRevs returns the revision of each stored chunk of ids (absent ones
// are left out). Encoding keeps revisions, so it is the revision the
// chunk document has in the remote form too.
func (e *EncodedStore) ChunkRevs(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]string, error) {
	out := make(map[engine.ChunkID]string, len(ids))
	for _, id := range ids {
		raw, err := e.st.Get(ctx, id, store.GetOptions{})
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var head struct {
			Rev string `json:"_rev"`
		}
		if json.Unmarshal(raw, &head) == nil && head.Rev != "" {
			out[id] = head.Rev
		}
	}
	return out, nil
}

// convert parses raw, applies fn and marshals the result.
func convert(raw json.RawMessage, fn func(livesync.Doc) (livesync.Doc, error), op string, stage engine.Stage) (json.RawMessage, error) {
	d, err := livesync.ParseDoc(raw)
	if err != nil {
		return nil, &engine.Error{Op: op, Stage: stage, Err: err}
	}
	d, err = fn(d)
	if err != nil {
		return nil, err
	}
	return d.MarshalJSON()
}
