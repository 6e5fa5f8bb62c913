package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/livesync-go/livesync-go/engine/store"
)

// revsOf returns, per requested revision, the _rev of each document
// GetRevs answered (and checks that each document is that revision).
func revsOf(t *testing.T, res []store.RevDocs) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, r := range res {
		got := []string{}
		for _, d := range r.Docs {
			got = append(got, decode(t, d)["_rev"].(string))
		}
		out[r.Rev] = got
	}
	return out
}

func getRevs(t *testing.T, st store.Store, id string, opts store.RevsOptions) []store.RevDocs {
	t.Helper()
	res, err := st.GetRevs(ctx, id, opts)
	if err != nil {
		t.Fatalf("GetRevs %s %+v: %v", id, opts, err)
	}
	return res
}

// testGetRevs checks GetRevs, the multi-revision read of open_revs: every
// leaf in winning order (deleted ones included), named revisions in
// request order with the missing ones empty, latest=true following a
// revision to the leaves below it, and a document with many conflicting
// leaves read whole.
func testGetRevs(t *testing.T, st store.Store, p Profile) {
	// 1-a ─┬─ 2-b            (leaf)
	//      └─ 2-c ── 3-d      (deleted leaf)
	// 1-z                     (leaf, a second root)
	bulk(t, st,
		rdoc("g", 2, []string{"b", "a"}, false, map[string]any{"v": "b"}),
		rdoc("g", 3, []string{"d", "c", "a"}, true, map[string]any{"v": "d"}),
		rdoc("g", 1, []string{"z"}, false, map[string]any{"v": "z"}))

	all := getRevs(t, st, "g", store.RevsOptions{All: true, History: true})
	var order []string
	for _, r := range all {
		if len(r.Docs) != 1 {
			t.Fatalf("All: %s has %d documents", r.Rev, len(r.Docs))
		}
		d := decode(t, r.Docs[0])
		if d["_rev"] != r.Rev {
			t.Fatalf("All: entry %s holds %v", r.Rev, d)
		}
		order = append(order, r.Rev)
		if r.Rev == "3-d" {
			if d["_deleted"] != true || !reflect.DeepEqual(d["_revisions"], map[string]any{"start": 3.0, "ids": []any{"d", "c", "a"}}) {
				t.Fatalf("All: 3-d = %v", d)
			}
		}
	}
	if want := []string{"2-b", "1-z", "3-d"}; !reflect.DeepEqual(order, want) {
		t.Fatalf("All leaves = %v, want %v (winning order, deleted last)", order, want)
	}
	if d := decode(t, getRevs(t, st, "g", store.RevsOptions{All: true})[0].Docs[0]); d["_revisions"] != nil || d["v"] != "b" {
		t.Fatalf("All without History: %v", d)
	}

	// Named revisions, in request order; 1-a has no body (leaves only),
	// 9-x is not in the tree.
	named := getRevs(t, st, "g", store.RevsOptions{Revs: []string{"2-b", "1-a", "9-x", "1-z", "2-b"}})
	var got []string
	for _, r := range named {
		got = append(got, fmt.Sprintf("%s:%d", r.Rev, len(r.Docs)))
	}
	if want := []string{"2-b:1", "1-a:0", "9-x:0", "1-z:1", "2-b:1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("named = %v, want %v", got, want)
	}

	latest := revsOf(t, getRevs(t, st, "g", store.RevsOptions{Revs: []string{"1-a", "2-c", "1-z", "9-x", "1-a"}, Latest: true}))
	want := map[string][]string{"1-a": {"2-b", "3-d"}, "2-c": {"3-d"}, "1-z": {"1-z"}, "9-x": {}}
	if !reflect.DeepEqual(latest, want) {
		t.Fatalf("latest = %v, want %v", latest, want)
	}

	// An absent document: no error, nothing read.
	if res := getRevs(t, st, "absent", store.RevsOptions{All: true}); len(res) != 0 {
		t.Fatalf("All of an absent document = %v", res)
	}
	if res := getRevs(t, st, "absent", store.RevsOptions{Revs: []string{"1-a"}, Latest: true}); len(res) != 1 || res[0].Rev != "1-a" || len(res[0].Docs) != 0 {
		t.Fatalf("named of an absent document = %+v", res)
	}

	// Many conflicting leaves, all read in one call.
	n := 2000
	if p.ManyLeaves > 0 {
		n = p.ManyLeaves
	}
	docs := make([]json.RawMessage, n)
	revs := make([]string, n)
	for i := range docs {
		h := fmt.Sprintf("%032x", i)
		docs[i] = rdoc("leafy", 1, []string{h}, false, map[string]any{"x": i})
		revs[i] = "1-" + h
	}
	bulk(t, st, docs...)
	res := getRevs(t, st, "leafy", store.RevsOptions{All: true, History: true})
	if len(res) != n || res[0].Rev != revs[n-1] || res[n-1].Rev != revs[0] {
		t.Fatalf("All of %d leaves: %d, first %s", n, len(res), res[0].Rev)
	}
	res = getRevs(t, st, "leafy", store.RevsOptions{Revs: revs, Latest: true})
	for i, r := range res {
		if r.Rev != revs[i] || len(r.Docs) != 1 || decode(t, r.Docs[0])["x"] != float64(i) {
			t.Fatalf("latest of %d leaves: entry %d = %s with %d documents", n, i, r.Rev, len(r.Docs))
		}
	}
}
