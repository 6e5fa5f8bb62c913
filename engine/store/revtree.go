package store

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// record is everything the store keeps about one document: the sequence of
// its latest change and its revision tree. The tree is flat: each node
// names its parent ("" for a root, including a root left by stemming).
// Leaves keep their body in the record; an earlier revision whose body is
// kept for history has Kept set and its body in BucketBodies, so a long
// history does not make every write of the record larger.
type record struct {
	Seq   uint64 `json:"s"`
	Nodes []node `json:"n"`
}

type node struct {
	Rev     string          `json:"r"`
	Parent  string          `json:"p,omitempty"`
	Deleted bool            `json:"d,omitempty"`
	Body    json.RawMessage `json:"b,omitempty"`
	Kept    bool            `json:"k,omitempty"` // body in BucketBodies
}

// hasBody reports whether the node's body is stored (in the record or in
// BucketBodies).
func (n *node) hasBody() bool { return n.Body != nil || n.Kept }

// parents returns the set of revisions that have a child in the tree.
func (r *record) parents() map[string]struct{} {
	ps := make(map[string]struct{}, len(r.Nodes))
	for _, n := range r.Nodes {
		if n.Parent != "" {
			ps[n.Parent] = struct{}{}
		}
	}
	return ps
}

// revGen returns the generation of a revision "N-hash" (0 if malformed)
// and its hash part.
func revGen(rev string) (int, string) {
	i := strings.IndexByte(rev, '-')
	if i <= 0 {
		return 0, ""
	}
	n, err := strconv.Atoi(rev[:i])
	if err != nil || n <= 0 {
		return 0, ""
	}
	return n, rev[i+1:]
}

// validRev reports whether rev has the form "N-hash" with N ≥ 1 and a
// non-empty hash.
func validRev(rev string) bool {
	n, h := revGen(rev)
	return n > 0 && h != ""
}

func (r *record) find(rev string) int {
	for i := range r.Nodes {
		if r.Nodes[i].Rev == rev {
			return i
		}
	}
	return -1
}

// leaves returns the indexes of the leaf nodes sorted by CouchDB's
// winning-revision order: non-deleted before deleted, then higher
// generation, then the greater revision string. The winner is first.
func (r *record) leaves() []int {
	parents := r.parents()
	var out []int
	for i, n := range r.Nodes {
		if _, ok := parents[n.Rev]; !ok {
			out = append(out, i)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		return revBeats(&r.Nodes[out[a]], &r.Nodes[out[b]])
	})
	return out
}

// revBeats reports whether leaf a wins over leaf b (CouchDB
// couch_doc/couch_key_tree winner: not deleted, then generation, then the
// revision id compared as a string).
func revBeats(a, b *node) bool {
	if a.Deleted != b.Deleted {
		return !a.Deleted
	}
	ga, ha := revGen(a.Rev)
	gb, hb := revGen(b.Rev)
	if ga != gb {
		return ga > gb
	}
	return ha > hb
}

// winner returns the index of the winning leaf, or -1 for an empty tree.
func (r *record) winner() int {
	l := r.leaves()
	if len(l) == 0 {
		return -1
	}
	return l[0]
}

// history returns the revision hashes from rev back to the oldest
// ancestor still in the tree, newest first, and rev's generation.
func (r *record) history(rev string) (int, []string) {
	gen, _ := revGen(rev)
	var ids []string
	idx := make(map[string]int, len(r.Nodes))
	for i, n := range r.Nodes {
		idx[n.Rev] = i
	}
	cur := rev
	for cur != "" {
		i, ok := idx[cur]
		if !ok {
			break
		}
		_, h := revGen(cur)
		ids = append(ids, h)
		cur = r.Nodes[i].Parent
	}
	return gen, ids
}

// mergePath inserts a replicated revision (new_edits=false): path holds
// the revision and its ancestors, newest first, as full "N-hash" strings.
// It reports whether the tree changed. A revision already in the tree is
// left as it is, as CouchDB does. It is linear in the path and the tree.
func (r *record) mergePath(path []string, deleted bool, body json.RawMessage) bool {
	if r.find(path[0]) >= 0 {
		return false
	}
	idx := make(map[string]int, len(r.Nodes)+len(path))
	for i, n := range r.Nodes {
		idx[n.Rev] = i
	}
	// Oldest first, so each node's parent exists before it.
	for i := len(path) - 1; i >= 0; i-- {
		parent := ""
		if i+1 < len(path) {
			parent = path[i+1]
		}
		if j, ok := idx[path[i]]; ok {
			if r.Nodes[j].Parent == "" && parent != "" {
				r.Nodes[j].Parent = parent // history known again
			}
			continue
		}
		n := node{Rev: path[i], Parent: parent}
		if i == 0 {
			n.Deleted = deleted
			n.Body = body
		}
		idx[n.Rev] = len(r.Nodes)
		r.Nodes = append(r.Nodes, n)
	}
	return true
}

// stem keeps, for every leaf, at most limit revisions of its path (the
// leaf included) and drops the rest. It returns the dropped revisions
// whose body is in BucketBodies, for the caller to delete.
func (r *record) stem(limit int) (dropped []string) {
	idx := make(map[string]int, len(r.Nodes))
	for i, n := range r.Nodes {
		idx[n.Rev] = i
	}
	keep := make([]bool, len(r.Nodes))
	for _, l := range r.leaves() {
		cur, depth := l, 0
		for depth < limit {
			keep[cur] = true
			depth++
			p, ok := idx[r.Nodes[cur].Parent]
			if !ok {
				break
			}
			cur = p
		}
	}
	out := r.Nodes[:0]
	kept := make(map[string]struct{}, len(r.Nodes))
	for i, n := range r.Nodes {
		if keep[i] {
			kept[n.Rev] = struct{}{}
		}
	}
	for i, n := range r.Nodes {
		if !keep[i] {
			if n.Kept {
				dropped = append(dropped, n.Rev)
			}
			continue
		}
		if _, ok := kept[n.Parent]; !ok {
			n.Parent = ""
		}
		out = append(out, n)
	}
	r.Nodes = out
	return dropped
}
