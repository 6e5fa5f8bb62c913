package couchdb

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// bulkRow is one row of a _bulk_docs answer.
type bulkRow struct {
	ID     string `json:"id"`
	Rev    string `json:"rev"`
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

// postBulk sends docs to _bulk_docs with new_edits as given.
func (s *Store) postBulk(c context.Context, op string, docs []json.RawMessage, newEdits bool) ([]bulkRow, error) {
	var rows []bulkRow
	body := map[string]any{"docs": docs, "new_edits": newEdits}
	err := s.db.do(c, op, "", http.MethodPost, s.db.dbURL("/_bulk_docs", nil), body, &rows)
	return rows, err
}

// checkBatch checks every document as the store would; refused ones get a
// "bad_request" result and are not sent.
func checkBatch(docs []json.RawMessage, replicated bool) ([]engine.BulkDocResult, []store.CheckedDoc, []bool) {
	results := make([]engine.BulkDocResult, len(docs))
	checked := make([]store.CheckedDoc, len(docs))
	ok := make([]bool, len(docs))
	for i, raw := range docs {
		d, err := store.CheckDoc(raw, replicated)
		results[i].ID = d.ID
		if err != nil {
			results[i].Error, results[i].Reason = "bad_request", err.Error()
			continue
		}
		checked[i], ok[i] = d, true
	}
	return results, checked, ok
}

// BulkDocs writes replicated revisions (new_edits=false). A document the
// store refuses (see store.CheckDoc) gets a "bad_request" result and is
// not sent; the server's per-document refusals (a validation function's
// "forbidden") are results too.
func (s *Store) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	results, checked, ok := checkBatch(docs, true)
	var send []json.RawMessage
	var idx []int
	for i, raw := range docs {
		if !ok[i] {
			continue
		}
		if len(checked[i].Path) == store.MaxRevisions {
			raw = capRevisions(raw, checked[i])
		}
		results[i].Rev = checked[i].Rev
		send = append(send, raw)
		idx = append(idx, i)
	}
	err := s.call(ctx, "bulk docs", func(c context.Context) error {
		if len(send) == 0 {
			return nil
		}
		rows, err := s.postBulk(c, "bulk docs", send, false)
		if err != nil {
			return err
		}
		// new_edits=false answers only the refused documents (CouchDB 2+
		// and PouchDB answer [] when all are written); older servers
		// answer a row for each. Match errors by id and revision.
		type key struct{ id, rev string }
		failed := map[key]bulkRow{}
		for _, r := range rows {
			if r.Error != "" {
				failed[key{r.ID, r.Rev}] = r
				if r.Rev == "" {
					failed[key{r.ID, "*"}] = r
				}
			}
		}
		for _, i := range idx {
			r, bad := failed[key{checked[i].ID, checked[i].Rev}]
			if !bad {
				r, bad = failed[key{checked[i].ID, "*"}]
			}
			if bad {
				results[i].Rev, results[i].Error, results[i].Reason = "", r.Error, r.Reason
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// capRevisions rewrites a document whose _revisions names more than
// store.MaxRevisions ids to name only the newest MaxRevisions, as the
// store reads it.
func capRevisions(raw json.RawMessage, d store.CheckedDoc) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	hashes := make([]string, len(d.Path))
	for i, rev := range d.Path {
		_, h := splitRev(rev)
		hashes[i] = h
	}
	gen, _ := splitRev(d.Rev)
	m["_revisions"], _ = json.Marshal(map[string]any{"start": gen, "ids": hashes})
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// splitRev splits "N-hash" (0, "" when malformed).
func splitRev(rev string) (int, string) {
	for i := 0; i < len(rev); i++ {
		if rev[i] == '-' {
			n, err := strconv.Atoi(rev[:i])
			if err != nil || n <= 0 {
				return 0, ""
			}
			return n, rev[i+1:]
		}
	}
	return 0, ""
}

// Put writes one local edit (new_edits=true) through _bulk_docs, so that
// ids of any length travel in the body, never in the URL.
func (s *Store) Put(ctx context.Context, doc json.RawMessage) (string, error) {
	d, err := store.CheckDoc(doc, false)
	if err != nil {
		return "", err
	}
	res, err := s.PutBatch(ctx, []json.RawMessage{doc})
	if err != nil {
		return "", err
	}
	if len(res) != 1 {
		return "", &engine.Error{Op: "put", DocID: d.ID, Stage: engine.StageProtocol,
			Err: fmt.Errorf("couchdb: %d results for one document: %w", len(res), engine.ErrMalformed)}
	}
	switch r := res[0]; r.Error {
	case "":
		return r.Rev, nil
	case "conflict":
		return "", fmt.Errorf("put %q: %w", d.ID, store.ErrConflict)
	case "bad_request":
		return "", fmt.Errorf("put %q: %w: %s", d.ID, store.ErrInvalid, r.Reason)
	default:
		return "", &engine.Error{Op: "put", DocID: d.ID, Stage: engine.StageProtocol,
			Err: fmt.Errorf("couchdb: %s: %s", r.Error, r.Reason)}
	}
}

// PutBatch writes local edits (new_edits=true) with one _bulk_docs; the
// server applies them in order, so a later edit of the same id sees the
// earlier one. A new chunk exactly as the plug-in makes it gets the
// plug-in's first revision (see putChunkDocs), as in the other Stores.
func (s *Store) PutBatch(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	results, checked, ok := checkBatch(docs, false)
	err := s.call(ctx, "put batch", func(c context.Context) error {
		var send []json.RawMessage
		var idx []int
		var chunks []int
		for i, raw := range docs {
			switch {
			case !ok[i]:
			case checked[i].Chunk:
				chunks = append(chunks, i)
			default:
				send = append(send, raw)
				idx = append(idx, i)
			}
		}
		if len(chunks) > 0 {
			cs := make([]engine.Chunk, len(chunks))
			for k, i := range chunks {
				cs[k] = engine.Chunk{ID: checked[i].ID, Data: checked[i].Data}
			}
			revs, err := s.putChunkDocs(c, cs)
			if err != nil {
				return err
			}
			for k, i := range chunks {
				if revs[k] == "" {
					results[i].Error, results[i].Reason = "conflict", "Document update conflict."
				} else {
					results[i].Rev = revs[k]
				}
			}
		}
		if len(send) == 0 {
			return nil
		}
		rows, err := s.postBulk(c, "put batch", send, true)
		if err != nil {
			return err
		}
		if len(rows) != len(send) {
			return &engine.Error{Op: "put batch", Stage: engine.StageProtocol,
				Err: fmt.Errorf("couchdb: %d results for %d documents: %w", len(rows), len(send), engine.ErrMalformed)}
		}
		for k, i := range idx {
			r := rows[k]
			if r.Error == "not_found" && checked[i].Rev != "" {
				// An edit of a revision of a document that is not there.
				r.Error, r.Reason = "conflict", "Document update conflict."
			}
			results[i].Rev, results[i].Error, results[i].Reason = r.Rev, r.Error, r.Reason
			if r.Error != "" {
				results[i].Rev = ""
			} else if r.Rev == "" {
				return &engine.Error{Op: "put batch", DocID: checked[i].ID, Stage: engine.StageProtocol,
					Err: fmt.Errorf("couchdb: a written document without a revision: %w", engine.ErrMalformed)}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}
