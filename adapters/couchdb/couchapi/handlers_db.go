package couchapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// dbInfo answers GET /{db} in CouchDB 3's shape. Counters the Store port
// does not keep (deleted documents, sizes) are zero.
func (s *Server) dbInfo(q *request) *apiError {
	info, err := q.st.Info(q.r.Context())
	if err != nil {
		return asAPIError(err)
	}
	seq := info.UpdateSeq
	if seq == "" {
		seq = "0"
	}
	writeJSON(q.w, http.StatusOK, map[string]any{
		"db_name": q.db, "update_seq": seq, "purge_seq": "0",
		"sizes": map[string]int{"file": 0, "external": 0, "active": 0}, "props": map[string]any{},
		"doc_del_count": 0, "doc_count": info.DocCount, "disk_format_version": 8,
		"compact_running": false, "cluster": map[string]int{"q": 1, "n": 1, "w": 1, "r": 1},
		"instance_start_time": "0",
	})
	return nil
}

func (s *Server) createDB(q *request) *apiError {
	if err := s.dbs.Create(q.r.Context(), q.db); err != nil {
		if errors.Is(err, ErrIllegalName) {
			return illegalDBName(q.db)
		}
		return asAPIError(err)
	}
	q.w.Header().Set("Location", "/"+url.PathEscape(q.db))
	writeJSON(q.w, http.StatusCreated, map[string]bool{"ok": true})
	return nil
}

func (s *Server) deleteDB(q *request) *apiError {
	if q.r.URL.Query().Has("rev") {
		return badRequest("You tried to DELETE a database with a ?rev= parameter. Did you mean to DELETE a document instead?")
	}
	if err := s.dbs.Delete(q.r.Context(), q.db); err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			return errDBMissing
		}
		return asAPIError(err)
	}
	writeJSON(q.w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}

// ensureFullCommit is a no-op: every store write is durable when it
// returns.
func (s *Server) ensureFullCommit(q *request) *apiError {
	writeJSON(q.w, http.StatusCreated, map[string]any{"ok": true, "instance_start_time": "0"})
	return nil
}

// revsDiff answers POST /{db}/_revs_diff {id: [rev…]} with the missing
// revisions per document.
func (s *Server) revsDiff(q *request) *apiError {
	m, ae := readObject(q.r)
	if ae != nil {
		return ae
	}
	revs := make(map[string][]string, len(m))
	for id, raw := range m {
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return badRequest("Each value of the _revs_diff body must be a list of revisions")
		}
		for _, r := range list {
			if !validRev(r) {
				return errInvalidRev
			}
		}
		revs[id] = list
	}
	missing, err := q.st.RevsDiff(q.r.Context(), revs)
	if err != nil {
		return asAPIError(err)
	}
	out := make(map[string]map[string][]string, len(missing))
	for id, l := range missing {
		if len(l) > 0 {
			out[id] = map[string][]string{"missing": l}
		}
	}
	writeJSON(q.w, http.StatusOK, out)
	return nil
}

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
	m, ae := readObject(q.r)
	if ae != nil {
		return ae
	}
	rawDocs, ok := m["docs"]
	if !ok {
		return badRequest("POST body must include `docs` parameter.")
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(rawDocs, &raws); err != nil {
		return badRequest("`docs` parameter must be an array.")
	}
	newEdits, ae := jsonBool(m["new_edits"], true, "new_edits")
	if ae != nil {
		return badRequest("`new_edits` parameter must be a boolean.")
	}
	docs := make([]bulkDoc, len(raws))
	for i, raw := range raws {
		d := &docs[i]
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
			continue
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
	}
	ctx := q.r.Context()
	admin := q.id.acc != nil && q.id.acc.admin
	if !newEdits {
		// Replication: one atomic store call for every ordinary document;
		// only errors are reported, as CouchDB does.
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
				return asAPIError(err)
			}
			for _, r := range res {
				if r.Error != "" {
					rows = append(rows, bulkRow{ID: r.ID, Rev: r.Rev, Error: r.Error, Reason: r.Reason})
				}
			}
		}
		writeJSON(q.w, http.StatusCreated, rows)
		return nil
	}
	// Local edits: every ordinary document in one atomic store call, so a
	// storage failure leaves nothing of the request; conflicts and
	// refusals are per-document rows. _local documents and refused design
	// documents are answered on their own, as CouchDB does.
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
					return ae
				}
				rows[i].Error, rows[i].Reason = docError(err)
				continue
			}
			rows[i].OK, rows[i].Rev = true, rev
		default:
			d.fields["_id"] = mustJSON(id)
			b, err := json.Marshal(d.fields)
			if err != nil {
				return asAPIError(err)
			}
			batch = append(batch, b)
			inBatch = append(inBatch, i)
		}
	}
	if len(batch) > 0 {
		res, err := q.st.PutBatch(ctx, batch)
		if err != nil {
			return asAPIError(err)
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
	writeJSON(q.w, http.StatusCreated, rows)
	return nil
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

// bulkGetRef is one parsed entry of a _bulk_get body.
type bulkGetRef struct {
	id    json.RawMessage // as sent (null when missing)
	docID string
	rev   string // "" means every leaf
	err   *bulkGetError
	docs  [][]byte
}

type bulkGetError struct {
	ID     json.RawMessage `json:"id"`
	Rev    json.RawMessage `json:"rev"`
	Error  string          `json:"error"`
	Reason string          `json:"reason"`
}

// bulkGet answers POST /{db}/_bulk_get in CouchDB 3's JSON shape:
// {"results":[{"id","docs":[{"ok":doc}|{"error":{id,rev,error,reason}}]}]}.
// A reference without rev returns every leaf; latest=true follows a
// revision that is no longer a leaf to its leaves.
func (s *Server) bulkGet(q *request) *apiError {
	qv := q.r.URL.Query()
	for _, k := range []string{"open_revs", "new_edits", "w", "rev", "atts_since"} {
		if qv.Has(k) {
			return badRequest(`"` + k + `" query parameter is not acceptable`)
		}
	}
	withRevs, ae := boolParam(qv, "revs")
	if ae != nil {
		return ae
	}
	latest, ae := boolParam(qv, "latest")
	if ae != nil {
		return ae
	}
	m, ae := readObject(q.r)
	if ae != nil {
		return ae
	}
	rawDocs, ok := m["docs"]
	if !ok || isNull(rawDocs) {
		return badRequest("Missing JSON list of 'docs'.")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(rawDocs, &items); err != nil {
		return badRequest("'docs' must be a JSON list.")
	}
	if len(items) > MaxOpenRevs {
		return errTooManyRevs
	}
	null := json.RawMessage("null")
	refs := make([]bulkGetRef, len(items))
	for i, it := range items {
		r := &refs[i]
		r.id = null
		var obj map[string]json.RawMessage
		if json.Unmarshal(it, &obj) != nil || obj == nil || len(obj) == 0 {
			r.err = &bulkGetError{ID: null, Rev: null, Error: "bad_request", Reason: "document must be a JSON object"}
			continue
		}
		rawID, ok := obj["id"]
		if !ok {
			r.err = &bulkGetError{ID: null, Rev: null, Error: "bad_request", Reason: "document id missed"}
			continue
		}
		r.id = rawID
		if json.Unmarshal(rawID, &r.docID) != nil {
			r.err = &bulkGetError{ID: rawID, Rev: null, Error: "bad_request", Reason: "document id must be a string"}
			continue
		}
		if ae := checkDocID(r.docID); ae != nil || strings.HasPrefix(r.docID, "_local/") {
			if ae == nil {
				ae = errIllegalDocID
			}
			r.err = &bulkGetError{ID: rawID, Rev: null, Error: ae.name, Reason: ae.reason}
			continue
		}
		if rawRev, ok := obj["rev"]; ok && !isNull(rawRev) {
			// "" means no revision, as PouchDB servers read it.
			if json.Unmarshal(rawRev, &r.rev) != nil || (r.rev != "" && !validRev(r.rev)) {
				r.err = &bulkGetError{ID: rawID, Rev: rawRev, Error: "bad_request", Reason: "Invalid rev format"}
				continue
			}
		}
	}
	ctx := q.r.Context()
	// The references to one document are answered from one store read of
	// its revision tree (two more at most: every leaf, and latest=true for
	// revisions no longer readable), so n revisions of one document cost
	// time linear in n and in its tree, not n reads of it.
	byID := map[string][]int{}
	var order []string
	for i, r := range refs {
		if r.err != nil {
			continue
		}
		if _, ok := byID[r.docID]; !ok {
			order = append(order, r.docID)
		}
		byID[r.docID] = append(byID[r.docID], i)
	}
	answered := 0
	for _, id := range order {
		idx := byID[id]
		var named []string
		seen := map[string]bool{}
		all := false
		for _, i := range idx {
			if rev := refs[i].rev; rev == "" {
				all = true
			} else if !seen[rev] {
				seen[rev] = true
				named = append(named, rev)
			}
		}
		docs := map[string][]json.RawMessage{}
		var lost []string // named revisions not readable, for latest=true
		if len(named) > 0 {
			res, err := q.st.GetRevs(ctx, id, store.RevsOptions{Revs: named, History: withRevs})
			if err != nil {
				return asAPIError(err)
			}
			for _, r := range res {
				if len(r.Docs) > 0 {
					docs[r.Rev] = r.Docs
				} else {
					lost = append(lost, r.Rev)
				}
			}
		}
		if latest && len(lost) > 0 {
			res, err := q.st.GetRevs(ctx, id, store.RevsOptions{Revs: lost, Latest: true, History: withRevs})
			if err != nil {
				return asAPIError(err)
			}
			for _, r := range res {
				if len(r.Docs) > 0 {
					docs[r.Rev] = r.Docs
				}
			}
		}
		var leaves []json.RawMessage
		if all {
			res, err := q.st.GetRevs(ctx, id, store.RevsOptions{All: true, History: withRevs})
			if err != nil {
				return asAPIError(err)
			}
			for _, r := range res {
				leaves = append(leaves, r.Docs...)
			}
		}
		for _, i := range idx {
			r := &refs[i]
			var got []json.RawMessage
			if r.rev == "" {
				got = leaves
			} else {
				got = docs[r.rev]
			}
			if answered += len(got); answered > MaxAnswerRevs {
				return errAnswerTooLarge
			}
			for _, d := range got {
				r.docs = append(r.docs, d)
			}
			if len(r.docs) == 0 {
				rev := json.RawMessage(`"undefined"`)
				if r.rev != "" {
					rev = mustJSON(r.rev)
				}
				r.err = &bulkGetError{ID: r.id, Rev: rev, Error: "not_found", Reason: "missing"}
			}
		}
	}
	var b bytes.Buffer
	b.WriteString(`{"results":[`)
	for i, r := range refs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id":`)
		b.Write(r.id)
		b.WriteString(`,"docs":[`)
		if r.err != nil {
			b.WriteString(`{"error":`)
			b.Write(mustJSON(r.err))
			b.WriteByte('}')
		}
		for k, d := range r.docs {
			if k > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"ok":`)
			b.Write(d)
			b.WriteByte('}')
		}
		b.WriteString("]}")
	}
	b.WriteString("]}")
	writeRawJSON(q.w, http.StatusOK, b.Bytes())
	return nil
}

// allDocsRow is one row of _all_docs.
type allDocsRow struct {
	id      string
	rev     string
	deleted bool
	missing bool
	doc     []byte
}

// maxAllDocsLimit bounds limit and skip (larger values mean "all").
const maxAllDocsLimit = 1 << 40

// allDocs answers GET|POST /{db}/_all_docs: by keys (rows for missing ids
// are {"key","error":"not_found"}, deleted ones carry "deleted":true and a
// null doc) or by id range (startkey, endkey, inclusive_end, descending,
// skip, limit), in id byte order, with include_docs and conflicts.
func (s *Server) allDocs(q *request) *apiError {
	qv := q.r.URL.Query()
	var keys []string
	hasKeys := false
	if q.r.Method == http.MethodPost {
		m, ae := readObject(q.r)
		if ae != nil {
			return ae
		}
		for k, v := range m {
			if k == "keys" {
				if isNull(v) {
					continue
				}
				if json.Unmarshal(v, &keys) != nil {
					return badRequest("`keys` member must be an array of document ids.")
				}
				hasKeys = true
				continue
			}
			// Options in the body, as CouchDB accepts them; they override
			// the query string.
			qv.Set(k, strings.TrimSpace(string(v)))
		}
	}
	if v := qv.Get("keys"); v != "" && !hasKeys {
		if json.Unmarshal([]byte(v), &keys) != nil {
			return badRequest("`keys` must be a JSON array of document ids.")
		}
		hasKeys = true
	}
	if k, set, ae := jsonStringParam(qv, "key"); ae != nil {
		return ae
	} else if set && !hasKeys {
		keys, hasKeys = []string{k}, true
	}
	includeDocs, ae := boolParam(qv, "include_docs")
	if ae != nil {
		return ae
	}
	conflicts, ae := boolParam(qv, "conflicts")
	if ae != nil {
		return ae
	}
	descending, ae := boolParam(qv, "descending")
	if ae != nil {
		return ae
	}
	updateSeq, ae := boolParam(qv, "update_seq")
	if ae != nil {
		return ae
	}
	inclusiveEnd := true
	if qv.Has("inclusive_end") {
		if inclusiveEnd, ae = boolParam(qv, "inclusive_end"); ae != nil {
			return ae
		}
	}
	limit, ae := intParam(qv, "limit", maxAllDocsLimit, maxAllDocsLimit)
	if ae != nil {
		return ae
	}
	skip, ae := intParam(qv, "skip", 0, maxAllDocsLimit)
	if ae != nil {
		return ae
	}
	startKey, hasStart, ae := jsonStringParam(qv, "startkey", "start_key")
	if ae != nil {
		return ae
	}
	endKey, hasEnd, ae := jsonStringParam(qv, "endkey", "end_key")
	if ae != nil {
		return ae
	}
	ctx := q.r.Context()
	info, err := q.st.Info(ctx)
	if err != nil {
		return asAPIError(err)
	}
	getOpts := store.GetOptions{Conflicts: conflicts}
	var rows []allDocsRow
	offset := json.RawMessage("null")
	if hasKeys {
		if descending {
			slices.Reverse(keys)
		}
		for _, k := range keys {
			doc, err := q.st.Get(ctx, k, getOpts)
			switch {
			case err == nil:
				_, rev, _, _ := docHead(doc)
				rows = append(rows, allDocsRow{id: k, rev: rev, doc: doc})
			case errors.Is(err, engine.ErrNotFound):
				row := allDocsRow{id: k, missing: true}
				if w, err := q.st.BulkGet(ctx, []engine.DocRev{{ID: k}}); err == nil && len(w) == 1 {
					if _, rev, del, ok := docHead(w[0]); ok && del {
						row = allDocsRow{id: k, rev: rev, deleted: true}
					}
				}
				rows = append(rows, row)
			default:
				return asAPIError(err)
			}
		}
		rows = page(rows, skip, limit)
	} else {
		lo, hi, hasLo, hasHi := startKey, endKey, hasStart, hasEnd
		if descending {
			lo, hi, hasLo, hasHi = endKey, startKey, hasEnd, hasStart
		}
		var infos []store.DocInfo
		if empty := (hasHi && hi == "") || (hasLo && hasHi && lo > hi); !empty {
			opts := store.AllDocsOptions{StartKey: lo, EndKey: hi}
			if !descending && skip+limit < maxAllDocsLimit {
				opts.Limit = int(skip + limit + 1) // one more, in case the exclusive end drops one
			}
			var err error
			if infos, err = q.st.AllDocs(ctx, opts); err != nil {
				return asAPIError(err)
			}
		}
		if !inclusiveEnd && hasEnd {
			infos = slices.DeleteFunc(infos, func(d store.DocInfo) bool { return d.ID == endKey })
		}
		if descending {
			slices.Reverse(infos)
		}
		before := int64(0)
		if hasStart && !descending {
			// offset: the documents before startkey.
			pre, err := q.st.AllDocs(ctx, store.AllDocsOptions{EndKey: startKey})
			if err != nil {
				return asAPIError(err)
			}
			before = int64(len(pre))
			if n := len(pre); n > 0 && pre[n-1].ID == startKey {
				before--
			}
		}
		offset = mustJSON(before + min(skip, int64(len(infos))))
		for _, d := range infos {
			rows = append(rows, allDocsRow{id: d.ID, rev: d.Rev})
		}
		rows = page(rows, skip, limit)
		if includeDocs {
			for i := range rows {
				doc, err := q.st.Get(ctx, rows[i].id, store.GetOptions{Rev: rows[i].rev, Conflicts: conflicts})
				if errors.Is(err, engine.ErrNotFound) {
					continue // changed meanwhile: the row keeps its revision, doc null
				}
				if err != nil {
					return asAPIError(err)
				}
				rows[i].doc = doc
			}
		}
	}
	q.w.Header().Set("Content-Type", "application/json")
	q.w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(q.w, 64<<10)
	b := make([]byte, 0, 256)
	b = append(b, `{"total_rows":`...)
	b = strconv.AppendInt(b, info.DocCount, 10)
	b = append(b, `,"offset":`...)
	b = append(b, offset...)
	if updateSeq {
		b = append(b, `,"update_seq":`...)
		b = appendString(b, info.UpdateSeq)
	}
	b = append(b, `,"rows":[`...)
	for i, r := range rows {
		if i > 0 {
			b = append(b, ",\r\n"...)
		}
		if r.missing {
			b = append(b, `{"key":`...)
			b = appendString(b, r.id)
			b = append(b, `,"error":"not_found"}`...)
		} else {
			b = append(b, `{"id":`...)
			b = appendString(b, r.id)
			b = append(b, `,"key":`...)
			b = appendString(b, r.id)
			b = append(b, `,"value":{"rev":`...)
			b = appendString(b, r.rev)
			if r.deleted {
				b = append(b, `,"deleted":true`...)
			}
			b = append(b, '}')
			if includeDocs {
				b = append(b, `,"doc":`...)
				if r.doc == nil {
					b = append(b, "null"...)
				} else {
					b = append(b, r.doc...)
				}
			}
			b = append(b, '}')
		}
		if _, err := bw.Write(b); err != nil {
			return nil // the client went away
		}
		b = b[:0]
	}
	b = append(b, "]}\n"...)
	_, _ = bw.Write(b)
	_ = bw.Flush()
	return nil
}

// page applies skip and limit.
func page(rows []allDocsRow, skip, limit int64) []allDocsRow {
	if skip >= int64(len(rows)) {
		return nil
	}
	rows = rows[skip:]
	if limit < int64(len(rows)) {
		rows = rows[:limit]
	}
	return rows
}
