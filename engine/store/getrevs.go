package store

import (
	"context"
	"encoding/json"
	"sort"
)

// RevsOptions selects what GetRevs reads.
type RevsOptions struct {
	// Revs names the revisions to read, in order; ignored when All is set.
	Revs []string
	// All reads every leaf of the document, winner first (in winning
	// order), deleted leaves included: CouchDB's open_revs=all.
	All bool
	// Latest reads, for each named revision that is in the tree, the
	// leaves that descend from it (a leaf is its own), in winning order,
	// instead of the revision itself: CouchDB's latest=true.
	Latest bool
	// History adds _revisions {start, ids} (newest first) to each
	// document, as GetOptions.Revs does.
	History bool
}

// RevDocs is GetRevs' answer for one requested revision.
type RevDocs struct {
	// Rev is the revision asked for (with All, the leaf read).
	Rev string
	// Docs are its documents: the revision itself, or with Latest the
	// leaves that descend from it. Empty when the revision is missing:
	// not in the tree, or its body is not kept.
	Docs []json.RawMessage
}

// GetRevs reads several revisions of one document from one consistent
// read of its revision tree (CouchDB's open_revs, and the revisions of
// one document in a _bulk_get). It is linear in the tree and in the
// revisions named (plus a sort of the leaves); with Latest, each distinct
// named revision costs a walk of its subtree. An absent document is no
// error: every named revision is missing, and All reads nothing.
func (s *kvStore) GetRevs(ctx context.Context, id string, opts RevsOptions) ([]RevDocs, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	var out []RevDocs
	err := s.view("get revs", func(tx Tx) error {
		rec, err := loadRecord(tx, id)
		if err != nil {
			return err
		}
		out = rec.readRevs(tx, id, opts)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readRevs answers GetRevs from a loaded record (nil when the document is
// absent).
func (r *record) readRevs(tx Tx, id string, opts RevsOptions) []RevDocs {
	var leaves []int
	if r != nil && (opts.All || opts.Latest) {
		leaves = r.leaves()
	}
	built := map[int]json.RawMessage{} // node → its document, built once per call
	read := func(i int) json.RawMessage {
		if d, ok := built[i]; ok {
			return d
		}
		var d json.RawMessage
		n := &r.Nodes[i]
		if body := bodyOf(tx, id, n); n.hasBody() && body != nil {
			var ids []string
			var start int
			if opts.History {
				start, ids = r.history(n.Rev)
			}
			d = buildDoc(id, n.Rev, n.Deleted, body, ids, start, nil)
		}
		built[i] = d
		return d
	}
	if opts.All {
		out := make([]RevDocs, 0, len(leaves))
		for _, l := range leaves {
			if d := read(l); d != nil {
				out = append(out, RevDocs{Rev: r.Nodes[l].Rev, Docs: []json.RawMessage{d}})
			}
		}
		return out
	}
	out := make([]RevDocs, len(opts.Revs))
	if r == nil {
		for i, rev := range opts.Revs {
			out[i].Rev = rev
		}
		return out
	}
	var (
		rank     []int                        // node → position in leaves, -1 for an inner node
		children map[string][]int             // parent revision → child nodes
		latest   map[string][]json.RawMessage // named revision → its leaves' documents
	)
	if opts.Latest {
		rank = make([]int, len(r.Nodes))
		for i := range rank {
			rank[i] = -1
		}
		for k, l := range leaves {
			rank[l] = k
		}
		children = make(map[string][]int, len(r.Nodes))
		for i, n := range r.Nodes {
			if n.Parent != "" {
				children[n.Parent] = append(children[n.Parent], i)
			}
		}
		latest = map[string][]json.RawMessage{}
	}
	for k, rev := range opts.Revs {
		out[k].Rev = rev
		i := r.find(rev)
		if i < 0 {
			continue
		}
		if !opts.Latest {
			if d := read(i); d != nil {
				out[k].Docs = []json.RawMessage{d}
			}
			continue
		}
		if docs, ok := latest[rev]; ok {
			out[k].Docs = append([]json.RawMessage(nil), docs...) // not shared: a caller may rewrite them
			continue
		}
		// The leaves below rev, by a walk of its subtree, in winning order.
		var found []int
		stack := []int{i}
		for len(stack) > 0 {
			j := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if rank[j] >= 0 {
				found = append(found, rank[j])
			}
			stack = append(stack, children[r.Nodes[j].Rev]...)
		}
		sort.Ints(found)
		var docs []json.RawMessage
		for _, f := range found {
			if d := read(leaves[f]); d != nil {
				docs = append(docs, d)
			}
		}
		latest[rev] = docs
		out[k].Docs = docs
	}
	return out
}
