package decorate

import (
	"context"
	"encoding/json"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// Recoder re-encrypts documents in the remote form between two salts of
// one vault (same passphrase and settings): Remote is the codec of the
// far side, Local the codec of the near side. Revisions and every field
// the codecs do not transform are kept.
type Recoder struct {
	Remote, Local *livesync.Codec
}

// ToLocal re-encrypts a document read from the remote for the local side.
func (r Recoder) ToLocal(raw json.RawMessage) (json.RawMessage, error) {
	return recode(raw, r.Remote, r.Local)
}

// ToRemote re-encrypts a local document for the remote.
func (r Recoder) ToRemote(raw json.RawMessage) (json.RawMessage, error) {
	return recode(raw, r.Local, r.Remote)
}

func recode(raw json.RawMessage, from, to *livesync.Codec) (json.RawMessage, error) {
	d, err := livesync.ParseDoc(raw)
	if err != nil {
		return nil, &engine.Error{Op: "re-encrypt document", Stage: engine.StageDecode, Err: err}
	}
	p, err := from.DecodeRemote(d)
	if err != nil {
		return nil, err
	}
	e, err := to.EncodeRemote(p)
	if err != nil {
		return nil, err
	}
	return e.MarshalJSON()
}

// Recode is the endpoint ep, whose documents are encrypted with r.Remote,
// seen encrypted with r.Local: documents read (BulkGet) are re-encrypted
// for the local side, documents written (BulkDocs) for the remote. The
// changes feed, revisions and _local documents pass unchanged.
func Recode(ep engine.Endpoint, r Recoder) engine.Endpoint {
	return recoded{Endpoint: ep, r: r}
}

type recoded struct {
	engine.Endpoint
	r Recoder
}

func (e recoded) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	docs, err := e.Endpoint.BulkGet(ctx, revs)
	if err != nil {
		return nil, err
	}
	for i, d := range docs {
		if docs[i], err = e.r.ToLocal(d); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

func (e recoded) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	out := make([]json.RawMessage, len(docs))
	for i, d := range docs {
		var err error
		if out[i], err = e.r.ToRemote(d); err != nil {
			return nil, err
		}
	}
	return e.Endpoint.BulkDocs(ctx, out)
}
