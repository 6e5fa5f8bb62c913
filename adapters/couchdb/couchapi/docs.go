package couchapi

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// newDocID returns a server-generated document id (CouchDB's uuid form).
func newDocID() string { return hex.EncodeToString(randomBytes(16)) }

// docTooLarge is CouchDB's 413 for one oversized document.
func docTooLarge(id string) *apiError {
	return errorf(http.StatusRequestEntityTooLarge, "document_too_large", id)
}

// decodeDoc parses a document body: a JSON object whose fields stay raw.
func decodeDoc(b []byte) (map[string]json.RawMessage, *apiError) {
	m, ae := parseObject(b)
	if ae == errNotObject {
		return nil, errDocNotObject
	}
	return m, ae
}

func stringField(m map[string]json.RawMessage, key string) (string, bool, *apiError) {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, badRequest(key + " must be a string")
	}
	return s, true, nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// writeNew writes a new edit (new_edits=true) of a document given as a
// parsed body, after the checks CouchDB makes; it returns the new
// revision.
func (s *Server) writeNew(ctx context.Context, q *request, id string, m map[string]json.RawMessage) (string, error) {
	if isDesign(id) && (q.id.acc == nil || !q.id.acc.admin) {
		return "", errDesignAdmin
	}
	if strings.HasPrefix(id, "_local/") {
		rev, _, _ := stringField(m, "_rev")
		return s.writeLocal(ctx, q, strings.TrimPrefix(id, "_local/"), m, rev, true)
	}
	m["_id"] = mustJSON(id)
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	return q.st.Put(ctx, b)
}

// getDoc answers GET /{db}/{docid}: the winning revision, or ?rev= (an
// earlier revision too, while its body is kept), with ?revs, ?revs_info,
// ?conflicts (and ?meta, which is both), or open_revs.
func (s *Server) getDoc(q *request) *apiError {
	id := q.rest[0]
	if ae := checkDocID(id); ae != nil {
		return ae
	}
	qv := q.r.URL.Query()
	revs, ae := boolParam(qv, "revs")
	if ae != nil {
		return ae
	}
	if _, ok := qv["open_revs"]; ok {
		return s.openRevs(q, id, qv.Get("open_revs"), revs)
	}
	conflicts, ae := boolParam(qv, "conflicts")
	if ae != nil {
		return ae
	}
	revsInfo, ae := boolParam(qv, "revs_info")
	if ae != nil {
		return ae
	}
	if meta, _ := boolParam(qv, "meta"); meta {
		conflicts, revsInfo = true, true
	}
	rev := qv.Get("rev")
	if rev != "" && !validRev(rev) {
		return errInvalidRev
	}
	ctx := q.r.Context()
	doc, err := q.st.Get(ctx, id, store.GetOptions{Rev: rev, Revs: revs, RevsInfo: revsInfo, Conflicts: conflicts})
	if errors.Is(err, engine.ErrNotFound) {
		if rev == "" {
			if w, err := q.st.BulkGet(ctx, []engine.DocRev{{ID: id}}); err == nil && len(w) == 1 {
				return errDeleted
			}
		}
		return errMissing
	}
	if err != nil {
		return asAPIError(err)
	}
	if _, r, _, ok := docHead(doc); ok {
		q.w.Header().Set("ETag", `"`+r+`"`)
	}
	writeRawJSON(q.w, http.StatusOK, doc)
	return nil
}

// putDoc answers PUT /{db}/{docid} (also ?new_edits=false).
func (s *Server) putDoc(q *request) *apiError {
	id := q.rest[0]
	if ae := checkDocID(id); ae != nil {
		return ae
	}
	b, ae := readBody(q.r)
	if ae != nil {
		return ae
	}
	if int64(len(b)) > s.maxDoc {
		return docTooLarge(id)
	}
	m, ae := decodeDoc(b)
	if ae != nil {
		return ae
	}
	qv := q.r.URL.Query()
	bodyRev, _, ae := stringField(m, "_rev")
	if ae != nil {
		return ae
	}
	rev := headerRev(qv, q.r.Header.Get("If-Match"))
	if bodyRev != "" && rev != "" && bodyRev != rev {
		return badRequest("Document rev from request body and query string have different values")
	}
	if rev == "" {
		rev = bodyRev
	}
	if rev != "" && !validRev(rev) {
		return errInvalidRev
	}
	if rev != "" {
		m["_rev"] = mustJSON(rev)
	}
	ctx := q.r.Context()
	if qv.Get("new_edits") == "false" {
		if isDesign(id) && (q.id.acc == nil || !q.id.acc.admin) {
			return errDesignAdmin
		}
		if rev == "" {
			return badRequest("When `new_edits: false`, the document needs `_rev` or `_revisions` specified")
		}
		m["_id"] = mustJSON(id)
		doc, _ := json.Marshal(m)
		res, err := q.st.BulkDocs(ctx, []json.RawMessage{doc})
		if err != nil {
			return asAPIError(err)
		}
		if len(res) == 1 && res[0].Error != "" {
			return errorf(http.StatusBadRequest, res[0].Error, res[0].Reason)
		}
		writeJSON(q.w, http.StatusCreated, map[string]any{"ok": true, "id": id, "rev": rev})
		return nil
	}
	newRev, err := s.writeNew(ctx, q, id, m)
	if err != nil {
		return asAPIError(err)
	}
	q.w.Header().Set("ETag", `"`+newRev+`"`)
	writeJSON(q.w, http.StatusCreated, map[string]any{"ok": true, "id": id, "rev": newRev})
	return nil
}

// deleteDoc answers DELETE /{db}/{docid}?rev= with a tombstone.
func (s *Server) deleteDoc(q *request) *apiError {
	id := q.rest[0]
	if ae := checkDocID(id); ae != nil {
		return ae
	}
	rev := headerRev(q.r.URL.Query(), q.r.Header.Get("If-Match"))
	if rev == "" {
		return errConflict
	}
	if !validRev(rev) {
		return errInvalidRev
	}
	m := map[string]json.RawMessage{"_rev": mustJSON(rev), "_deleted": json.RawMessage("true")}
	newRev, err := s.writeNew(q.r.Context(), q, id, m)
	if err != nil {
		return asAPIError(err)
	}
	q.w.Header().Set("ETag", `"`+newRev+`"`)
	writeJSON(q.w, http.StatusOK, map[string]any{"ok": true, "id": id, "rev": newRev})
	return nil
}

// postDoc answers POST /{db}: a new document, its id generated if absent.
func (s *Server) postDoc(q *request) *apiError {
	b, ae := readBody(q.r)
	if ae != nil {
		return ae
	}
	m, ae := decodeDoc(b)
	if ae != nil {
		return ae
	}
	id, ok, ae := stringField(m, "_id")
	if ae != nil {
		return ae
	}
	if !ok {
		id = newDocID()
	}
	if int64(len(b)) > s.maxDoc {
		return docTooLarge(id)
	}
	if ae := checkDocID(id); ae != nil {
		return ae
	}
	if rev, ok, _ := stringField(m, "_rev"); ok && !validRev(rev) {
		return errInvalidRev
	}
	rev, err := s.writeNew(q.r.Context(), q, id, m)
	if err != nil {
		return asAPIError(err)
	}
	writeJSON(q.w, http.StatusCreated, map[string]any{"ok": true, "id": id, "rev": rev})
	return nil
}

// Limits of one open_revs or _bulk_get request. Every revision a request
// names is read from one load of its document's revision tree
// (store.Store.GetRevs), so an answer costs time linear in the document's
// tree and in the revisions named, however many conflicting leaves a
// (possibly hostile) writer planted; these caps bound the answer itself.
const (
	// MaxOpenRevs caps the revisions one request names: the open_revs
	// list of a document GET, and the entries of a _bulk_get body. A
	// larger request is refused with 400 bad_request. CouchDB has no
	// such limit; replicators ask for a batch at a time (PouchDB and
	// LiveSync: 100 or fewer per _bulk_get, one revision per open_revs).
	MaxOpenRevs = 10000
	// MaxAnswerRevs caps the documents one open_revs or _bulk_get answer
	// carries (open_revs=all: the document's leaves; latest=true: the
	// leaves each revision leads to). A larger answer is refused with
	// 400 bad_request before it is built.
	MaxAnswerRevs = 100000
)

var (
	errTooManyRevs = badRequest("the request names more than " + strconv.Itoa(MaxOpenRevs) +
		" revisions; ask for them in several requests")
	errAnswerTooLarge = badRequest("the answer would carry more than " + strconv.Itoa(MaxAnswerRevs) +
		" revisions; ask for fewer revisions (or without latest=true) per request")
)

// openRevResult is one entry of an open_revs answer: a document or a
// missing revision.
type openRevResult struct {
	doc     []byte
	missing string
}

// openRevs answers GET /{db}/{docid}?open_revs=all|[…] in JSON, or in
// multipart/mixed when the client accepts it (kivik reads only that).
// open_revs=all answers every leaf, deleted ones included, winner first,
// as CouchDB does.
func (s *Server) openRevs(q *request, id, spec string, withRevs bool) *apiError {
	qv := q.r.URL.Query()
	latest, ae := boolParam(qv, "latest")
	if ae != nil {
		return ae
	}
	ctx := q.r.Context()
	var results []openRevResult
	if spec == "all" {
		res, err := q.st.GetRevs(ctx, id, store.RevsOptions{All: true, History: withRevs})
		if err != nil {
			return asAPIError(err)
		}
		if len(res) == 0 {
			return errMissing
		}
		if len(res) > MaxAnswerRevs {
			return errAnswerTooLarge
		}
		results = make([]openRevResult, 0, len(res))
		for _, r := range res {
			for _, d := range r.Docs {
				results = append(results, openRevResult{doc: d})
			}
		}
	} else {
		var revs []string
		if !json.Valid([]byte(spec)) {
			return errorf(http.StatusBadRequest, "bad_request", "open_revs must be \"all\" or a JSON array of revisions")
		}
		if err := json.Unmarshal([]byte(spec), &revs); err != nil {
			return errorf(http.StatusBadRequest, "bad_request", "open_revs must be \"all\" or a JSON array of revisions")
		}
		if len(revs) > MaxOpenRevs {
			return errTooManyRevs
		}
		for _, rev := range revs {
			if !validRev(rev) {
				return errInvalidRev
			}
		}
		// latest=true asks for the leaves that descend from each rev, even
		// when rev itself is still readable (an earlier revision whose body
		// is kept); a leaf is its own latest.
		res, err := q.st.GetRevs(ctx, id, store.RevsOptions{Revs: revs, Latest: latest, History: withRevs})
		if err != nil {
			return asAPIError(err)
		}
		seen := make(map[string]bool, len(res))
		for _, r := range res {
			if len(r.Docs) == 0 {
				results = append(results, openRevResult{missing: r.Rev})
				continue
			}
			for _, d := range r.Docs {
				rev := r.Rev
				if latest {
					_, rev, _, _ = docHead(d)
				}
				if !seen[rev] {
					seen[rev] = true
					results = append(results, openRevResult{doc: d})
				}
			}
			if len(results) > MaxAnswerRevs {
				return errAnswerTooLarge
			}
		}
	}
	if acceptsMultipartMixed(q.r.Header.Values("Accept")) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for _, res := range results {
			h := textproto.MIMEHeader{}
			body := res.doc
			if res.doc == nil {
				h.Set("Content-Type", `application/json; error="true"`)
				body = mustJSON(map[string]string{"missing": res.missing})
			} else {
				h.Set("Content-Type", "application/json")
			}
			pw, _ := mw.CreatePart(h)
			_, _ = pw.Write(body)
		}
		_ = mw.Close()
		q.w.Header().Set("Content-Type", `multipart/mixed; boundary="`+mw.Boundary()+`"`)
		q.w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
		q.w.WriteHeader(http.StatusOK)
		_, _ = q.w.Write(buf.Bytes())
		return nil
	}
	b := []byte{'['}
	for i, res := range results {
		if i > 0 {
			b = append(b, ',')
		}
		if res.doc == nil {
			b = append(b, `{"missing":`...)
			b = appendString(b, res.missing)
		} else {
			b = append(b, `{"ok":`...)
			b = append(b, res.doc...)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	writeRawJSON(q.w, http.StatusOK, b)
	return nil
}

// acceptsMultipartMixed reports whether an Accept header lists
// multipart/mixed (CouchDB's test for open_revs).
func acceptsMultipartMixed(accept []string) bool {
	for _, a := range accept {
		for _, part := range strings.Split(a, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(mt), "multipart/mixed") {
				return true
			}
		}
	}
	return false
}

// _local documents. The store keeps them last-write-wins; this layer adds
// CouchDB's "0-N" revisions (a write must name the current one) and
// deletion as a tombstone marker the Store port has no call for.

// localDoc is a stored _local document as served: with _id and _rev.
func localDoc(id string, raw []byte) (doc []byte, n int64, deleted bool) {
	return store.ServedLocal("_local/"+id, raw)
}

// currentLocal returns the revision number of a _local document, ok false
// if it does not exist.
func currentLocal(ctx context.Context, st store.Store, id string) (int64, bool, error) {
	raw, err := st.GetLocal(ctx, id)
	if errors.Is(err, engine.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	_, n, deleted := localDoc(id, raw)
	return n, !deleted, nil
}

// writeLocal writes _local/<id>. With check, rev must name the current
// revision (or be empty when the document does not exist), else
// ErrConflict.
func (s *Server) writeLocal(ctx context.Context, q *request, id string, m map[string]json.RawMessage, rev string, check bool) (string, error) {
	if id == "" {
		return "", errorf(http.StatusBadRequest, "illegal_docid", "Document id must not be empty")
	}
	if len(id) > store.MaxIDLength {
		return "", badRequest("_local id is " + strconv.Itoa(len(id)) + " bytes, over the limit of " + strconv.Itoa(store.MaxIDLength) + ": use a shorter id")
	}
	mu := s.localLock(q.db, id)
	mu.Lock()
	defer mu.Unlock()
	n, exists, err := currentLocal(ctx, q.st, id)
	if err != nil {
		return "", err
	}
	if check && exists && rev != "0-"+strconv.FormatInt(n, 10) {
		return "", store.ErrConflict
	}
	if !exists {
		n = 0
	}
	var del bool
	_ = json.Unmarshal(m["_deleted"], &del)
	newRev := "0-" + strconv.FormatInt(n+1, 10)
	if del {
		m = map[string]json.RawMessage{"_deleted": json.RawMessage("true")}
		newRev = "0-0"
	}
	delete(m, "_revisions")
	m["_id"] = mustJSON("_local/" + id)
	m["_rev"] = mustJSON(newRev)
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	if err := q.st.PutLocal(ctx, id, b); err != nil {
		return "", err
	}
	return newRev, nil
}

func (s *Server) getLocal(q *request) *apiError {
	id := q.rest[0]
	raw, err := q.st.GetLocal(q.r.Context(), id)
	if err != nil {
		return asAPIError(err)
	}
	doc, _, deleted := localDoc(id, raw)
	if deleted {
		return errMissing
	}
	writeRawJSON(q.w, http.StatusOK, doc)
	return nil
}

func (s *Server) putLocal(q *request) *apiError {
	id := q.rest[0]
	b, ae := readBody(q.r)
	if ae != nil {
		return ae
	}
	if int64(len(b)) > s.maxDoc {
		return docTooLarge("_local/" + id)
	}
	m, ae := decodeDoc(b)
	if ae != nil {
		return ae
	}
	rev, _, ae := stringField(m, "_rev")
	if ae != nil {
		return ae
	}
	if rev == "" {
		rev = headerRev(q.r.URL.Query(), q.r.Header.Get("If-Match"))
	}
	newRev, err := s.writeLocal(q.r.Context(), q, id, m, rev, q.r.URL.Query().Get("new_edits") != "false")
	if err != nil {
		return asAPIError(err)
	}
	writeJSON(q.w, http.StatusCreated, map[string]any{"ok": true, "id": "_local/" + id, "rev": newRev})
	return nil
}

func (s *Server) deleteLocal(q *request) *apiError {
	id := q.rest[0]
	ctx := q.r.Context()
	rev := headerRev(q.r.URL.Query(), q.r.Header.Get("If-Match"))
	mu := s.localLock(q.db, id)
	mu.Lock()
	n, exists, err := currentLocal(ctx, q.st, id)
	mu.Unlock()
	if err != nil {
		return asAPIError(err)
	}
	if !exists {
		return errMissing
	}
	if rev != "0-"+strconv.FormatInt(n, 10) {
		return errConflict
	}
	newRev, err := s.writeLocal(ctx, q, id, map[string]json.RawMessage{"_deleted": json.RawMessage("true")}, rev, true)
	if err != nil {
		return asAPIError(err)
	}
	writeJSON(q.w, http.StatusOK, map[string]any{"ok": true, "id": "_local/" + id, "rev": newRev})
	return nil
}
