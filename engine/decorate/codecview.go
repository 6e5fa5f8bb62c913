package decorate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// CodecOptions tune a CodecView.
type CodecOptions struct {
	// Plain, when not nil, declares the vault unencrypted (the codec has
	// no passphrase): an end-to-end encrypted chunk id ("h:+…") is
	// refused with an error wrapping Plain instead of being stored in
	// plaintext, and a document that fails to decode is reported
	// wrapping Plain.
	Plain error
}

// CodecView is a store.Store view, in the local plaintext form, of st,
// which keeps documents in the remote form (chunks encrypted, metadata
// obfuscated): what it reads is decoded with codec, what it writes is
// encoded with it and written through st.BulkDocs (new_edits=false).
// Chunks written by PutChunks get EncodeChunk's revision. Changes,
// revisions and _local documents pass unchanged; Put is refused (a view
// replicates, it does not edit) and Close does nothing (the view does
// not own st).
func CodecView(st store.Store, codec *livesync.Codec, o CodecOptions) store.Store {
	return &codecView{st: st, codec: codec, plain: o.Plain}
}

type codecView struct {
	st    store.Store
	codec *livesync.Codec
	plain error
}

// EncodeChunk turns a plaintext chunk into the remote form, with the
// revision a LiveSync device gives the same new chunk (store.ChunkRev,
// over the plaintext), so that every writer agrees on it.
func EncodeChunk(codec *livesync.Codec, c engine.Chunk) (json.RawMessage, error) {
	d, err := codec.EncodeRemote(livesync.ChunkDoc(livesync.Chunk{ID: c.ID, Data: c.Data}))
	if err != nil {
		return nil, err
	}
	d["_rev"], _ = json.Marshal(store.ChunkRev(c.ID, c.Data))
	return d.MarshalJSON()
}

// IsE2EEChunkID reports a chunk id of an end-to-end encrypted vault.
func IsE2EEChunkID(id string) bool { return strings.HasPrefix(id, "h:+") }

func (c *codecView) Info(ctx context.Context) (engine.EndpointInfo, error) { return c.st.Info(ctx) }

func (c *codecView) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	return c.st.Changes(ctx, req)
}

func (c *codecView) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	return c.st.RevsDiff(ctx, revs)
}

func (c *codecView) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	docs, err := c.st.BulkGet(ctx, revs)
	if err != nil {
		return nil, err
	}
	for i, d := range docs {
		if docs[i], err = c.decode(d); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

func (c *codecView) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	out := make([]json.RawMessage, len(docs))
	for i, d := range docs {
		var err error
		if out[i], err = c.encode(d); err != nil {
			return nil, err
		}
	}
	return c.st.BulkDocs(ctx, out)
}

func (c *codecView) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	return c.st.GetLocal(ctx, id)
}

func (c *codecView) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	return c.st.PutLocal(ctx, id, doc)
}

// GetChunks reads chunks, decrypted.
func (c *codecView) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	have, err := c.st.GetChunks(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[engine.ChunkID]engine.Chunk, len(have))
	for id := range have {
		raw, err := c.st.Get(ctx, id, store.GetOptions{})
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		d, err := c.decode(raw)
		if err != nil {
			return nil, err
		}
		doc, err := livesync.ParseDoc(d)
		if err != nil {
			return nil, err
		}
		ch, err := livesync.ParseChunk(doc)
		if err != nil {
			return nil, err
		}
		out[id] = engine.Chunk{ID: ch.ID, Data: ch.Data}
	}
	return out, nil
}

// PutChunks encodes and writes the chunks st lacks.
func (c *codecView) PutChunks(ctx context.Context, chunks []engine.Chunk) error {
	ids := make([]engine.ChunkID, len(chunks))
	for i, ch := range chunks {
		ids[i] = ch.ID
	}
	have, err := c.st.GetChunks(ctx, ids)
	if err != nil {
		return err
	}
	var docs []json.RawMessage
	for _, ch := range chunks {
		if _, ok := have[ch.ID]; ok {
			continue
		}
		if c.plain != nil && IsE2EEChunkID(ch.ID) {
			return &engine.Error{Op: "store received chunk", DocID: ch.ID, Stage: engine.StageEncrypt, Err: c.plain}
		}
		raw, err := EncodeChunk(c.codec, ch)
		if err != nil {
			return err
		}
		docs = append(docs, raw)
	}
	if len(docs) == 0 {
		return nil
	}
	res, err := c.st.BulkDocs(ctx, docs)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Error != "" {
			return &engine.Error{Op: "store received chunk", DocID: r.ID, Stage: engine.StageStorage, Err: fmt.Errorf("%s: %s", r.Error, r.Reason)}
		}
	}
	return nil
}

func (c *codecView) Get(ctx context.Context, id string, opts store.GetOptions) (json.RawMessage, error) {
	raw, err := c.st.Get(ctx, id, opts)
	if err != nil {
		return nil, err
	}
	return c.decode(raw)
}

func (c *codecView) Put(context.Context, json.RawMessage) (string, error) {
	return "", fmt.Errorf("a codec view does not edit documents: %w", engine.ErrUnsupported)
}

func (c *codecView) AllDocs(ctx context.Context, opts store.AllDocsOptions) ([]store.DocInfo, error) {
	return c.st.AllDocs(ctx, opts)
}

func (c *codecView) Close() error { return nil }

func (c *codecView) decode(raw json.RawMessage) (json.RawMessage, error) {
	d, err := livesync.ParseDoc(raw)
	if err != nil {
		return nil, &engine.Error{Op: "decode document", Stage: engine.StageDecode, Err: err}
	}
	p, err := c.codec.DecodeRemote(d)
	if err != nil {
		if c.plain != nil {
			return nil, fmt.Errorf("%w: %w", c.plain, err)
		}
		return nil, err
	}
	return p.MarshalJSON()
}

func (c *codecView) encode(raw json.RawMessage) (json.RawMessage, error) {
	d, err := livesync.ParseDoc(raw)
	if err != nil {
		return nil, &engine.Error{Op: "encode document", Stage: engine.StageDecode, Err: err}
	}
	if c.plain != nil && IsE2EEChunkID(d.ID()) {
		return nil, &engine.Error{Op: "store received document", DocID: d.ID(), Stage: engine.StageEncrypt, Err: c.plain}
	}
	e, err := c.codec.EncodeRemote(d)
	if err != nil {
		return nil, err
	}
	return e.MarshalJSON()
}

// GetRevs reads several revisions of one document, decoded.
func (c *codecView) GetRevs(ctx context.Context, id string, opts store.RevsOptions) ([]store.RevDocs, error) {
	res, err := c.st.GetRevs(ctx, id, opts)
	if err != nil {
		return nil, err
	}
	for i := range res {
		for k, d := range res[i].Docs {
			if res[i].Docs[k], err = c.decode(d); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

func (c *codecView) PutBatch(context.Context, []json.RawMessage) ([]engine.BulkDocResult, error) {
	return nil, fmt.Errorf("a codec view does not edit documents: %w", engine.ErrUnsupported)
}

func (c *codecView) Compact(context.Context) error {
	return fmt.Errorf("a codec view does not compact the store it shows: %w", engine.ErrUnsupported)
}

func (c *codecView) RevsLimit(ctx context.Context) (int, error) { return c.st.RevsLimit(ctx) }

func (c *codecView) SetRevsLimit(context.Context, int) error {
	return fmt.Errorf("a codec view does not change the store's revs limit: %w", engine.ErrUnsupported)
}
