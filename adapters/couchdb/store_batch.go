package couchdb

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

var _ store.BatchReader = (*Store)(nil)

// Batch sizes of the Store's multi-document reads.
const (
	// bulkGetBatch is the most revisions one _bulk_get request names.
	bulkGetBatch = 1000
	// docIDsBatch is the most ids one _changes?filter=_doc_ids request
	// names: up to 100, CouchDB reads the named documents directly
	// (changes_doc_ids_optimization_threshold) instead of its whole
	// by-sequence index.
	docIDsBatch = 100
)

// GetRevsMany answers each request as GetRevs would, with one _bulk_get
// per bulkGetBatch named revisions, and for the requests with All or
// Latest one _changes?filter=_doc_ids per docIDsBatch documents (their
// leaves) and a _bulk_get of those leaves. Answers are built by the code
// GetRevs uses, so they are the same.
func (s *Store) GetRevsMany(ctx context.Context, reqs []store.RevsRequest) ([][]store.RevDocs, error) {
	var out [][]store.RevDocs
	err := s.call(ctx, "get revs", func(c context.Context) error {
		var err error
		out, err = s.getRevsMany(c, reqs)
		return err
	})
	return out, err
}

func (s *Store) getRevsMany(c context.Context, reqs []store.RevsRequest) ([][]store.RevDocs, error) {
	var leafIDs []string
	var named []engine.DocRev
	seenRef := map[engine.DocRev]bool{}
	seenLeaf := map[string]bool{}
	for _, r := range reqs {
		switch {
		case !readableID(r.ID):
		case r.Opts.All || r.Opts.Latest:
			if !seenLeaf[r.ID] {
				seenLeaf[r.ID] = true
				leafIDs = append(leafIDs, r.ID)
			}
		default:
			for _, rev := range r.Opts.Revs {
				k := engine.DocRev{ID: r.ID, Rev: rev}
				if !seenRef[k] {
					seenRef[k] = true
					named = append(named, k)
				}
			}
		}
	}
	docs, err := s.bulkGetAll(c, named)
	if err != nil {
		return nil, err
	}
	leaves, err := s.leavesMany(c, leafIDs)
	if err != nil {
		return nil, err
	}
	out := make([][]store.RevDocs, len(reqs))
	for i, r := range reqs {
		switch {
		case !readableID(r.ID):
			out[i] = unreadableRevs(r.Opts)
		case r.Opts.All || r.Opts.Latest:
			out[i] = revsFromLeaves(leaves[r.ID], r.Opts)
		default:
			out[i] = revsFromDocs(r.ID, docs, r.Opts)
		}
	}
	return out, nil
}

// bulkGetAll reads the named revisions with revs=true, bulkGetBatch per
// _bulk_get, indexed by id and revision; missing ones are not in the map.
func (s *Store) bulkGetAll(c context.Context, refs []engine.DocRev) (map[engine.DocRev]json.RawMessage, error) {
	out := make(map[engine.DocRev]json.RawMessage, len(refs))
	for start := 0; start < len(refs); start += bulkGetBatch {
		docs, err := s.db.bulkGet(c, refs[start:min(start+bulkGetBatch, len(refs))], false)
		if err != nil {
			return nil, err
		}
		for k, d := range byDocRev(docs) {
			out[k] = d
		}
	}
	return out, nil
}

// leavesMany reads every leaf of each id, in winning order, as leaves
// does: the leaf revisions from _changes?filter=_doc_ids&style=all_docs
// (deleted leaves included), then their bodies with _revisions from
// _bulk_get. An absent document has none. A server without the filter
// is asked per document.
func (s *Store) leavesMany(c context.Context, ids []string) (map[string][]leafDoc, error) {
	out := make(map[string][]leafDoc, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var refs []engine.DocRev
	for start := 0; start < len(ids); start += docIDsBatch {
		part := ids[start:min(start+docIDsBatch, len(ids))]
		got, err := s.leafRevs(c, part)
		if isMissingEndpoint(err) || httpStatus(err) == http.StatusBadRequest {
			if err := s.leavesEach(c, part, out); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		refs = append(refs, got...)
	}
	docs, err := s.bulkGetAll(c, refs)
	if err != nil {
		return nil, err
	}
	for _, r := range refs {
		d, ok := docs[r]
		if !ok {
			continue // gone meanwhile (a compaction): as open_revs leaves it out
		}
		l, err := parseLeaf(r.ID, d)
		if err != nil {
			return nil, err
		}
		out[r.ID] = append(out[r.ID], l)
	}
	for id := range out {
		sortLeaves(out[id]) // those leavesEach read are sorted already: no harm
	}
	return out, nil
}

// leavesEach reads the leaves of each id with its own open_revs=all
// request, into out.
func (s *Store) leavesEach(c context.Context, ids []string, out map[string][]leafDoc) error {
	for _, id := range ids {
		l, err := s.leaves(c, id)
		if err != nil {
			return err
		}
		if len(l) > 0 {
			out[id] = l
		}
	}
	return nil
}

// leafRevs lists the leaf revisions of ids (at most docIDsBatch) with one
// POST _changes?filter=_doc_ids&style=all_docs.
func (s *Store) leafRevs(c context.Context, ids []string) ([]engine.DocRev, error) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	q := url.Values{"filter": {"_doc_ids"}, "style": {"all_docs"}}
	var feed struct {
		Results []struct {
			ID      string `json:"id"`
			Changes []struct {
				Rev string `json:"rev"`
			} `json:"changes"`
		} `json:"results"`
	}
	err := s.db.do(c, "leaves", "", http.MethodPost, s.db.dbURL("/_changes", q), map[string]any{"doc_ids": ids}, &feed)
	if err != nil {
		return nil, err
	}
	var out []engine.DocRev
	seen := map[engine.DocRev]bool{}
	for _, r := range feed.Results {
		if !want[r.ID] {
			return nil, &engine.Error{Op: "leaves", DocID: r.ID, Stage: engine.StageProtocol,
				Err: fmt.Errorf("couchdb: _changes filtered by _doc_ids lists a document not asked for: %w", engine.ErrMalformed)}
		}
		for _, ch := range r.Changes {
			k := engine.DocRev{ID: r.ID, Rev: ch.Rev}
			if ch.Rev != "" && !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out, nil
}

// GetWinners reads the winning revision of each id with one POST
// _all_docs?keys&include_docs (and conflicts=true) per keysBatch ids: a
// live document's body as Get reads it, a deleted one's revision.
func (s *Store) GetWinners(ctx context.Context, ids []string, conflicts bool) ([]store.Winner, error) {
	out := make([]store.Winner, len(ids))
	err := s.call(ctx, "get", func(c context.Context) error {
		var ask []string
		for _, id := range ids {
			if readableID(id) {
				ask = append(ask, id)
			}
		}
		states, err := s.lookupDocs(c, ask, conflicts)
		if err != nil {
			return err
		}
		for i, id := range ids {
			st, ok := states[id]
			switch {
			case !ok || !readableID(id):
			case st.deleted:
				out[i] = store.Winner{Rev: st.rev, Deleted: true}
			case st.doc == nil || st.doc[0] != '{':
				return &engine.Error{Op: "get", DocID: id, Stage: engine.StageProtocol,
					Err: fmt.Errorf("couchdb: the document is not a JSON object: %w", engine.ErrMalformed)}
			default:
				out[i] = store.Winner{Doc: st.doc, Rev: st.rev}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// lookupDocs is lookup with the documents, and their _conflicts if
// conflicts is set.
func (s *Store) lookupDocs(c context.Context, ids []string, conflicts bool) (map[string]docState, error) {
	q := url.Values{"include_docs": {"true"}}
	if conflicts {
		q.Set("conflicts", "true")
	}
	return s.lookupQuery(c, "get", ids, q)
}
