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
//
// Every operation on a record is linear in its nodes (plus a sort of the
// leaves): a record is rewritten inside the store's single write
// transaction, so a quadratic step would let one hostile document stall
// every writer.
type record struct {
	Seq   uint64 `json:"s"`
	Nodes []node `json:"n"`

	idx map[string]int // revision → index in Nodes; nil until index(), reset by changes
}

type node struct {
	Rev     string          `json:"r"`
	Parent  string          `json:"p,omitempty"`
	Deleted bool            `json:"d,omitempty"`
	Body    json.RawMessage `json:"b,omitempty"`
	Kept    bool            `json:"k,omitempty"` // body in BucketBodies

	// canon: Body is known to be written as json.Marshal writes a
	// json.RawMessage (compact, escaped), so a record holding it is
	// encoded without Marshal (appendRecord).
	canon bool
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
// non-empty hash, and is at most MaxRevLength bytes.
func validRev(rev string) bool {
	if len(rev) > MaxRevLength {
		return false
	}
	n, h := revGen(rev)
	return n > 0 && h != ""
}

// index returns the map from revision to node index, built once per
// record until a change resets it.
func (r *record) index() map[string]int {
	if r.idx == nil {
		r.idx = make(map[string]int, len(r.Nodes))
		for i, n := range r.Nodes {
			r.idx[n.Rev] = i
		}
	}
	return r.idx
}

// find returns the index of rev in Nodes, or -1.
func (r *record) find(rev string) int {
	if i, ok := r.index()[rev]; ok {
		return i
	}
	return -1
}

// add appends a node, keeping the index.
func (r *record) add(n node) {
	idx := r.index()
	idx[n.Rev] = len(r.Nodes)
	r.Nodes = append(r.Nodes, n)
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
	idx := r.index()
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
// the revision and its ancestors, newest first, as full "N-hash" strings;
// body is canonical, as parseDoc returns it.
// It reports whether the tree changed. A revision already in the tree is
// left as it is, as CouchDB does. It is linear in the path and the tree
// (the path is at most MaxRevisions long, see parseDoc).
func (r *record) mergePath(path []string, deleted bool, body json.RawMessage) bool {
	if r.find(path[0]) >= 0 {
		return false
	}
	idx := r.index()
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
			n.Deleted, n.Body, n.canon = deleted, body, true
		}
		r.add(n)
	}
	return true
}

// stem keeps, for every leaf, at most limit revisions of its path (the
// leaf included) and drops the rest. It returns the dropped revisions
// whose body is in BucketBodies, for the caller to delete. A node is kept
// when its distance to the nearest leaf below it is under limit: one
// breadth-first walk from all leaves at once, so it is linear in the tree
// however many leaves share a long history.
func (r *record) stem(limit int) (dropped []string) {
	idx := r.index()
	dist := make([]int, len(r.Nodes)) // distance to the nearest leaf + 1; 0 unvisited
	queue := r.leaves()
	for _, l := range queue {
		dist[l] = 1
	}
	for q := 0; q < len(queue); q++ {
		cur := queue[q]
		if dist[cur] >= limit {
			continue
		}
		p, ok := idx[r.Nodes[cur].Parent]
		if !ok || dist[p] != 0 {
			continue
		}
		dist[p] = dist[cur] + 1
		queue = append(queue, p)
	}
	kept := make(map[string]struct{}, len(r.Nodes))
	for i, n := range r.Nodes {
		if dist[i] != 0 {
			kept[n.Rev] = struct{}{}
		}
	}
	out := make([]node, 0, len(kept))
	for i, n := range r.Nodes {
		if dist[i] == 0 {
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
	r.idx = nil
	return dropped
}
