package couchapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
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
		if errors.Is(err, ErrForbidden) {
			return forbiddenDB(err)
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
		if errors.Is(err, ErrForbidden) {
			return forbiddenDB(err)
		}
		return asAPIError(err)
	}
	writeJSON(q.w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}

// forbiddenDB answers a database creation or deletion the Databases
// refuses (err wraps ErrForbidden) with its reason: say, a server that
// serves only the databases of its configuration.
func forbiddenDB(err error) *apiError {
	return errorf(http.StatusForbidden, "forbidden", strings.TrimSuffix(err.Error(), ": "+ErrForbidden.Error()))
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
	refs, opts, ae := parseBulkGet(q)
	if ae != nil {
		return ae
	}
	if ae := answerBulkGet(q.r.Context(), q.st, refs, opts); ae != nil {
		return ae
	}
	writeBulkGet(q.w, refs)
	return nil
}

// bulkGetOptions are the query options of a _bulk_get request.
type bulkGetOptions struct {
	withRevs bool // revs=true: each document carries _revisions
	latest   bool // latest=true
}

// parseBulkGet reads the references of a _bulk_get request. A reference
// that cannot be read becomes its own error row; only a malformed request
// is refused.
func parseBulkGet(q *request) ([]bulkGetRef, bulkGetOptions, *apiError) {
	var opts bulkGetOptions
	qv := q.r.URL.Query()
	for _, k := range []string{"open_revs", "new_edits", "w", "rev", "atts_since"} {
		if qv.Has(k) {
			return nil, opts, badRequest(`"` + k + `" query parameter is not acceptable`)
		}
	}
	var ae *apiError
	if opts.withRevs, ae = boolParam(qv, "revs"); ae != nil {
		return nil, opts, ae
	}
	if opts.latest, ae = boolParam(qv, "latest"); ae != nil {
		return nil, opts, ae
	}
	m, ae := readObject(q.r)
	if ae != nil {
		return nil, opts, ae
	}
	rawDocs, ok := m["docs"]
	if !ok || isNull(rawDocs) {
		return nil, opts, badRequest("Missing JSON list of 'docs'.")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(rawDocs, &items); err != nil {
		return nil, opts, badRequest("'docs' must be a JSON list.")
	}
	if len(items) > MaxOpenRevs {
		return nil, opts, errTooManyRevs
	}
	refs := make([]bulkGetRef, len(items))
	for i, it := range items {
		refs[i] = parseBulkGetRef(it)
	}
	return refs, opts, nil
}

// parseBulkGetRef reads one entry of a _bulk_get body; a bad entry is a
// reference whose err is set.
func parseBulkGetRef(it json.RawMessage) bulkGetRef {
	null := json.RawMessage("null")
	r := bulkGetRef{id: null}
	var obj map[string]json.RawMessage
	if json.Unmarshal(it, &obj) != nil || obj == nil || len(obj) == 0 {
		r.err = &bulkGetError{ID: null, Rev: null, Error: "bad_request", Reason: "document must be a JSON object"}
		return r
	}
	rawID, ok := obj["id"]
	if !ok {
		r.err = &bulkGetError{ID: null, Rev: null, Error: "bad_request", Reason: "document id missed"}
		return r
	}
	r.id = rawID
	if json.Unmarshal(rawID, &r.docID) != nil {
		r.err = &bulkGetError{ID: rawID, Rev: null, Error: "bad_request", Reason: "document id must be a string"}
		return r
	}
	if ae := checkDocID(r.docID); ae != nil || strings.HasPrefix(r.docID, "_local/") {
		if ae == nil {
			ae = errIllegalDocID
		}
		r.err = &bulkGetError{ID: rawID, Rev: null, Error: ae.name, Reason: ae.reason}
		return r
	}
	if rawRev, ok := obj["rev"]; ok && !isNull(rawRev) {
		// "" means no revision, as PouchDB servers read it.
		if json.Unmarshal(rawRev, &r.rev) != nil || (r.rev != "" && !validRev(r.rev)) {
			r.err = &bulkGetError{ID: rawID, Rev: rawRev, Error: "bad_request", Reason: "Invalid rev format"}
		}
	}
	return r
}

// answerBulkGet fills each reference's documents, or its not_found
// error. The references to one document are answered from one store read
// of its revision tree (two more at most: every leaf, and latest=true for
// revisions no longer readable), so n revisions of one document cost time
// linear in n and in its tree, not n reads of it; and the documents are
// read together (store.GetRevsMany), so a store whose reads are round
// trips answers the whole request in a few.
func answerBulkGet(ctx context.Context, st store.Store, refs []bulkGetRef, opts bulkGetOptions) *apiError {
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
	wants := make([]bulkGetWant, len(order))
	for k, id := range order {
		w := bulkGetWant{id: id}
		seen := map[string]bool{}
		for _, i := range byID[id] {
			if rev := refs[i].rev; rev == "" {
				w.all = true
			} else if !seen[rev] {
				seen[rev] = true
				w.named = append(w.named, rev)
			}
		}
		wants[k] = w
	}
	if ae := readBulkGetRevs(ctx, st, wants, opts); ae != nil {
		return ae
	}
	answered := 0
	for k, id := range order {
		w := &wants[k]
		for _, i := range byID[id] {
			r := &refs[i]
			got := w.docs[r.rev]
			if r.rev == "" {
				got = w.leaves
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
	return nil
}

// bulkGetWant is what a _bulk_get asks of one document, and what was
// read of it.
type bulkGetWant struct {
	id     string
	named  []string // the revisions named, each once
	all    bool     // a reference without rev: every leaf
	docs   map[string][]json.RawMessage
	leaves []json.RawMessage
}

// readBulkGetRevs reads, for every document, its named revisions (with
// latest=true, a named revision no longer readable is followed to its
// leaves) and, if all, every leaf: one store.GetRevsMany for the named
// revisions, and one for the leaves.
func readBulkGetRevs(ctx context.Context, st store.Store, wants []bulkGetWant, opts bulkGetOptions) *apiError {
	var reqs []store.RevsRequest
	var who []int
	for k := range wants {
		wants[k].docs = map[string][]json.RawMessage{}
		if len(wants[k].named) > 0 {
			reqs = append(reqs, store.RevsRequest{ID: wants[k].id, Opts: store.RevsOptions{Revs: wants[k].named, History: opts.withRevs}})
			who = append(who, k)
		}
	}
	lost := map[int][]string{} // named revisions not readable, for latest=true
	if len(reqs) > 0 {
		res, err := store.GetRevsMany(ctx, st, reqs)
		if err != nil {
			return asAPIError(err)
		}
		for n, k := range who {
			for _, r := range res[n] {
				if len(r.Docs) > 0 {
					wants[k].docs[r.Rev] = r.Docs
				} else if opts.latest {
					lost[k] = append(lost[k], r.Rev)
				}
			}
		}
	}
	reqs, who = reqs[:0], who[:0]
	var isAll []bool
	for k := range wants {
		if revs := lost[k]; len(revs) > 0 {
			reqs = append(reqs, store.RevsRequest{ID: wants[k].id, Opts: store.RevsOptions{Revs: revs, Latest: true, History: opts.withRevs}})
			who, isAll = append(who, k), append(isAll, false)
		}
		if wants[k].all {
			reqs = append(reqs, store.RevsRequest{ID: wants[k].id, Opts: store.RevsOptions{All: true, History: opts.withRevs}})
			who, isAll = append(who, k), append(isAll, true)
		}
	}
	if len(reqs) == 0 {
		return nil
	}
	res, err := store.GetRevsMany(ctx, st, reqs)
	if err != nil {
		return asAPIError(err)
	}
	for n, k := range who {
		for _, r := range res[n] {
			switch {
			case isAll[n]:
				wants[k].leaves = append(wants[k].leaves, r.Docs...)
			case len(r.Docs) > 0:
				wants[k].docs[r.Rev] = r.Docs
			}
		}
	}
	return nil
}

// writeBulkGet writes the answer of _bulk_get, one result per reference.
func writeBulkGet(w *respWriter, refs []bulkGetRef) {
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
	writeRawJSON(w, http.StatusOK, b.Bytes())
}
