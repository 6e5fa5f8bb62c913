package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
)

// FuzzRevTreeMerge writes random replicated revisions (random branches of
// a random revision tree, each sent with a random length of history, some
// deleted, in random batches) to a memory store and checks it, after each
// batch, against refModel: a naive map of revisions that computes leaves,
// the winner, stemming and history the slow, obvious way. Revision ids
// are derived from their parent's, as real ones are, so a revision always
// names the same history.
//
// Input: byte 0 sets the revs limit (1-6) and whether earlier bodies are
// kept; then 4 bytes per revision: document and flags, depth, branch
// bits, history length.
func FuzzRevTreeMerge(f *testing.F) {
	f.Add([]byte{0x02, 0x00, 3, 0x00, 3})
	f.Add([]byte{0x03, 0x00, 4, 0x00, 4, 0x04, 4, 0x01, 1, 0x02, 5, 0x03, 2})
	f.Add([]byte{0x81, 0x00, 7, 0x05, 7, 0x00, 2, 0x05, 1, 0x06, 6, 0xff, 3, 0x01, 1, 0x00, 1})
	f.Add([]byte{0x05, 0x01, 1, 0, 1, 0x01, 2, 1, 2, 0x03, 2, 2, 1, 0x05, 8, 0xaa, 8, 0x00, 8, 0xaa, 2})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 1 || len(in) > 4*64+1 {
			return
		}
		limit := 1 + int(in[0]&0x7f)%6
		keep := 0
		if in[0]&0x80 != 0 {
			keep = KeepAllBodies
		}
		st, err := NewMemory(Options{RevsLimit: limit, KeepBodies: keep})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ref := map[string]*refModel{"a": newRefModel(), "b": newRefModel()}
		var batch []json.RawMessage
		type sent struct {
			id   string
			path []string
			del  bool
			v    int
		}
		var pending []sent
		ops := in[1:]
		for i := 0; i+4 <= len(ops); i += 4 {
			flags, depth, branch, hist := ops[i], 1+int(ops[i+1])%8, ops[i+2], int(ops[i+3])
			id := "a"
			if flags&1 != 0 {
				id = "b"
			}
			path := branchPath(depth, branch) // newest first, from the root
			path = path[:1+hist%len(path)]    // the history the sender kept
			s := sent{id: id, path: path, del: flags&2 != 0, v: i / 4}
			pending = append(pending, s)
			batch = append(batch, replicated(s.id, s.path, s.del, s.v))
			if flags&4 == 0 && i+8 <= len(ops) {
				continue // the next revision goes in the same batch
			}
			res, err := st.BulkDocs(context.Background(), batch)
			if err != nil {
				t.Fatalf("BulkDocs: %v", err)
			}
			for _, r := range res {
				if r.Error != "" {
					t.Fatalf("BulkDocs %s: %s %s", r.ID, r.Error, r.Reason)
				}
			}
			touched := map[string]bool{}
			for _, s := range pending {
				ref[s.id].merge(s.path, s.del, s.v)
				touched[s.id] = true
			}
			for id := range touched {
				ref[id].stem(limit) // the store stems each document once per call
			}
			batch, pending = batch[:0], pending[:0]
			for _, id := range []string{"a", "b"} {
				checkAgainst(t, st, id, ref[id])
			}
		}
	})
}

// branchPath returns the revisions from a leaf at depth back to the root,
// newest first; bit k of branch chooses the child at generation k+1.
func branchPath(depth int, branch byte) []string {
	path := make([]string, depth)
	parent := ""
	for g := 1; g <= depth; g++ {
		h := fnv.New32a()
		fmt.Fprintf(h, "%s/%d", parent, (branch>>(g-1))&1)
		parent = fmt.Sprintf("%d-%08x", g, h.Sum32())
		path[depth-g] = parent
	}
	return path
}

// everyRevision lists every revision FuzzRevTreeMerge may send.
var everyRevision = sync.OnceValue(func() []string {
	var all []string
	for g := 1; g <= 8; g++ {
		for b := range 1 << g {
			all = append(all, branchPath(g, byte(b))[0])
		}
	}
	return all
})

func replicated(id string, path []string, deleted bool, v int) json.RawMessage {
	gen, _ := revGen(path[0])
	ids := make([]string, len(path))
	for i, r := range path {
		_, ids[i] = revGen(r)
	}
	b, _ := json.Marshal(map[string]any{"_id": id, "_rev": path[0], "_deleted": deleted, "v": v,
		"_revisions": map[string]any{"start": gen, "ids": ids}})
	return b
}

// refModel is the reference: every revision the store should know, with
// its parent ("" unknown or stemmed), deletion and value.
type refModel struct{ nodes map[string]*refNode }

type refNode struct {
	parent string
	del    bool
	v      int
}

func newRefModel() *refModel { return &refModel{nodes: map[string]*refNode{}} }

// merge adds a replicated revision and its history (CouchDB: a revision
// already known is left alone; a known revision whose parent was unknown
// learns it).
func (m *refModel) merge(path []string, del bool, v int) {
	if _, ok := m.nodes[path[0]]; ok {
		return
	}
	for i, rev := range path {
		parent := ""
		if i+1 < len(path) {
			parent = path[i+1]
		}
		if n, ok := m.nodes[rev]; ok {
			if n.parent == "" {
				n.parent = parent
			}
			continue
		}
		n := &refNode{parent: parent}
		if i == 0 {
			n.del, n.v = del, v
		}
		m.nodes[rev] = n
	}
}

// leaves lists the revisions nobody names as parent, winner first:
// not deleted, then higher generation, then greater id.
func (m *refModel) leaves() []string {
	var out []string
	for rev := range m.nodes {
		child := false
		for _, n := range m.nodes {
			if n.parent == rev {
				child = true
			}
		}
		if !child {
			out = append(out, rev)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		if da, db := m.nodes[a].del, m.nodes[b].del; da != db {
			if da {
				return 1
			}
			return -1
		}
		ga, ha := revGen(a)
		gb, hb := revGen(b)
		if ga != gb {
			return gb - ga
		}
		if ha > hb {
			return -1
		}
		if ha < hb {
			return 1
		}
		return 0
	})
	return out
}

// stem keeps the revisions at most limit-1 parents above some leaf.
func (m *refModel) stem(limit int) {
	keep := map[string]bool{}
	for _, l := range m.leaves() {
		cur := l
		for d := 0; d < limit && cur != ""; d++ {
			if m.nodes[cur] == nil {
				break
			}
			keep[cur] = true
			cur = m.nodes[cur].parent
		}
	}
	for rev := range m.nodes {
		if !keep[rev] {
			delete(m.nodes, rev)
		}
	}
	for _, n := range m.nodes {
		if !keep[n.parent] {
			n.parent = ""
		}
	}
}

// history is rev and its known ancestors, newest first.
func (m *refModel) history(rev string) []string {
	var out []string
	for cur := rev; cur != "" && m.nodes[cur] != nil; cur = m.nodes[cur].parent {
		out = append(out, cur)
	}
	return out
}

// checkAgainst compares document id of st with the model: the stored
// tree's shape, the leaves in winning order (the feed's revs), the
// winner's body and history, and which revisions RevsDiff knows.
func checkAgainst(t *testing.T, st Store, id string, m *refModel) {
	t.Helper()
	ctx := context.Background()
	kv := st.(*kvStore)
	var rec *record
	if err := kv.view("fuzz", func(tx Tx) error {
		var err error
		rec, err = loadRecord(tx, id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(m.nodes) == 0 {
		if rec != nil {
			t.Fatalf("%s: stored %d revisions, the model none", id, len(rec.Nodes))
		}
		return
	}
	if rec == nil {
		t.Fatalf("%s: not stored", id)
	}
	got := map[string]string{}
	for _, n := range rec.Nodes {
		if _, dup := got[n.Rev]; dup {
			t.Fatalf("%s: revision %s twice", id, n.Rev)
		}
		got[n.Rev] = n.Parent
	}
	want := map[string]string{}
	for rev, n := range m.nodes {
		want[rev] = n.parent
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: tree (rev → parent)\n got %v\nwant %v", id, got, want)
	}
	leaves := m.leaves()
	var feed []string
	page, err := st.Changes(ctx, engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range page.Results {
		if c.ID == id {
			feed = c.Revs
		}
	}
	if !slices.Equal(feed, leaves) {
		t.Fatalf("%s: leaves %v, want %v", id, feed, leaves)
	}
	w := m.nodes[leaves[0]]
	doc, err := st.Get(ctx, id, GetOptions{Revs: true})
	if w.del {
		if !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("%s: winner %s is deleted, Get = %s, %v", id, leaves[0], doc, err)
		}
		doc, err = st.Get(ctx, id, GetOptions{Rev: leaves[0], Revs: true})
	}
	if err != nil {
		t.Fatalf("%s: Get: %v", id, err)
	}
	var d struct {
		Rev       string `json:"_rev"`
		V         int    `json:"v"`
		Revisions struct {
			Start int      `json:"start"`
			IDs   []string `json:"ids"`
		} `json:"_revisions"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	var hist []string
	for i, h := range d.Revisions.IDs {
		hist = append(hist, fmt.Sprintf("%d-%s", d.Revisions.Start-i, h))
	}
	if d.Rev != leaves[0] || d.V != w.v || !slices.Equal(hist, m.history(leaves[0])) {
		t.Fatalf("%s: winner %s v %d history %v, want %s v %d history %v", id, d.Rev, d.V, hist, leaves[0], w.v, m.history(leaves[0]))
	}
	all := everyRevision()
	diff, err := st.RevsDiff(ctx, map[string][]string{id: all})
	if err != nil {
		t.Fatal(err)
	}
	missing := map[string]bool{}
	for _, r := range diff[id] {
		missing[r] = true
	}
	for _, r := range all {
		if _, known := m.nodes[r]; known == missing[r] {
			t.Fatalf("%s: RevsDiff says %s missing=%v, the model knows it: %v", id, r, missing[r], known)
		}
	}
}
