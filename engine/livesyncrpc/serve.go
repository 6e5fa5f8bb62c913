package livesyncrpc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// The optional methods of a served database beyond engine.Endpoint.
type (
	docGetter interface {
		Get(ctx context.Context, id string, opts store.GetOptions) (json.RawMessage, error)
	}
	docPutter interface {
		Put(ctx context.Context, doc json.RawMessage) (string, error)
	}
	batchPutter interface {
		PutBatch(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error)
	}
)

// arg decodes args[i] into v; an absent argument leaves v as it is.
func arg(args []json.RawMessage, i int, v any) error {
	if i >= len(args) || string(args[i]) == "null" {
		return nil
	}
	if err := json.Unmarshal(args[i], v); err != nil {
		return badRequest("argument %d: %v", i+1, err)
	}
	return nil
}

// dbErr turns a store error into PouchDB's shape.
func dbErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrNotFound):
		return errMissing()
	case errors.Is(err, store.ErrConflict):
		return errConflict()
	}
	return err
}

func (p *Peer) handleInfo(ctx context.Context, _ string, _ []json.RawMessage) (any, error) {
	info, err := p.cfg.DB.Info(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"db_name": p.cfg.DBName, "doc_count": info.DocCount, "update_seq": seqJSON(info.UpdateSeq),
	}, nil
}

type changeRow struct {
	ID      string          `json:"id"`
	Seq     json.RawMessage `json:"seq"`
	Changes []revRef        `json:"changes"`
	Deleted bool            `json:"deleted,omitempty"`
}

type revRef struct {
	Rev string `json:"rev"`
}

func (p *Peer) handleChanges(ctx context.Context, _ string, args []json.RawMessage) (any, error) {
	var opts struct {
		Since    json.RawMessage `json:"since"`
		Limit    int             `json:"limit"`
		Selector json.RawMessage `json:"selector"`
	}
	if err := arg(args, 0, &opts); err != nil {
		return nil, err
	}
	since, err := seqString(opts.Since)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	if opts.Limit < 0 {
		opts.Limit = 0
	}
	page, err := p.cfg.DB.Changes(ctx, engine.ChangesRequest{Since: since, Limit: opts.Limit, Selector: opts.Selector})
	if err != nil {
		return nil, err
	}
	rows := make([]changeRow, 0, len(page.Results))
	for _, c := range page.Results {
		row := changeRow{ID: c.ID, Seq: seqJSON(c.Seq), Deleted: c.Deleted, Changes: make([]revRef, len(c.Revs))}
		for i, r := range c.Revs {
			row.Changes[i] = revRef{r}
		}
		rows = append(rows, row)
	}
	last := page.LastSeq
	if last == "" {
		last = since
	}
	if last == "" {
		last = "0"
	}
	return map[string]any{"results": rows, "last_seq": seqJSON(last)}, nil
}

func (p *Peer) handleRevsDiff(ctx context.Context, _ string, args []json.RawMessage) (any, error) {
	var req map[string][]string
	if err := arg(args, 0, &req); err != nil {
		return nil, err
	}
	missing, err := p.cfg.DB.RevsDiff(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string][]string, len(missing))
	for id, revs := range missing {
		if len(revs) > 0 {
			out[id] = map[string][]string{"missing": revs}
		}
	}
	return out, nil
}

type bulkGetDoc struct {
	OK    json.RawMessage `json:"ok,omitempty"`
	Error *bulkGetError   `json:"error,omitempty"`
}

type bulkGetError struct {
	ID     string `json:"id"`
	Rev    string `json:"rev,omitempty"`
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

type bulkGetResult struct {
	ID   string       `json:"id"`
	Docs []bulkGetDoc `json:"docs"`
}

// handleBulkGet answers PouchDB's bulkGet: one result per requested id
// (in the order of first request), each with one entry per requested
// revision, {ok: doc with _revisions} or {error: not_found}.
func (p *Peer) handleBulkGet(ctx context.Context, _ string, args []json.RawMessage) (any, error) {
	var req struct {
		Docs []struct {
			ID  string `json:"id"`
			Rev string `json:"rev"`
		} `json:"docs"`
	}
	if err := arg(args, 0, &req); err != nil {
		return nil, err
	}
	var revs []engine.DocRev
	for _, d := range req.Docs {
		if d.Rev != "" {
			revs = append(revs, engine.DocRev{ID: d.ID, Rev: d.Rev})
		}
	}
	found := map[engine.DocRev]json.RawMessage{}
	if len(revs) > 0 {
		docs, err := p.cfg.DB.BulkGet(ctx, revs)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			var h struct {
				ID  string `json:"_id"`
				Rev string `json:"_rev"`
			}
			if json.Unmarshal(d, &h) == nil {
				found[engine.DocRev{ID: h.ID, Rev: h.Rev}] = d
			}
		}
	}
	var results []*bulkGetResult
	byID := map[string]*bulkGetResult{}
	for _, d := range req.Docs {
		r := byID[d.ID]
		if r == nil {
			r = &bulkGetResult{ID: d.ID, Docs: []bulkGetDoc{}}
			byID[d.ID] = r
			results = append(results, r)
		}
		doc, ok := found[engine.DocRev{ID: d.ID, Rev: d.Rev}]
		if d.Rev == "" {
			doc, ok = p.getWinner(ctx, d.ID)
		}
		if ok {
			r.Docs = append(r.Docs, bulkGetDoc{OK: doc})
		} else {
			r.Docs = append(r.Docs, bulkGetDoc{Error: &bulkGetError{ID: d.ID, Rev: d.Rev, Error: "not_found", Reason: "missing"}})
		}
	}
	return map[string]any{"results": results}, nil
}

func (p *Peer) getWinner(ctx context.Context, id string) (json.RawMessage, bool) {
	g, ok := p.cfg.DB.(docGetter)
	if !ok {
		return nil, false
	}
	doc, err := g.Get(ctx, id, store.GetOptions{Revs: true})
	return doc, err == nil
}

func (p *Peer) handleGet(ctx context.Context, _ string, args []json.RawMessage) (any, error) {
	var id string
	var opts struct {
		Rev       string `json:"rev"`
		Revs      bool   `json:"revs"`
		Conflicts bool   `json:"conflicts"`
		RevsInfo  bool   `json:"revs_info"`
	}
	if err := arg(args, 0, &id); err != nil {
		return nil, err
	}
	if err := arg(args, 1, &opts); err != nil {
		return nil, err
	}
	if key, ok := strings.CutPrefix(id, LocalPrefix); ok {
		return p.local.get(ctx, key)
	}
	g, ok := p.cfg.DB.(docGetter)
	if !ok {
		return nil, errMissing()
	}
	doc, err := g.Get(ctx, id, store.GetOptions{Rev: opts.Rev, Revs: opts.Revs, Conflicts: opts.Conflicts, RevsInfo: opts.RevsInfo})
	return doc, dbErr(err)
}

type putResponse struct {
	OK  bool   `json:"ok"`
	ID  string `json:"id"`
	Rev string `json:"rev"`
}

func (p *Peer) handlePut(ctx context.Context, _ string, args []json.RawMessage) (any, error) {
	var doc map[string]json.RawMessage
	if err := arg(args, 0, &doc); err != nil {
		return nil, err
	}
	var id string
	if doc == nil || json.Unmarshal(doc["_id"], &id) != nil || id == "" {
		return nil, pouchError(412, "missing_id", "_id is required for puts")
	}
	if strings.HasPrefix(id, LocalPrefix) {
		rev, err := p.local.put(ctx, doc)
		if err != nil {
			return nil, err
		}
		return putResponse{true, id, rev}, nil
	}
	pt, ok := p.cfg.DB.(docPutter)
	if !ok {
		return nil, pouchError(403, "forbidden", "this peer does not accept edits")
	}
	body, _ := json.Marshal(doc)
	rev, err := pt.Put(ctx, body)
	if err != nil {
		return nil, dbErr(err)
	}
	return putResponse{true, id, rev}, nil
}

// bulkDocsError is a PouchDB error as JSON.stringify writes it in a
// bulkDocs result.
type bulkDocsError struct {
	Status  int    `json:"status"`
	Name    string `json:"name"`
	Message string `json:"message"`
	Error   bool   `json:"error"`
	ID      string `json:"id"`
}

func (p *Peer) handleBulkDocs(ctx context.Context, _ string, args []json.RawMessage) (any, error) {
	var docs []json.RawMessage
	newEdits := true
	if len(args) > 0 && strings.HasPrefix(strings.TrimSpace(string(args[0])), "{") {
		var req struct {
			Docs     []json.RawMessage `json:"docs"`
			NewEdits *bool             `json:"new_edits"`
		}
		if err := arg(args, 0, &req); err != nil {
			return nil, err
		}
		docs = req.Docs
		if req.NewEdits != nil {
			newEdits = *req.NewEdits
		}
	} else if err := arg(args, 0, &docs); err != nil {
		return nil, err
	}
	var opts struct {
		NewEdits *bool `json:"new_edits"`
	}
	if err := arg(args, 1, &opts); err != nil {
		return nil, err
	}
	if opts.NewEdits != nil {
		newEdits = *opts.NewEdits
	}
	var res []engine.BulkDocResult
	var err error
	if newEdits {
		bp, ok := p.cfg.DB.(batchPutter)
		if !ok {
			return nil, pouchError(403, "forbidden", "this peer does not accept edits")
		}
		res, err = bp.PutBatch(ctx, docs)
	} else {
		res, err = p.cfg.DB.BulkDocs(ctx, docs)
	}
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(res))
	for _, r := range res {
		switch {
		case r.Error != "":
			status := 500
			switch r.Error {
			case "conflict":
				status = 409
			case "forbidden":
				status = 403
			case "bad_request":
				status = 400
			case "unauthorized":
				status = 401
			}
			msg := r.Reason
			if r.Error == "conflict" {
				msg = "Document update conflict"
			}
			out = append(out, bulkDocsError{status, r.Error, msg, true, r.ID})
		case newEdits:
			out = append(out, putResponse{true, r.ID, r.Rev})
		}
	}
	// With new_edits=false PouchDB answers only the errors, as CouchDB does.
	return out, nil
}
