package store

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/livesync-go/livesync-go/engine"
)

// RevsRequest is one document's part of a GetRevsMany call: what GetRevs
// would be asked for it.
type RevsRequest struct {
	ID   string
	Opts RevsOptions
}

// Winner is GetWinners' answer for one id: its winning revision, as Get
// without Rev reads it, or that it is deleted or absent.
type Winner struct {
	// Doc is the winning revision's document (with _conflicts when asked
	// and there are any); nil when the winner is deleted or the document
	// is absent.
	Doc json.RawMessage
	// Rev is the winning revision; "" when the document is absent.
	Rev string
	// Deleted is set when the winning revision is a deletion.
	Deleted bool
}

// BatchReader is an optional interface of a Store whose every read costs
// a round trip (the CouchDB store): it reads the revisions of many
// documents in a few requests instead of one per document. Answers are
// those of the per-document calls (GetRevsMany's of GetRevs, GetWinners'
// of Get and BulkGet); only the number of round trips differs. Callers
// use the package functions GetRevsMany and GetWinners, which fall back
// to the per-document calls for a Store that does not implement it.
type BatchReader interface {
	// GetRevsMany answers each request as GetRevs(ctx, r.ID, r.Opts)
	// would, in request order.
	GetRevsMany(ctx context.Context, reqs []RevsRequest) ([][]RevDocs, error)
	// GetWinners reads the winning revision of each id, in ids order,
	// with _conflicts if conflicts is set.
	GetWinners(ctx context.Context, ids []string, conflicts bool) ([]Winner, error)
}

// GetRevsMany answers each request as st.GetRevs would, in request order:
// with one batch when st is a BatchReader, else one GetRevs per request.
func GetRevsMany(ctx context.Context, st Store, reqs []RevsRequest) ([][]RevDocs, error) {
	if b, ok := st.(BatchReader); ok {
		return b.GetRevsMany(ctx, reqs)
	}
	out := make([][]RevDocs, len(reqs))
	for i, r := range reqs {
		res, err := st.GetRevs(ctx, r.ID, r.Opts)
		if err != nil {
			return nil, err
		}
		out[i] = res
	}
	return out, nil
}

// GetWinners reads the winning revision of each id, in ids order: with
// one batch when st is a BatchReader, else with Get, and for an id Get
// does not find, a BulkGet of its winner to tell a deleted document
// from an absent one.
func GetWinners(ctx context.Context, st Store, ids []string, conflicts bool) ([]Winner, error) {
	if b, ok := st.(BatchReader); ok {
		return b.GetWinners(ctx, ids, conflicts)
	}
	out := make([]Winner, len(ids))
	for i, id := range ids {
		doc, err := st.Get(ctx, id, GetOptions{Conflicts: conflicts})
		switch {
		case err == nil:
			var head struct {
				Rev string `json:"_rev"`
			}
			_ = json.Unmarshal(doc, &head)
			out[i] = Winner{Doc: doc, Rev: head.Rev}
		case errors.Is(err, engine.ErrNotFound):
			w, err := st.BulkGet(ctx, []engine.DocRev{{ID: id}})
			if err != nil || len(w) != 1 {
				continue // absent, or unknown: reported absent
			}
			var head struct {
				Rev     string `json:"_rev"`
				Deleted bool   `json:"_deleted"`
			}
			if json.Unmarshal(w[0], &head) == nil && head.Deleted {
				out[i] = Winner{Rev: head.Rev, Deleted: true}
			}
		default:
			return nil, err
		}
	}
	return out, nil
}
