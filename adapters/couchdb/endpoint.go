package couchdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	kivik "github.com/go-kivik/kivik/v4"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/rawjson"
)

// Info reads the database's name, update sequence and document count.
func (d *DB) Info(ctx context.Context) (engine.EndpointInfo, error) {
	var info struct {
		Name      string          `json:"db_name"`
		UpdateSeq json.RawMessage `json:"update_seq"`
		DocCount  int64           `json:"doc_count"`
	}
	if err := d.do(ctx, "database info", "", http.MethodGet, d.dbURL("", nil), nil, &info); err != nil {
		return engine.EndpointInfo{}, err
	}
	return engine.EndpointInfo{Name: info.Name, UpdateSeq: seqString(info.UpdateSeq), DocCount: info.DocCount}, nil
}

// seqString turns a sequence as the server sent it (a JSON string on
// CouchDB 2+, a number on CouchDB 1 and PouchDB) into the opaque string
// handed back as since; null or absent gives "".
func seqString(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if s, ok := rawjson.String(raw); ok {
		return s
	}
	return string(raw)
}

// Changes reads one page of the changes feed with POST
// _changes?style=all_docs, the selector (if any) in the body with
// filter=_selector, as pouchdb-adapter-http sends it.
// With Wait it uses feed=longpoll and repeats until a change arrives, the
// feed's last sequence moves, or ctx ends.
func (d *DB) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	q := url.Values{"style": {"all_docs"}}
	if req.Since != "" {
		q.Set("since", req.Since)
	}
	if req.Limit > 0 {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	body := map[string]any{}
	if len(req.Selector) > 0 {
		q.Set("filter", "_selector")
		body["selector"] = req.Selector
	}
	if req.Wait {
		q.Set("feed", "longpoll")
		q.Set("timeout", strconv.FormatInt(d.cfg.LongpollTimeout.Milliseconds(), 10))
	}
	for {
		var a rawAnswer
		if err := d.do(ctx, "changes", "", http.MethodPost, d.dbURL("/_changes", q), body, &a); err != nil {
			return engine.ChangesPage{}, err
		}
		page, err := parseChanges(a.B)
		if err != nil {
			return engine.ChangesPage{}, err
		}
		if !req.Wait || len(page.Results) > 0 || (page.LastSeq != "" && page.LastSeq != req.Since) {
			if page.LastSeq == "" {
				page.LastSeq = req.Since
			}
			return page, nil
		}
		if err := ctx.Err(); err != nil {
			return engine.ChangesPage{}, err
		}
	}
}

// RevsDiff asks which of the given revisions the database lacks.
func (d *DB) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(revs) == 0 {
		return out, nil
	}
	var a map[string]struct {
		Missing []string `json:"missing"`
	}
	if err := d.do(ctx, "revs diff", "", http.MethodPost, d.dbURL("/_revs_diff", nil), revs, &a); err != nil {
		return nil, err
	}
	for id, v := range a {
		if len(v.Missing) > 0 {
			out[id] = v.Missing
		}
	}
	return out, nil
}

// BulkGet reads the named revisions with their _revisions history
// (POST _bulk_get?revs=true&latest=true), in request order, leaving out
// revisions the database lacks. When the server has no _bulk_get (404,
// 405 or 501, or Config.NoBulkGet), it falls back to one GET
// ?open_revs=[…]&revs=true&latest=true per document, as PouchDB does.
func (d *DB) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	return d.bulkGet(ctx, revs, true)
}

// bulkGet is BulkGet, asking with latest=true or not.
func (d *DB) bulkGet(ctx context.Context, revs []engine.DocRev, latest bool) ([]json.RawMessage, error) {
	if len(revs) == 0 {
		return nil, nil
	}
	select {
	case <-d.bulkGetMissing:
		return d.openRevs(ctx, revs, latest)
	default:
	}
	type ref struct {
		ID  string `json:"id"`
		Rev string `json:"rev"`
	}
	refs := make([]ref, len(revs))
	for i, r := range revs {
		refs[i] = ref{r.ID, r.Rev}
	}
	var a rawAnswer
	q := url.Values{"revs": {"true"}}
	if latest {
		q.Set("latest", "true")
	}
	err := d.do(ctx, "bulk get", "", http.MethodPost, d.dbURL("/_bulk_get", q), map[string]any{"docs": refs}, &a)
	if err != nil {
		if httpStatus(err) == http.StatusNotFound {
			// A missing database is not a missing endpoint.
			if ok, xerr := d.Exists(ctx); xerr == nil && ok {
				d.markNoBulkGet()
				return d.openRevs(ctx, revs, latest)
			}
			return nil, err
		}
		if isMissingEndpoint(err) {
			d.markNoBulkGet()
			return d.openRevs(ctx, revs, latest)
		}
		return nil, err
	}
	found, err := parseBulkGet(a.B)
	if err != nil {
		return nil, err
	}
	byRev := make(map[engine.DocRev]json.RawMessage, len(found))
	for _, f := range found {
		// A slice of the answer, which nothing else holds: no copy.
		byRev[engine.DocRev{ID: f.id, Rev: f.rev}] = f.doc
	}
	return inOrder(revs, byRev), nil
}

// inOrder lists the found documents in request order, each once.
func inOrder(revs []engine.DocRev, byRev map[engine.DocRev]json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(revs))
	for _, r := range revs {
		if doc, ok := byRev[r]; ok {
			out = append(out, doc)
			delete(byRev, r)
		}
	}
	return out
}

func (d *DB) markNoBulkGet() {
	defer func() { _ = recover() }() // already closed by a concurrent call
	close(d.bulkGetMissing)
}

// isMissingEndpoint reports whether err says the server has no such
// endpoint (404 for the path, 405, 501).
func isMissingEndpoint(err error) bool {
	var se *statusError
	if !errors.As(err, &se) {
		return false
	}
	switch se.status {
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return true
	}
	return false
}

// openRevs is the fallback of BulkGet: kivik's OpenRevs (multipart/mixed)
// per document, asking with latest=true as PouchDB does.
func (d *DB) openRevs(ctx context.Context, revs []engine.DocRev, latest bool) ([]json.RawMessage, error) {
	var order []string
	want := map[string][]string{}
	for _, r := range revs {
		if _, ok := want[r.ID]; !ok {
			order = append(order, r.ID)
		}
		want[r.ID] = append(want[r.ID], r.Rev)
	}
	byRev := map[engine.DocRev]json.RawMessage{}
	for _, id := range order {
		rs := d.db.OpenRevs(ctx, id, want[id], kivik.Param("revs", true), kivik.Param("latest", latest))
		for rs.Next() {
			if rs.Err() != nil {
				continue
			}
			var doc json.RawMessage
			if err := rs.ScanDoc(&doc); err != nil {
				if kivik.HTTPStatus(err) == http.StatusNotFound {
					continue // a missing revision
				}
				rs.Close()
				return nil, d.kivikErr(ctx, "open revs", id, err)
			}
			rev, _ := rs.Rev()
			if rev == "" {
				var head struct {
					Rev string `json:"_rev"`
				}
				_ = json.Unmarshal(doc, &head)
				rev = head.Rev
			}
			byRev[engine.DocRev{ID: id, Rev: rev}] = doc
		}
		err := rs.Err()
		rs.Close()
		if err != nil && kivik.HTTPStatus(err) != http.StatusNotFound {
			return nil, d.kivikErr(ctx, "open revs", id, err)
		}
	}
	return inOrder(revs, byRev), nil
}

// BulkDocs writes documents with new_edits=false (POST _bulk_docs). A
// request the server refuses as too large wraps engine.ErrTooLarge.
func (d *DB) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	var rows []struct {
		ID     string `json:"id"`
		Rev    string `json:"rev"`
		Error  string `json:"error"`
		Reason string `json:"reason"`
	}
	body, err := bulkDocsBody(docs)
	if err != nil {
		return nil, err
	}
	if err := d.do(ctx, "bulk docs", "", http.MethodPost, d.dbURL("/_bulk_docs", nil), body, &rows); err != nil {
		return nil, err
	}
	out := make([]engine.BulkDocResult, len(rows))
	for i, r := range rows {
		out[i] = engine.BulkDocResult{ID: r.ID, Rev: r.Rev, Error: r.Error, Reason: r.Reason}
	}
	return out, nil
}

const localPrefix = "_local/"

func localURL(d *DB, id string) string {
	return d.dbURL("/"+localPrefix+url.PathEscape(id), nil)
}

// GetLocal reads _local/<id>; engine.ErrNotFound if absent.
func (d *DB) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	var doc json.RawMessage
	if err := d.do(ctx, "get local", localPrefix+id, http.MethodGet, localURL(d, id), nil, &doc); err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			d.setLocalRev(id, "")
		}
		return nil, err
	}
	var head struct {
		Rev string `json:"_rev"`
	}
	_ = json.Unmarshal(doc, &head)
	d.setLocalRev(id, head.Rev)
	return doc, nil
}

// localRev returns the last _rev of _local/<id> this DB read or wrote
// ("" if none is known).
func (d *DB) localRev(id string) string {
	d.localMu.Lock()
	defer d.localMu.Unlock()
	return d.localRevs[id]
}

func (d *DB) setLocalRev(id, rev string) {
	d.localMu.Lock()
	defer d.localMu.Unlock()
	if rev == "" {
		delete(d.localRevs, id)
		return
	}
	if d.localRevs == nil {
		d.localRevs = make(map[string]string)
	}
	d.localRevs[id] = rev
}

// PutLocal writes _local/<id>, last write wins. It first writes with the
// _rev this DB last read or wrote for id (one request, the common case of
// a checkpoint rewritten by its only writer); with none known, or on a
// conflict (someone else wrote it), it takes the stored _rev (CouchDB
// refuses a stale one) and retries a few times on a conflict.
func (d *DB) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(doc, &fields); err != nil || fields == nil {
		return &engine.Error{Op: "put local", DocID: localPrefix + id, Stage: engine.StageEncode,
			Err: fmt.Errorf("couchdb: a _local document must be a JSON object: %w", engine.ErrMalformed)}
	}
	var err error
	if rev := d.localRev(id); rev != "" {
		fields["_rev"], _ = json.Marshal(rev)
		if _, err = d.putLocalRev(ctx, id, fields); err == nil || !(isConflict(err) || errors.Is(err, engine.ErrNotFound)) {
			return err
		}
	}
	for attempt := 0; attempt < 5; attempt++ {
		delete(fields, "_rev")
		cur, gerr := d.GetLocal(ctx, id)
		switch {
		case gerr == nil:
			var head struct {
				Rev string `json:"_rev"`
			}
			_ = json.Unmarshal(cur, &head)
			if head.Rev != "" {
				fields["_rev"], _ = json.Marshal(head.Rev)
			}
		case !errors.Is(gerr, engine.ErrNotFound):
			return gerr
		}
		if _, err = d.putLocalRev(ctx, id, fields); err == nil || !isConflict(err) {
			return err
		}
	}
	return err
}

// putLocalRev writes _local/<id> as given; a stale or missing _rev is a
// conflict error (see isConflict). It returns the new _rev.
func (d *DB) putLocalRev(ctx context.Context, id string, fields map[string]json.RawMessage) (string, error) {
	fields["_id"], _ = json.Marshal(localPrefix + id)
	var res struct {
		Rev string `json:"rev"`
	}
	if err := d.do(ctx, "put local", localPrefix+id, http.MethodPut, localURL(d, id), fields, &res); err != nil {
		d.setLocalRev(id, "") // unknown now: read it before the next write
		return "", err
	}
	d.setLocalRev(id, res.Rev)
	return res.Rev, nil
}

func isConflict(err error) bool {
	return httpStatus(err) == http.StatusConflict
}
