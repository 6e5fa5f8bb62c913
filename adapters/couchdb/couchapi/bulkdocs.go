package couchapi

import (
	"encoding/json"
	"net/http"
	"strings"
)

// bulkRow is one row of a _bulk_docs answer.
type bulkRow struct {
	OK     bool   `json:"ok,omitempty"`
	ID     string `json:"id"`
	Rev    string `json:"rev,omitempty"`
	Error  string `json:"error,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// bulkDoc is one parsed document of a _bulk_docs body.
type bulkDoc struct {
	raw    json.RawMessage
	fields map[string]json.RawMessage
	id     string
	hasID  bool
	rev    string
}

// bulkDocs answers POST /{db}/_bulk_docs. Malformed input (a document that
// is not an object, an illegal id, a broken _rev) refuses the whole
// request with 400 before anything is written, as CouchDB does; conflicts
// and refusals are per-document rows.
func (s *Server) bulkDocs(q *request) *apiError {
	docs, newEdits, ae := s.parseBulkDocs(q)
	if ae != nil {
		return ae
	}
	var rows []bulkRow
	if newEdits {
		rows, ae = s.bulkDocsEdits(q, docs)
	} else {
		rows, ae = s.bulkDocsReplicated(q, docs)
	}
	if ae != nil {
		return ae
	}
	writeJSON(q.w, http.StatusCreated, rows)
	return nil
}

// parseBulkDocs reads and checks the documents of a _bulk_docs request
// and its new_edits option: a malformed document refuses the whole
// request.
func (s *Server) parseBulkDocs(q *request) ([]bulkDoc, bool, *apiError) {
	m, ae := readObject(q.r)
	if ae != nil {
		return nil, false, ae
	}
	rawDocs, ok := m["docs"]
	if !ok {
		return nil, false, badRequest("POST body must include `docs` parameter.")
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(rawDocs, &raws); err != nil {
		return nil, false, badRequest("`docs` parameter must be an array.")
	}
	newEdits, ae := jsonBool(m["new_edits"], true, "new_edits")
	if ae != nil {
		return nil, false, badRequest("`new_edits` parameter must be a boolean.")
	}
	docs := make([]bulkDoc, len(raws))
	for i, raw := range raws {
		if ae := s.parseBulkDoc(&docs[i], raw, newEdits); ae != nil {
			return nil, false, ae
		}
	}
	return docs, newEdits, nil
}

// parseBulkDoc reads one document of a _bulk_docs request into d.
func (s *Server) parseBulkDoc(d *bulkDoc, raw json.RawMessage, newEdits bool) *apiError {
	d.raw = raw
	fields, ae := decodeDoc(raw)
	if ae != nil {
		return ae
	}
	d.fields = fields
	if d.id, d.hasID, ae = stringField(fields, "_id"); ae != nil {
		return ae
	}
	if d.rev, _, ae = stringField(fields, "_rev"); ae != nil {
		return ae
	}
	if int64(len(raw)) > s.maxDoc {
		return docTooLarge(d.id)
	}
	if d.hasID {
		if ae := checkDocID(d.id); ae != nil {
			return ae
		}
	}
	if strings.HasPrefix(d.id, "_local/") {
		return nil
	}
	if d.rev != "" && !validRev(d.rev) {
		return errInvalidRev
	}
	if ae := checkRevisions(fields, d.rev); ae != nil {
		return ae
	}
	if !newEdits && (!d.hasID || d.rev == "") {
		return badRequest("When `new_edits: false`, the document needs `_id` and `_rev` specified")
	}
	return nil
}

// bulkDocsReplicated stores the documents of a new_edits=false request
// (replication): one atomic store call for every ordinary document; only
// errors are rows, as CouchDB answers.
func (s *Server) bulkDocsReplicated(q *request, docs []bulkDoc) ([]bulkRow, *apiError) {
	ctx := q.r.Context()
	admin := q.id.acc != nil && q.id.acc.admin
	rows := []bulkRow{}
	var batch []json.RawMessage
	for _, d := range docs {
		switch {
		case isDesign(d.id) && !admin:
			rows = append(rows, bulkRow{ID: d.id, Rev: d.rev, Error: "forbidden", Reason: errDesignAdmin.reason})
		case strings.HasPrefix(d.id, "_local/"):
			if _, err := s.writeLocal(ctx, q, strings.TrimPrefix(d.id, "_local/"), d.fields, d.rev, false); err != nil {
				name, reason := docError(err)
				rows = append(rows, bulkRow{ID: d.id, Rev: d.rev, Error: name, Reason: reason})
			}
		default:
			batch = append(batch, d.raw)
		}
	}
	if len(batch) > 0 {
		res, err := q.st.BulkDocs(ctx, batch)
		if err != nil {
			return nil, asAPIError(err)
		}
		for _, r := range res {
			if r.Error != "" {
				rows = append(rows, bulkRow{ID: r.ID, Rev: r.Rev, Error: r.Error, Reason: r.Reason})
			}
		}
	}
	return rows, nil
}

// bulkDocsEdits stores the documents of a new_edits=true request (local
// edits): every ordinary document in one atomic store call, so a storage
// failure leaves nothing of the request; conflicts and refusals are
// per-document rows. _local documents and refused design documents are
// answered on their own, as CouchDB does.
func (s *Server) bulkDocsEdits(q *request, docs []bulkDoc) ([]bulkRow, *apiError) {
	ctx := q.r.Context()
	admin := q.id.acc != nil && q.id.acc.admin
	rows := make([]bulkRow, len(docs))
	var batch []json.RawMessage
	var inBatch []int
	for i, d := range docs {
		id := d.id
		if !d.hasID {
			id = newDocID()
		}
		rows[i].ID = id
		switch {
		case isDesign(id) && !admin:
			rows[i].Error, rows[i].Reason = "forbidden", errDesignAdmin.reason
		case strings.HasPrefix(id, "_local/"):
			rev, err := s.writeNew(ctx, q, id, d.fields)
			if err != nil {
				if ae := asAPIError(err); ae.status >= 500 {
					return nil, ae
				}
				rows[i].Error, rows[i].Reason = docError(err)
				continue
			}
			rows[i].OK, rows[i].Rev = true, rev
		default:
			d.fields["_id"] = mustJSON(id)
			b, err := json.Marshal(d.fields)
			if err != nil {
				return nil, asAPIError(err)
			}
			batch = append(batch, b)
			inBatch = append(inBatch, i)
		}
	}
	if len(batch) > 0 {
		res, err := q.st.PutBatch(ctx, batch)
		if err != nil {
			return nil, asAPIError(err)
		}
		for k, r := range res {
			row := &rows[inBatch[k]]
			if r.Error != "" {
				row.Error, row.Reason = r.Error, r.Reason
				continue
			}
			row.OK, row.Rev = true, r.Rev
		}
	}
	return rows, nil
}

// checkRevisions checks the _revisions and _deleted members of a
// document: {start, ids} naming _rev first, start ≥ len(ids), ids
// non-empty strings.
func checkRevisions(fields map[string]json.RawMessage, rev string) *apiError {
	if raw, ok := fields["_deleted"]; ok && !isNull(raw) {
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return errorf(http.StatusBadRequest, "doc_validation", "_deleted must be a boolean")
		}
	}
	raw, ok := fields["_revisions"]
	if !ok || isNull(raw) {
		return nil
	}
	var rv struct {
		Start *int     `json:"start"`
		IDs   []string `json:"ids"`
	}
	if json.Unmarshal(raw, &rv) != nil || rv.Start == nil || len(rv.IDs) == 0 {
		return errorf(http.StatusBadRequest, "doc_validation", "_revisions must be {\"start\": integer, \"ids\": [revision ids]}")
	}
	for _, id := range rv.IDs {
		if id == "" {
			return errorf(http.StatusBadRequest, "doc_validation", "_revisions holds an empty revision id")
		}
	}
	gen, hash, _ := parseRev(rev)
	if rev == "" || *rv.Start != gen || rv.IDs[0] != hash || *rv.Start < len(rv.IDs) {
		return errorf(http.StatusBadRequest, "doc_validation", "_revisions does not match _rev")
	}
	return nil
}
