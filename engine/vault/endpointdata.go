package vault

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

// EndpointFiles pages through ep's changes without chunks, reads the
// metadata documents and decodes them with codec (deleted files
// included, marked). ep holds documents in remote form.
func EndpointFiles(ctx context.Context, ep engine.Endpoint, codec *livesync.Codec) ([]livesync.Meta, error) {
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
			docs, err := ep.BulkGet(ctx, refs)
			if err != nil {
				return nil, err
			}
			if out, err = appendMetas(out, docs, codec); err != nil {
				return nil, err
			}
		}
		if len(page.Results) == 0 || page.Pending == 0 || page.LastSeq == since {
			return out, nil
		}
		since = page.LastSeq
	}
}

// appendMetas decodes the file metadata among docs (remote form).
func appendMetas(out []livesync.Meta, docs []json.RawMessage, codec *livesync.Codec) ([]livesync.Meta, error) {
	for _, raw := range docs {
		d, err := livesync.ParseDoc(raw)
		if err != nil {
			continue
		}
		if d, err = codec.DecodeRemote(d); err != nil {
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

// CheckEndpointPassphrase decodes a few of ep's documents (remote form)
// with codec, so that a wrong passphrase is found before anything is
// written anywhere. A document that does not decrypt gives an
// *engine.Error with StageDecrypt, wrapping engine.ErrDecrypt and naming
// the document; an ep without documents gives nil.
func CheckEndpointPassphrase(ctx context.Context, ep engine.Endpoint, codec *livesync.Codec) error {
	page, err := ep.Changes(ctx, engine.ChangesRequest{Limit: 50})
	if err != nil {
		return err
	}
	var refs []engine.DocRev
	for _, ch := range page.Results {
		if ch.Deleted || docid.IsSystemID(ch.ID) || len(ch.Revs) == 0 {
			continue
		}
		refs = append(refs, engine.DocRev{ID: ch.ID, Rev: ch.Revs[0]})
		if len(refs) == 10 {
			break
		}
	}
	if len(refs) == 0 {
		return nil
	}
	docs, err := ep.BulkGet(ctx, refs)
	if err != nil {
		return err
	}
	for _, raw := range docs {
		d, err := livesync.ParseDoc(raw)
		if err != nil {
			continue
		}
		if _, err := codec.DecodeRemote(d); errors.Is(err, engine.ErrDecrypt) {
			return &engine.Error{Op: "check passphrase", DocID: d.ID(), Stage: engine.StageDecrypt, Err: err}
		}
	}
	return nil
}
