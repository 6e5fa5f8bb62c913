package livesyncrpc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/rpcroom"
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

// infoAnswer is db.info's answer in PouchDB's key order.
type infoAnswer struct {
	DocCount  int64           `json:"doc_count"`
	UpdateSeq json.RawMessage `json:"update_seq"`
	DBName    string          `json:"db_name"`
}

func (p *Peer) handleInfo(ctx context.Context, _ string, _ []json.RawMessage) (any, error) {
	info, err := p.cfg.DB.Info(ctx)
	if err != nil {
		return nil, err
	}
	return infoAnswer{info.DocCount, seqJSON(info.UpdateSeq), p.cfg.DBName}, nil
}

// changeRow is a row of PouchDB's changes result, in its key order.
type changeRow struct {
	ID      string          `json:"id"`
	Changes []revRef        `json:"changes"`
	Deleted bool            `json:"deleted,omitempty"`
	Seq     json.RawMessage `json:"seq"`
}

type revRef struct {
	Rev string `json:"rev"`
}

type changesAnswer struct {
	Results []changeRow     `json:"results"`
	LastSeq json.RawMessage `json:"last_seq"`
}

// MaxChangesRows bounds the rows of one db.changes answer, whatever limit
// the caller asks for (or when it asks for none): a caller that follows
// last_seq, as ReplicatorShim and PouchDB's replication do, reads the
// rest in the next pages.
const MaxChangesRows = 1000

// changesLimit is PouchDB's treatment of the limit option (a limit of 0
// means 1), bounded by MaxChangesRows; absent, negative or not a number
// means no limit of the caller's own.
func changesLimit(raw json.RawMessage) int {
	var f float64
	if len(raw) == 0 || string(raw) == "null" || json.Unmarshal(raw, &f) != nil || f < 0 || f >= MaxChangesRows {
		return MaxChangesRows
	}
	if n := int(f); n > 0 {
		return n
	}
	return 1 // PouchDB (pouchdb-core changes): a limit of 0 means 1
}

func (p *Peer) handleChanges(ctx context.Context, _ string, args []json.RawMessage) (any, error) {
	var opts struct {
		Since    json.RawMessage `json:"since"`
		Limit    json.RawMessage `json:"limit"`
		Selector json.RawMessage `json:"selector"`
	}
	if err := arg(args, 0, &opts); err != nil {
		return nil, err
	}
	if string(opts.Since) == `"now"` || string(opts.Since) == `"latest"` {
		// PouchDB starts such a feed at the current update_seq.
		info, err := p.cfg.DB.Info(ctx)
		if err != nil {
			return nil, err
		}
		last := info.UpdateSeq
		if last == "" {
			last = "0"
		}
		return changesAnswer{Results: []changeRow{}, LastSeq: seqJSON(last)}, nil
	}
	since, err := seqString(opts.Since)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	page, err := p.cfg.DB.Changes(ctx, engine.ChangesRequest{Since: since, Limit: changesLimit(opts.Limit), Selector: opts.Selector})
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
	return changesAnswer{Results: rows, LastSeq: seqJSON(last)}, nil
}

// MaxRevsDiffRevs bounds the revisions one db.revsDiff may name, and
// MaxBulkDocs the documents one db.bulkDocs may write.
const (
	MaxRevsDiffRevs = 10000
	MaxBulkDocs     = MaxBulkGetDocs
)

func (p *Peer) handleRevsDiff(ctx context.Context, _ string, args []json.RawMessage) (any, error) {
	var req map[string][]string
	if err := arg(args, 0, &req); err != nil {
		return nil, err
	}
	total := 0
	for _, revs := range req {
		if total += max(1, len(revs)); total > MaxRevsDiffRevs {
			return nil, badRequest("revsDiff of more than %d revisions", MaxRevsDiffRevs)
		}
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

// MaxBulkGetDocs bounds the revisions one db.bulkGet may ask for;
// ReplicatorShim asks for the missing revisions of 33 changes at a time.
const MaxBulkGetDocs = 2000

// MaxBulkGetBytes bounds the documents of one db.bulkGet answer; a
// larger answer is refused (an rpcroom.Room with its default limits
// would not accept it either).
const MaxBulkGetBytes = rpcroom.DefaultMaxMessageBytes

// bulkGetDoc is one entry of a bulkGet result: {ok: doc}, {missing: rev}
// for a requested revision the database lacks, or {error} when the
// document could not be read at all.
type bulkGetDoc struct {
	OK      json.RawMessage `json:"ok,omitempty"`
	Missing string          `json:"missing,omitempty"`
	Error   *pouchErrorJSON `json:"error,omitempty"`
}

// pouchErrorJSON is a PouchDB error object as JSON.stringify writes it
// (without the stack trace PouchDB also leaks).
type pouchErrorJSON struct {
	Status  int    `json:"status"`
	Name    string `json:"name"`
	Message string `json:"message"`
	Error   bool   `json:"error"`
	Reason  string `json:"reason,omitempty"`
	DocID   string `json:"docId,omitempty"`
}

type bulkGetResult struct {
	ID   string       `json:"id"`
	Docs []bulkGetDoc `json:"docs"`
}

// validRev is PouchDB's check of an open_revs entry: digits, then "-".
func validRev(rev string) bool {
	i := 0
	for i < len(rev) && rev[i] >= '0' && rev[i] <= '9' {
		i++
	}
	return i > 0 && i < len(rev) && rev[i] == '-'
}

// handleBulkGet answers as PouchDB's bulkGet (pouchdb-core's shim over
// get with open_revs): the requests are grouped by id in order of first
// appearance; an id with revisions gets one entry per requested revision
// ({ok} once per distinct revision found, {missing: rev} otherwise, or
// one {error} "Invalid rev format"), an id without any its winning
// revision ({ok}, or {error} not_found); each entry is a result
// {id, docs: [entry]} of its own. _revisions are included only with
// revs:true.
func (p *Peer) handleBulkGet(ctx context.Context, _ string, args []json.RawMessage) (any, error) {
	var req struct {
		Docs []struct {
			ID  string `json:"id"`
			Rev string `json:"rev"`
		} `json:"docs"`
		Revs bool `json:"revs"`
	}
	if err := arg(args, 0, &req); err != nil {
		return nil, err
	}
	if len(req.Docs) > MaxBulkGetDocs {
		return nil, badRequest("bulkGet of %d revisions; at most %d at a time", len(req.Docs), MaxBulkGetDocs)
	}
	var order []string
	revsByID := map[string][]string{}
	var wanted []engine.DocRev
	for _, d := range req.Docs {
		if _, ok := revsByID[d.ID]; !ok {
			order = append(order, d.ID)
			revsByID[d.ID] = []string{}
		}
		if d.Rev != "" {
			revsByID[d.ID] = append(revsByID[d.ID], d.Rev)
			if validRev(d.Rev) {
				wanted = append(wanted, engine.DocRev{ID: d.ID, Rev: d.Rev})
			}
		}
	}
	found, err := p.fetchRevs(ctx, wanted)
	if err != nil {
		return nil, err
	}
	results := []bulkGetResult{}
	size := 0
	for _, id := range order {
		entries := p.openRevs(ctx, id, revsByID[id], found)
		for _, e := range entries {
			if !req.Revs && e.OK != nil {
				e.OK = store.WithoutRevisions(e.OK)
			}
			if size += len(e.OK); size > MaxBulkGetBytes {
				return nil, badRequest("bulkGet answer exceeds %d bytes; ask for fewer revisions", MaxBulkGetBytes)
			}
			results = append(results, bulkGetResult{ID: id, Docs: []bulkGetDoc{e}})
		}
	}
	return map[string]any{"results": results}, nil
}

// fetchRevs reads the named revisions, keyed by id and revision.
func (p *Peer) fetchRevs(ctx context.Context, wanted []engine.DocRev) (map[engine.DocRev]json.RawMessage, error) {
	found := map[engine.DocRev]json.RawMessage{}
	if len(wanted) == 0 {
		return found, nil
	}
	docs, err := p.cfg.DB.BulkGet(ctx, wanted)
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
	return found, nil
}

// openRevs is PouchDB's get(id, {open_revs: revs}) as bulkGet formats
// it, or the winning revision when revs is empty.
func (p *Peer) openRevs(ctx context.Context, id string, revs []string, found map[engine.DocRev]json.RawMessage) []bulkGetDoc {
	if len(revs) == 0 {
		if doc, ok := p.getWinner(ctx, id); ok {
			return []bulkGetDoc{{OK: doc}}
		}
		return []bulkGetDoc{{Error: &pouchErrorJSON{Status: 404, Name: "not_found", Message: "missing",
			Error: true, Reason: "missing", DocID: id}}}
	}
	for _, rev := range revs {
		if !validRev(rev) {
			return []bulkGetDoc{{Error: &pouchErrorJSON{Status: 400, Name: "bad_request", Message: "Invalid rev format", Error: true}}}
		}
	}
	var out []bulkGetDoc
	seen := map[string]bool{}
	for _, rev := range revs {
		doc, ok := found[engine.DocRev{ID: id, Rev: rev}]
		switch {
		case !ok:
			out = append(out, bulkGetDoc{Missing: rev})
		case !seen[rev]:
			seen[rev] = true
			out = append(out, bulkGetDoc{OK: doc})
		}
	}
	return out
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
	if len(docs) > MaxBulkDocs {
		return nil, badRequest("bulkDocs of %d documents; at most %d at a time", len(docs), MaxBulkDocs)
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
