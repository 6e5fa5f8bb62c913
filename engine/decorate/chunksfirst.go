package decorate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/rawjson"
)

// ChunksFirst wraps an endpoint so that its bulk writes send a batch's
// chunks in one request and, only once the other side has stored all of
// them, its other documents in a second: a server (CouchDB sorts a
// request's documents by id) or a peer never holds metadata whose chunks
// were not stored first, even if a push stops between the two requests.
// A chunk the other side refuses fails the batch, so its metadata is not
// sent.
func ChunksFirst(ep engine.Endpoint) engine.Endpoint { return chunksFirst{ep} }

type chunksFirst struct{ engine.Endpoint }

func (c chunksFirst) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	var chunks, others []json.RawMessage
	for _, d := range docs {
		if docid.IsChunkID(rawDocID(d)) {
			chunks = append(chunks, d)
		} else {
			others = append(others, d)
		}
	}
	if len(chunks) == 0 || len(others) == 0 {
		return c.Endpoint.BulkDocs(ctx, docs)
	}
	res, err := c.Endpoint.BulkDocs(ctx, chunks)
	if err != nil {
		return nil, err
	}
	for _, r := range res {
		if r.Error != "" {
			return nil, &engine.Error{Op: "bulk write chunks", DocID: r.ID, Stage: engine.StageProtocol,
				Err: fmt.Errorf("the server refused a chunk (%s: %s); the metadata naming it is not sent", r.Error, r.Reason)}
		}
	}
	more, err := c.Endpoint.BulkDocs(ctx, others)
	if err != nil {
		return nil, err
	}
	return append(res, more...), nil
}

// rawDocID reads a document's _id, walking its members rather than
// decoding it ("" if it has none or is not an object; the target judges
// such a document).
func rawDocID(raw json.RawMessage) string {
	var id string
	rawjson.Members(raw, func(k, v []byte) bool {
		if string(k) == "_id" {
			id, _ = rawjson.String(v)
		}
		return true
	})
	return id
}
