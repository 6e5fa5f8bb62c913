package couchdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// docPath is the escaped path of a document below the database.
func docPath(id string) string {
	esc := func(s string) string { return strings.ReplaceAll(url.PathEscape(s), "+", "%2B") }
	if rest, ok := strings.CutPrefix(id, "_design/"); ok {
		return "/_design/" + esc(rest)
	}
	return "/" + esc(id)
}

// readableID reports whether id can name a document of the Store (not a
// _local or other reserved id, within the size limit).
func readableID(id string) bool {
	if id == "" || len(id) > store.MaxIDLength {
		return false
	}
	return !strings.HasPrefix(id, "_") || strings.HasPrefix(id, "_design/")
}

func notFound(op, id string) error {
	return fmt.Errorf("couchdb store: %s %q: %w", op, id, engine.ErrNotFound)
}

// Get reads one document with GET /db/id and the options as CouchDB's
// query parameters.
func (s *Store) Get(ctx context.Context, id string, opts store.GetOptions) (json.RawMessage, error) {
	var doc json.RawMessage
	err := s.call(ctx, "get", func(c context.Context) error {
		if !readableID(id) {
			return notFound("get", id)
		}
		if len(docPath(id)) > maxPathInURL {
			var err error
			doc, err = s.getByBody(c, id, opts)
			return err
		}
		q := url.Values{}
		if opts.Rev != "" {
			q.Set("rev", opts.Rev)
		}
		if opts.Revs {
			q.Set("revs", "true")
		}
		if opts.RevsInfo {
			q.Set("revs_info", "true")
		}
		if opts.Conflicts && opts.Rev == "" {
			q.Set("conflicts", "true")
		}
		return s.db.do(c, "get", id, http.MethodGet, s.db.dbURL(docPath(id), q), nil, &doc)
	})
	if err != nil {
		return nil, err
	}
	if len(doc) == 0 || doc[0] != '{' {
		return nil, &engine.Error{Op: "get", DocID: id, Stage: engine.StageProtocol,
			Err: fmt.Errorf("couchdb: the document is not a JSON object: %w", engine.ErrMalformed)}
	}
	return doc, nil
}

// maxPathInURL is the longest escaped document path Get puts in a URL;
// a longer id is read through request bodies (servers and proxies refuse
// request lines of more than 8 or 16 KiB).
const maxPathInURL = 4096

// getByBody is Get for an id too long for a URL: the winner through
// _all_docs?keys, a named revision and _revisions through _bulk_get.
// RevsInfo is not available that way.
func (s *Store) getByBody(c context.Context, id string, opts store.GetOptions) (json.RawMessage, error) {
	if opts.RevsInfo {
		return nil, fmt.Errorf("couchdb: _revs_info of an id of %d bytes: %w", len(id), engine.ErrUnsupported)
	}
	rev := opts.Rev
	if rev == "" {
		states, err := s.lookup(c, "get", []string{id}, false)
		if err != nil {
			return nil, err
		}
		st, ok := states[id]
		if !ok || st.deleted {
			return nil, notFound("get", id)
		}
		rev = st.rev
	}
	docs, err := s.db.bulkGet(c, []engine.DocRev{{ID: id, Rev: rev}}, false)
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, notFound("get", id)
	}
	if opts.Revs {
		return docs[0], nil
	}
	return store.WithoutRevisions(docs[0]), nil
}

// leafDoc is one leaf of open_revs=all with what ordering needs.
type leafDoc struct {
	rev     string
	gen     int
	hash    string
	deleted bool
	path    []string // hashes, newest first (_revisions.ids)
	start   int
	doc     json.RawMessage
}

// winsOver is CouchDB's winning order: live before deleted, then the
// higher generation, then the greater revision id as a string.
func winsOver(aDeleted bool, aGen int, aHash string, bDeleted bool, bGen int, bHash string) bool {
	if aDeleted != bDeleted {
		return !aDeleted
	}
	if aGen != bGen {
		return aGen > bGen
	}
	return aHash > bHash
}

// leaves reads every leaf of id (open_revs=all&revs=true), in winning
// order; an absent document has none.
func (s *Store) leaves(c context.Context, id string) ([]leafDoc, error) {
	q := url.Values{"open_revs": {"all"}, "revs": {"true"}}
	var rows []struct {
		OK json.RawMessage `json:"ok"`
	}
	err := s.db.do(c, "open revs", id, http.MethodGet, s.db.dbURL(docPath(id), q), nil, &rows)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]leafDoc, 0, len(rows))
	for _, r := range rows {
		if len(r.OK) == 0 || string(r.OK) == "null" {
			continue
		}
		l, err := parseLeaf(id, r.OK)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	sortLeaves(out)
	return out, nil
}

// parseLeaf reads what ordering needs from a leaf read with revs=true.
func parseLeaf(id string, doc json.RawMessage) (leafDoc, error) {
	var head struct {
		Rev       string `json:"_rev"`
		Deleted   bool   `json:"_deleted"`
		Revisions struct {
			Start int      `json:"start"`
			IDs   []string `json:"ids"`
		} `json:"_revisions"`
	}
	if err := json.Unmarshal(doc, &head); err != nil {
		return leafDoc{}, &engine.Error{Op: "open revs", DocID: id, Stage: engine.StageProtocol,
			Err: fmt.Errorf("couchdb: a leaf is not a document: %w", engine.ErrMalformed)}
	}
	gen, hash := splitRev(head.Rev)
	if gen == 0 {
		return leafDoc{}, &engine.Error{Op: "open revs", DocID: id, Stage: engine.StageProtocol,
			Err: fmt.Errorf("couchdb: a leaf with a malformed _rev %q: %w", head.Rev, engine.ErrMalformed)}
	}
	return leafDoc{rev: head.Rev, gen: gen, hash: hash, deleted: head.Deleted,
		path: head.Revisions.IDs, start: head.Revisions.Start, doc: doc}, nil
}

// sortLeaves puts leaves in winning order.
func sortLeaves(out []leafDoc) {
	sort.SliceStable(out, func(i, j int) bool {
		return winsOver(out[i].deleted, out[i].gen, out[i].hash, out[j].deleted, out[j].gen, out[j].hash)
	})
}

// descends reports whether leaf l is rev (gen, hash) or below it.
func (l *leafDoc) descends(gen int, hash string) bool {
	if l.start != l.gen || gen > l.gen {
		return l.gen == gen && l.hash == hash
	}
	k := l.gen - gen
	return k < len(l.path) && l.path[k] == hash
}

// GetRevs reads several revisions of one document: every leaf, or the
// leaves below named revisions (Latest), from one open_revs=all answer
// (ordered and matched here by each leaf's _revisions), or the named
// revisions themselves with one _bulk_get.
func (s *Store) GetRevs(ctx context.Context, id string, opts store.RevsOptions) ([]store.RevDocs, error) {
	var out []store.RevDocs
	err := s.call(ctx, "get revs", func(c context.Context) error {
		var err error
		out, err = s.getRevs(c, id, opts)
		return err
	})
	return out, err
}

func (s *Store) getRevs(c context.Context, id string, opts store.RevsOptions) ([]store.RevDocs, error) {
	if !readableID(id) {
		return unreadableRevs(opts), nil
	}
	if opts.All || opts.Latest {
		leaves, err := s.leaves(c, id)
		if err != nil {
			return nil, err
		}
		return revsFromLeaves(leaves, opts), nil
	}
	seen := map[string]bool{}
	var refs []engine.DocRev
	for _, rev := range opts.Revs {
		if !seen[rev] {
			seen[rev] = true
			refs = append(refs, engine.DocRev{ID: id, Rev: rev})
		}
	}
	docs, err := s.db.bulkGet(c, refs, false)
	if err != nil {
		return nil, err
	}
	return revsFromDocs(id, byDocRev(docs), opts), nil
}

// shapeRevs leaves out _revisions unless opts asks for them.
func shapeRevs(opts store.RevsOptions, doc json.RawMessage) json.RawMessage {
	if opts.History {
		return doc
	}
	return store.WithoutRevisions(doc)
}

// unreadableRevs is GetRevs' answer for an id the Store cannot read.
func unreadableRevs(opts store.RevsOptions) []store.RevDocs {
	if opts.All {
		return nil
	}
	out := make([]store.RevDocs, len(opts.Revs))
	for i, rev := range opts.Revs {
		out[i].Rev = rev
	}
	return out
}

// revsFromLeaves answers GetRevs with All or Latest from the document's
// leaves in winning order.
func revsFromLeaves(leaves []leafDoc, opts store.RevsOptions) []store.RevDocs {
	if opts.All {
		out := make([]store.RevDocs, len(leaves))
		for i := range leaves {
			out[i] = store.RevDocs{Rev: leaves[i].rev, Docs: []json.RawMessage{shapeRevs(opts, leaves[i].doc)}}
		}
		return out
	}
	out := make([]store.RevDocs, len(opts.Revs))
	for i, rev := range opts.Revs {
		out[i].Rev = rev
		gen, hash := splitRev(rev)
		if gen == 0 {
			continue
		}
		for k := range leaves {
			if leaves[k].descends(gen, hash) {
				out[i].Docs = append(out[i].Docs, shapeRevs(opts, leaves[k].doc))
			}
		}
	}
	return out
}

// byDocRev indexes documents read by _bulk_get by their _id and _rev.
func byDocRev(docs []json.RawMessage) map[engine.DocRev]json.RawMessage {
	out := make(map[engine.DocRev]json.RawMessage, len(docs))
	for _, d := range docs {
		var head struct {
			ID  string `json:"_id"`
			Rev string `json:"_rev"`
		}
		if json.Unmarshal(d, &head) == nil {
			out[engine.DocRev{ID: head.ID, Rev: head.Rev}] = d
		}
	}
	return out
}

// revsFromDocs answers GetRevs of named revisions of id from the
// documents read.
func revsFromDocs(id string, docs map[engine.DocRev]json.RawMessage, opts store.RevsOptions) []store.RevDocs {
	out := make([]store.RevDocs, len(opts.Revs))
	for i, rev := range opts.Revs {
		out[i].Rev = rev
		if d, ok := docs[engine.DocRev{ID: id, Rev: rev}]; ok {
			out[i].Docs = []json.RawMessage{shapeRevs(opts, d)}
		}
	}
	return out
}

// AllDocs lists the live documents in id order (GET _all_docs, which
// sorts ids by their bytes and leaves out deleted documents).
func (s *Store) AllDocs(ctx context.Context, opts store.AllDocsOptions) ([]store.DocInfo, error) {
	var out []store.DocInfo
	err := s.call(ctx, "all docs", func(c context.Context) error {
		q := url.Values{}
		if opts.StartKey != "" {
			k, _ := json.Marshal(opts.StartKey)
			q.Set("startkey", string(k))
		}
		if opts.EndKey != "" {
			k, _ := json.Marshal(opts.EndKey)
			q.Set("endkey", string(k))
		}
		if opts.Limit > 0 {
			q.Set("limit", strconv.Itoa(opts.Limit))
		}
		var a struct {
			Rows []allDocsRow `json:"rows"`
		}
		if err := s.db.do(c, "all docs", "", http.MethodGet, s.db.dbURL("/_all_docs", q), nil, &a); err != nil {
			return err
		}
		out = make([]store.DocInfo, 0, len(a.Rows))
		for _, r := range a.Rows {
			if r.Error != "" || r.Value == nil || r.Value.Deleted {
				continue
			}
			out = append(out, store.DocInfo{ID: r.ID, Rev: r.Value.Rev})
		}
		return nil
	})
	return out, err
}
