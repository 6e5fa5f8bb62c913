package replicate

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// Transform wraps a remote endpoint with the LiveSync remote transform
// (E2EE, path obfuscation, compression; engine/FORMAT.md §4.4–4.5): documents
// from BulkGet are decoded with codec.DecodeRemote into the local
// plaintext form, documents given to BulkDocs are encoded with
// codec.EncodeRemote. Everything else — changes, revs diff, _local
// documents — passes through untouched. Errors are *engine.Error naming
// the document.
func Transform(ep engine.Endpoint, codec *livesync.Codec) engine.Endpoint {
	return &transformed{Endpoint: ep, codec: codec}
}

type transformed struct {
	engine.Endpoint
	codec *livesync.Codec
}

func (t *transformed) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	docs, err := t.Endpoint.BulkGet(ctx, revs)
	if err != nil {
		return nil, err
	}
	return convert(docs, "decode remote document", t.codec.DecodeRemote)
}

func (t *transformed) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	enc, err := convert(docs, "encode remote document", t.codec.EncodeRemote)
	if err != nil {
		return nil, err
	}
	return t.Endpoint.BulkDocs(ctx, enc)
}

func convert(docs []json.RawMessage, op string, fn func(livesync.Doc) (livesync.Doc, error)) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(docs))
	for i, raw := range docs {
		d, err := parseDoc(raw)
		if err != nil {
			return nil, &engine.Error{Op: op, DocID: rawID(raw), Stage: engine.StageDecode, Err: err}
		}
		c, err := fn(d)
		if err != nil {
			return nil, err // *engine.Error naming the document
		}
		if sameDoc(c, d) {
			// Nothing to transform (a plain vault, a chunk of an
			// unencrypted one): the document as received, without the
			// cost of encoding it again.
			out[i] = raw
			continue
		}
		out[i] = encodeDoc(c)
	}
	return out, nil
}

// sameDoc reports whether a and b have the same fields with the same
// encoded values.
func sameDoc(a, b livesync.Doc) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// rawID extracts the _id of a document that failed to parse, if any.
func rawID(raw json.RawMessage) string {
	var d struct {
		ID string `json:"_id"`
	}
	_ = json.Unmarshal(raw, &d)
	return d.ID
}
