package couchapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

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

// allDocsQuery is a parsed _all_docs request.
type allDocsQuery struct {
	keys    []string // with hasKeys: the rows asked for, in order
	hasKeys bool

	includeDocs, conflicts, descending, updateSeq, inclusiveEnd bool

	limit, skip int64

	startKey, endKey string
	hasStart, hasEnd bool
}

// allDocs answers GET|POST /{db}/_all_docs: by keys (rows for missing ids
// are {"key","error":"not_found"}, deleted ones carry "deleted":true and a
// null doc) or by id range (startkey, endkey, inclusive_end, descending,
// skip, limit), in id byte order, with include_docs and conflicts.
func (s *Server) allDocs(q *request) *apiError {
	a, ae := parseAllDocs(q)
	if ae != nil {
		return ae
	}
	ctx := q.r.Context()
	info, err := q.st.Info(ctx)
	if err != nil {
		return asAPIError(err)
	}
	var rows []allDocsRow
	offset := json.RawMessage("null")
	if a.hasKeys {
		rows, ae = allDocsByKeys(ctx, q.st, a)
	} else {
		rows, offset, ae = allDocsByRange(ctx, q.st, a)
	}
	if ae != nil {
		return ae
	}
	writeAllDocs(q.w, info, offset, a, rows)
	return nil
}

// parseAllDocs reads the options of an _all_docs request from its query
// string and, for a POST, its body (whose members override the query).
func parseAllDocs(q *request) (allDocsQuery, *apiError) {
	var a allDocsQuery
	qv := q.r.URL.Query()
	if q.r.Method == http.MethodPost {
		m, ae := readObject(q.r)
		if ae != nil {
			return a, ae
		}
		for k, v := range m {
			if k == "keys" {
				if isNull(v) {
					continue
				}
				if json.Unmarshal(v, &a.keys) != nil {
					return a, badRequest("`keys` member must be an array of document ids.")
				}
				a.hasKeys = true
				continue
			}
			// Options in the body, as CouchDB accepts them; they override
			// the query string.
			qv.Set(k, strings.TrimSpace(string(v)))
		}
	}
	if v := qv.Get("keys"); v != "" && !a.hasKeys {
		if json.Unmarshal([]byte(v), &a.keys) != nil {
			return a, badRequest("`keys` must be a JSON array of document ids.")
		}
		a.hasKeys = true
	}
	if k, set, ae := jsonStringParam(qv, "key"); ae != nil {
		return a, ae
	} else if set && !a.hasKeys {
		a.keys, a.hasKeys = []string{k}, true
	}
	var ae *apiError
	for _, b := range []struct {
		name string
		v    *bool
	}{{"include_docs", &a.includeDocs}, {"conflicts", &a.conflicts}, {"descending", &a.descending}, {"update_seq", &a.updateSeq}} {
		if *b.v, ae = boolParam(qv, b.name); ae != nil {
			return a, ae
		}
	}
	a.inclusiveEnd = true
	if qv.Has("inclusive_end") {
		if a.inclusiveEnd, ae = boolParam(qv, "inclusive_end"); ae != nil {
			return a, ae
		}
	}
	if a.limit, ae = intParam(qv, "limit", maxAllDocsLimit, maxAllDocsLimit); ae != nil {
		return a, ae
	}
	if a.skip, ae = intParam(qv, "skip", 0, maxAllDocsLimit); ae != nil {
		return a, ae
	}
	if a.startKey, a.hasStart, ae = jsonStringParam(qv, "startkey", "start_key"); ae != nil {
		return a, ae
	}
	if a.endKey, a.hasEnd, ae = jsonStringParam(qv, "endkey", "end_key"); ae != nil {
		return a, ae
	}
	return a, nil
}

// allDocsByKeys returns the rows of the documents a.keys names, with
// their bodies: a deleted document's row carries its deleted revision, an
// unknown id's row is missing. The documents are read together
// (store.GetWinners): one batch for a store whose reads are round trips.
func allDocsByKeys(ctx context.Context, st store.Store, a allDocsQuery) ([]allDocsRow, *apiError) {
	keys := a.keys
	if a.descending {
		slices.Reverse(keys)
	}
	won, err := store.GetWinners(ctx, st, keys, a.conflicts)
	if err != nil {
		return nil, asAPIError(err)
	}
	rows := make([]allDocsRow, 0, len(keys))
	for i, k := range keys {
		switch w := won[i]; {
		case w.Doc != nil:
			_, rev, _, _ := docHead(w.Doc)
			rows = append(rows, allDocsRow{id: k, rev: rev, doc: w.Doc})
		case w.Deleted:
			rows = append(rows, allDocsRow{id: k, rev: w.Rev, deleted: true})
		default:
			rows = append(rows, allDocsRow{id: k, missing: true})
		}
	}
	return page(rows, a.skip, a.limit), nil
}

// allDocsByRange returns the rows of the documents between the start and
// end keys (their bodies with include_docs) and the offset of the first
// one.
func allDocsByRange(ctx context.Context, st store.Store, a allDocsQuery) ([]allDocsRow, json.RawMessage, *apiError) {
	lo, hi, hasLo, hasHi := a.startKey, a.endKey, a.hasStart, a.hasEnd
	if a.descending {
		lo, hi, hasLo, hasHi = a.endKey, a.startKey, a.hasEnd, a.hasStart
	}
	var infos []store.DocInfo
	if empty := (hasHi && hi == "") || (hasLo && hasHi && lo > hi); !empty {
		opts := store.AllDocsOptions{StartKey: lo, EndKey: hi}
		if !a.descending && a.skip+a.limit < maxAllDocsLimit {
			opts.Limit = int(a.skip + a.limit + 1) // one more, in case the exclusive end drops one
		}
		var err error
		if infos, err = st.AllDocs(ctx, opts); err != nil {
			return nil, nil, asAPIError(err)
		}
	}
	if !a.inclusiveEnd && a.hasEnd {
		infos = slices.DeleteFunc(infos, func(d store.DocInfo) bool { return d.ID == a.endKey })
	}
	if a.descending {
		slices.Reverse(infos)
	}
	before := int64(0)
	if a.hasStart && !a.descending {
		// offset: the documents before startkey.
		pre, err := st.AllDocs(ctx, store.AllDocsOptions{EndKey: a.startKey})
		if err != nil {
			return nil, nil, asAPIError(err)
		}
		before = int64(len(pre))
		if n := len(pre); n > 0 && pre[n-1].ID == a.startKey {
			before--
		}
	}
	offset := mustJSON(before + min(a.skip, int64(len(infos))))
	var rows []allDocsRow
	for _, d := range infos {
		rows = append(rows, allDocsRow{id: d.ID, rev: d.Rev})
	}
	rows = page(rows, a.skip, a.limit)
	if a.includeDocs {
		for i := range rows {
			doc, err := st.Get(ctx, rows[i].id, store.GetOptions{Rev: rows[i].rev, Conflicts: a.conflicts})
			if errors.Is(err, engine.ErrNotFound) {
				continue // changed meanwhile: the row keeps its revision, doc null
			}
			if err != nil {
				return nil, nil, asAPIError(err)
			}
			rows[i].doc = doc
		}
	}
	return rows, offset, nil
}

// writeAllDocs writes the answer of _all_docs, row by row.
func writeAllDocs(w *respWriter, info engine.EndpointInfo, offset json.RawMessage, a allDocsQuery, rows []allDocsRow) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	b := make([]byte, 0, 256)
	b = append(b, `{"total_rows":`...)
	b = strconv.AppendInt(b, info.DocCount, 10)
	b = append(b, `,"offset":`...)
	b = append(b, offset...)
	if a.updateSeq {
		b = append(b, `,"update_seq":`...)
		b = appendString(b, info.UpdateSeq)
	}
	b = append(b, `,"rows":[`...)
	for i, r := range rows {
		if i > 0 {
			b = append(b, ",\r\n"...)
		}
		b = appendAllDocsRow(b, r, a.includeDocs)
		if _, err := bw.Write(b); err != nil {
			return // the client went away
		}
		b = b[:0]
	}
	b = append(b, "]}\n"...)
	_, _ = bw.Write(b)
	_ = bw.Flush()
}

// appendAllDocsRow appends the JSON of one row to b.
func appendAllDocsRow(b []byte, r allDocsRow, includeDocs bool) []byte {
	if r.missing {
		b = append(b, `{"key":`...)
		b = appendString(b, r.id)
		return append(b, `,"error":"not_found"}`...)
	}
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
	return append(b, '}')
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
