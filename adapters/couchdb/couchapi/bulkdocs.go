package couchapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/livesync-go/livesync-go/engine/holdback"
	"github.com/livesync-go/livesync-go/engine/rawjson"
)

// rawString reads an optional string member given raw (nil when
// absent), as stringField does.
func rawString(raw []byte, key string) (string, bool, *apiError) {
	if isNull(raw) {
		return "", false, nil
	}
	s, ok := rawjson.String(raw)
	if !ok {
		return "", false, badRequest(key + " must be a string")
	}
	return s, true, nil
}

// bulkRow is one row of a _bulk_docs answer.
type bulkRow struct {
	OK     bool   `json:"ok,omitempty"`
	ID     string `json:"id"`
	Rev    string `json:"rev,omitempty"`
	Error  string `json:"error,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// bulkDoc is one parsed document of a _bulk_docs body: its raw bytes
// and the few members the handler reads. The body is checked to be JSON
// once, as a whole; each document is then only walked for those members
// (rawjson), and decoded into fields only where a handler needs them
// (fieldsOf: _local documents, new edits without _id).
type bulkDoc struct {
	raw       json.RawMessage
	fields    map[string]json.RawMessage
	id        string
	hasID     bool
	rev       string
	deleted   json.RawMessage
	revisions json.RawMessage
}

// fieldsOf decodes d's members (once).
func (d *bulkDoc) fieldsOf() (map[string]json.RawMessage, *apiError) {
	if d.fields == nil {
		f, ae := decodeDoc(d.raw)
		if ae != nil {
			return nil, ae
		}
		d.fields = f
	}
	return d.fields, nil
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
	b, ae := readBody(q.r)
	if ae != nil {
		return nil, false, ae
	}
	b = bytes.TrimSpace(b)
	switch {
	case !utf8.Valid(b):
		return nil, false, errInvalidJSON
	case len(b) > 0 && !json.Valid(b):
		return nil, false, invalidJSON(b)
	case len(b) == 0 || b[0] != '{':
		return nil, false, errNotObject
	}
	var rawDocs, rawNewEdits []byte
	hasDocs := false
	rawjson.Members(b, func(k, v []byte) bool {
		switch string(k) {
		case "docs":
			rawDocs, hasDocs = v, true
		case "new_edits":
			rawNewEdits = v
		}
		return true
	})
	if !hasDocs {
		return nil, false, badRequest("POST body must include `docs` parameter.")
	}
	var raws [][]byte
	if !isNull(rawDocs) && !rawjson.Elements(rawDocs, func(v []byte) bool { raws = append(raws, v); return true }) {
		return nil, false, badRequest("`docs` parameter must be an array.")
	}
	newEdits, ae := jsonBool(rawNewEdits, true, "new_edits")
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
	var rawID, rawRev []byte
	if len(raw) == 0 || raw[0] != '{' || !rawjson.Members(raw, func(k, v []byte) bool {
		switch string(k) {
		case "_id":
			rawID = v
		case "_rev":
			rawRev = v
		case "_deleted":
			d.deleted = v
		case "_revisions":
			d.revisions = v
		}
		return true
	}) {
		return errDocNotObject
	}
	var ae *apiError
	if d.id, d.hasID, ae = rawString(rawID, "_id"); ae != nil {
		return ae
	}
	if d.rev, _, ae = rawString(rawRev, "_rev"); ae != nil {
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
	if ae := checkRevisions(d.deleted, d.revisions, d.rev); ae != nil {
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
			fields, ae := d.fieldsOf()
			if ae != nil {
				return nil, ae
			}
			if _, err := s.writeLocal(ctx, q, strings.TrimPrefix(d.id, "_local/"), fields, d.rev, false); err != nil {
				name, reason := docError(err)
				rows = append(rows, bulkRow{ID: d.id, Rev: d.rev, Error: name, Reason: reason})
			}
		default:
			batch = append(batch, d.raw)
		}
	}
	if len(batch) > 0 {
		// The notes these chunks complete are served when the client
		// has its answer.
		res, err := q.st.BulkDocs(holdback.WithSettle(ctx), batch)
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
	for i := range docs {
		d := &docs[i]
		id := d.id
		if !d.hasID {
			id = newDocID()
		}
		rows[i].ID = id
		switch {
		case isDesign(id) && !admin:
			rows[i].Error, rows[i].Reason = "forbidden", errDesignAdmin.reason
		case strings.HasPrefix(id, "_local/"):
			fields, ae := d.fieldsOf()
			if ae != nil {
				return nil, ae
			}
			rev, err := s.writeNew(ctx, q, id, fields)
			if err != nil {
				if ae := asAPIError(err); ae.status >= 500 {
					return nil, ae
				}
				rows[i].Error, rows[i].Reason = docError(err)
				continue
			}
			rows[i].OK, rows[i].Rev = true, rev
		case d.hasID: // the document names itself: stored as sent
			batch = append(batch, d.raw)
			inBatch = append(inBatch, i)
		default:
			fields, ae := d.fieldsOf()
			if ae != nil {
				return nil, ae
			}
			fields["_id"] = mustJSON(id)
			b, err := json.Marshal(fields)
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
func checkRevisions(deleted, revisions json.RawMessage, rev string) *apiError {
	if !isNull(deleted) && string(deleted) != "true" && string(deleted) != "false" {
		return errorf(http.StatusBadRequest, "doc_validation", "_deleted must be a boolean")
	}
	raw := revisions
	if isNull(raw) {
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
