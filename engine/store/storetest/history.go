package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Revision history: CouchDB keeps the bodies of earlier revisions until
// the database is compacted, and LiveSync's file-history view reads them
// with get(id, {revs_info: true}) and then get(id, {rev}) for each
// "available" entry.

// revsInfo reads a document with RevsInfo and returns its _revs_info as
// "rev status" strings, newest first.
func revsInfo(t *testing.T, st store.Store, id, rev string) []string {
	t.Helper()
	d := get(t, st, id, store.GetOptions{Rev: rev, RevsInfo: true})
	list, ok := d["_revs_info"].([]any)
	if !ok {
		t.Fatalf("Get %s rev %q with RevsInfo: no _revs_info in %v", id, rev, d)
	}
	out := make([]string, len(list))
	for i, e := range list {
		m := e.(map[string]any)
		out[i] = fmt.Sprint(m["rev"], " ", m["status"])
	}
	return out
}

// edits writes n new edits of id with {"v": 1…n} and returns the
// revisions, oldest first.
func edits(t *testing.T, st store.Store, id string, n int) []string {
	t.Helper()
	var revs []string
	for i := 1; i <= n; i++ {
		doc := fmt.Sprintf(`{"_id":%q,"v":%d}`, id, i)
		if len(revs) > 0 {
			doc = fmt.Sprintf(`{"_id":%q,"_rev":%q,"v":%d}`, id, revs[len(revs)-1], i)
		}
		revs = append(revs, put(t, st, doc))
	}
	return revs
}

// wantBody checks that rev of id is served with field v.
func wantBody(t *testing.T, st store.Store, id, rev string, v any) {
	t.Helper()
	d := get(t, st, id, store.GetOptions{Rev: rev})
	if d["_rev"] != rev || fmt.Sprint(d["v"]) != fmt.Sprint(v) {
		t.Fatalf("Get %s rev %s = %v, want v %v", id, rev, d, v)
	}
}

func statuses(revs []string, st ...string) []string {
	out := make([]string, len(revs))
	for i := range revs {
		out[i] = revs[len(revs)-1-i] + " " + st[i]
	}
	return out
}

func testHistoryLeavesOnly(t *testing.T, st store.Store, p Profile) {
	revs := edits(t, st, "n", 2)
	first := "missing"
	if p.KeepsAllBodies {
		first = "available"
		wantBody(t, st, "n", revs[0], 1)
	} else {
		wantNotFound(t, st, "n", store.GetOptions{Rev: revs[0]})
	}
	wantBody(t, st, "n", revs[1], 2)
	if got, want := revsInfo(t, st, "n", ""), statuses(revs, "available", first); !reflect.DeepEqual(got, want) {
		t.Fatalf("_revs_info = %v, want %v", got, want)
	}
	if err := st.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	wantBody(t, st, "n", revs[1], 2)
	wantNotFound(t, st, "n", store.GetOptions{Rev: revs[0]})
}

func testHistoryKeepAll(t *testing.T, st store.Store, p Profile) {
	// Local edits, and older revisions loaded with new_edits=false.
	revs := edits(t, st, "n", 3)
	bulk(t, st,
		rdoc("r", 1, []string{"a"}, false, map[string]any{"v": "a"}),
		rdoc("r", 2, []string{"b", "a"}, false, map[string]any{"v": "b"}),
		rdoc("r", 3, []string{"c", "b", "a"}, false, map[string]any{"v": "c"}))
	rrevs := []string{"1-a", "2-b", "3-c"}
	for i, r := range revs {
		wantBody(t, st, "n", r, i+1)
	}
	for i, r := range rrevs {
		wantBody(t, st, "r", r, string(rune('a'+i)))
	}
	all3 := []string{"available", "available", "available"}
	if got, want := revsInfo(t, st, "n", ""), statuses(revs, all3...); !reflect.DeepEqual(got, want) {
		t.Fatalf("_revs_info of n = %v, want %v", got, want)
	}
	if got, want := revsInfo(t, st, "r", ""), statuses(rrevs, all3...); !reflect.DeepEqual(got, want) {
		t.Fatalf("_revs_info of r = %v, want %v", got, want)
	}
	// revs_info and _revisions of an earlier revision follow its own path.
	if got, want := revsInfo(t, st, "r", "2-b"), []string{"2-b available", "1-a available"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("_revs_info of r at 2-b = %v, want %v", got, want)
	}
	d := get(t, st, "r", store.GetOptions{Rev: "2-b", Revs: true})
	if rv := d["_revisions"].(map[string]any); rv["start"] != float64(2) || !reflect.DeepEqual(rv["ids"], []any{"b", "a"}) {
		t.Fatalf("_revisions of 2-b = %v", rv)
	}
	// BulkGet serves earlier revisions too (open_revs with explicit revs).
	docs, err := st.BulkGet(ctx, []engine.DocRev{{ID: "r", Rev: "1-a"}, {ID: "n", Rev: revs[1]}})
	if err != nil || len(docs) != 2 {
		t.Fatalf("BulkGet of earlier revisions: %d docs, %v", len(docs), err)
	}
	if m := decode(t, docs[0]); m["v"] != "a" || m["_revisions"] == nil {
		t.Fatalf("BulkGet r 1-a = %v", m)
	}

	info, _ := st.Info(ctx)
	before, _ := allChanges(t, st, "", 0, "")
	if err := st.Compact(ctx); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	for _, r := range revs[:2] {
		wantNotFound(t, st, "n", store.GetOptions{Rev: r})
	}
	wantNotFound(t, st, "r", store.GetOptions{Rev: "1-a"})
	wantBody(t, st, "n", revs[2], 3)
	wantBody(t, st, "r", "3-c", "c")
	left := []string{"available", "missing", "missing"}
	if got, want := revsInfo(t, st, "n", ""), statuses(revs, left...); !reflect.DeepEqual(got, want) {
		t.Fatalf("_revs_info of n after Compact = %v, want %v", got, want)
	}
	if docs, err := st.BulkGet(ctx, []engine.DocRev{{ID: "r", Rev: "1-a"}}); err != nil || len(docs) != 0 {
		t.Fatalf("BulkGet of a compacted revision: %d docs, %v", len(docs), err)
	}
	// Compaction does not change the feed, the counters or the trees.
	info2, _ := st.Info(ctx)
	after, _ := allChanges(t, st, "", 0, "")
	if info2 != info || !reflect.DeepEqual(after, before) {
		t.Fatalf("Compact changed the feed: %+v %v, was %+v %v", info2, after, info, before)
	}
	if diff, err := st.RevsDiff(ctx, map[string][]string{"r": {"1-a", "2-b"}}); err != nil || len(p.bodiless(diff["r"], "1-a", "2-b")) != 0 {
		t.Fatalf("RevsDiff after Compact = %v, %v; compacted revisions are still known", diff, err)
	}
	// History starts again with the next edit; a second Compact is fine.
	rev4 := put(t, st, fmt.Sprintf(`{"_id":"n","_rev":%q,"v":4}`, revs[2]))
	wantBody(t, st, "n", revs[2], 3)
	if got := revsInfo(t, st, "n", ""); len(got) != 4 || got[0] != rev4+" available" || got[1] != revs[2]+" available" || got[2] != revs[1]+" missing" {
		t.Fatalf("_revs_info after a new edit = %v", got)
	}
	for range 2 {
		if err := st.Compact(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wantNotFound(t, st, "n", store.GetOptions{Rev: revs[2]})
}

func testHistoryDeleted(t *testing.T, st store.Store, p Profile) {
	r1 := put(t, st, `{"_id":"d","v":1}`)
	r2 := put(t, st, `{"_id":"d","_rev":"`+r1+`","_deleted":true}`)
	r3 := put(t, st, `{"_id":"d","v":3}`) // recreated on top of the tombstone
	del := " deleted"
	if p.RevsInfoNoDeleted {
		del = " available"
	}
	want := []string{r3 + " available", r2 + del, r1 + " available"}
	if got := revsInfo(t, st, "d", ""); !reflect.DeepEqual(got, want) {
		t.Fatalf("_revs_info = %v, want %v", got, want)
	}
	if d := get(t, st, "d", store.GetOptions{Rev: r2}); d["_deleted"] != true {
		t.Fatalf("Get of the tombstone = %v", d)
	}
	if err := st.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	want = []string{r3 + " available", r2 + " missing", r1 + " missing"}
	if got := revsInfo(t, st, "d", ""); !reflect.DeepEqual(got, want) {
		t.Fatalf("_revs_info after Compact = %v, want %v", got, want)
	}
}

func testHistoryKeepN(t *testing.T, st store.Store) {
	revs := edits(t, st, "n", 5)
	want := statuses(revs, "available", "available", "available", "missing", "missing")
	if got := revsInfo(t, st, "n", ""); !reflect.DeepEqual(got, want) {
		t.Fatalf("_revs_info with KeepBodies 2 = %v, want %v", got, want)
	}
	wantBody(t, st, "n", revs[2], 3)
	wantBody(t, st, "n", revs[3], 4)
	wantNotFound(t, st, "n", store.GetOptions{Rev: revs[1]})
	// Two branches share the window: the newest earlier bodies win.
	bulk(t, st, rdoc("c", 3, []string{"x3", "x2", "x1"}, false, nil))
	bulk(t, st, rdoc("c", 4, []string{"y4", "y3", "x2", "x1"}, false, nil))
	if got, want := revsInfo(t, st, "c", "3-x3"), []string{"3-x3 available", "2-x2 missing", "1-x1 missing"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("_revs_info of a conflict leaf = %v, want %v", got, want)
	}
}

func testRevsLimit(t *testing.T, st store.Store, p Profile) {
	if n, err := st.RevsLimit(ctx); err != nil || n != p.revsLimit() {
		t.Fatalf("RevsLimit = %d, %v; want the default %d", n, err, p.revsLimit())
	}
	for _, bad := range []int{0, -1} {
		if err := st.SetRevsLimit(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("SetRevsLimit(%d) = %v, want ErrInvalid", bad, err)
		}
	}
	a := edits(t, st, "a", 6)
	b := edits(t, st, "b", 6)
	if err := st.SetRevsLimit(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if n, err := st.RevsLimit(ctx); err != nil || n != 3 {
		t.Fatalf("RevsLimit after SetRevsLimit(3) = %d, %v", n, err)
	}
	revIDs := func(id string) []any {
		return get(t, st, id, store.GetOptions{Revs: true})["_revisions"].(map[string]any)["ids"].([]any)
	}
	// As in CouchDB, a document is stemmed at its next write...
	if ids := revIDs("b"); len(ids) != 6 {
		t.Fatalf("b has %d revisions before its next write, want 6", len(ids))
	}
	a = append(a, put(t, st, fmt.Sprintf(`{"_id":"a","_rev":%q,"v":7}`, a[5])))
	if ids := revIDs("a"); len(ids) != 3 {
		t.Fatalf("a has %d revisions after a write, want 3", len(ids))
	}
	if got, want := revsInfo(t, st, "a", ""), statuses(a[4:], "available", "available", "available"); !reflect.DeepEqual(got, want) {
		t.Fatalf("_revs_info of a = %v, want %v", got, want)
	}
	wantNotFound(t, st, "a", store.GetOptions{Rev: a[3]}) // stemmed with its body
	// ...and by Compact.
	if err := st.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if ids := revIDs("b"); len(ids) != 3 {
		t.Fatalf("b has %d revisions after Compact, want 3", len(ids))
	}
	if got, want := revsInfo(t, st, "b", ""), statuses(b[3:], "available", "missing", "missing"); !reflect.DeepEqual(got, want) {
		t.Fatalf("_revs_info of b after Compact = %v, want %v", got, want)
	}
	if diff, _ := st.RevsDiff(ctx, map[string][]string{"b": {b[0], b[5]}}); !reflect.DeepEqual(diff["b"], []string{b[0]}) {
		t.Fatalf("RevsDiff after stemming = %v, want [%s]", diff, b[0])
	}
}

func testRevsLimitOption(t *testing.T, st store.Store) {
	if n, err := st.RevsLimit(ctx); err != nil || n != 1000 {
		t.Fatalf("RevsLimit with Options.RevsLimit 1000 = %d, %v", n, err)
	}
	const n = 1200
	hs := make([]string, n)
	for i := range hs {
		hs[i] = fmt.Sprintf("h%04d", n-i)
	}
	bulk(t, st, rdoc("long", n, hs, false, nil))
	ids := get(t, st, "long", store.GetOptions{Revs: true})["_revisions"].(map[string]any)["ids"].([]any)
	if len(ids) != 1000 || ids[999] != "h0201" {
		t.Fatalf("%d revisions kept (oldest %v), want 1000 down to h0201", len(ids), ids[len(ids)-1])
	}
}

func testCompactMany(t *testing.T, st store.Store) {
	const n = 700 // several Compact batches
	var docs []string
	for i := range n {
		id := fmt.Sprintf("doc%04d", i)
		docs = append(docs, id)
		r1 := put(t, st, fmt.Sprintf(`{"_id":%q,"v":1}`, id))
		put(t, st, fmt.Sprintf(`{"_id":%q,"_rev":%q,"v":2}`, id, r1))
	}
	if err := st.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range docs {
		info := revsInfo(t, st, id, "")
		if len(info) != 2 || info[1][len(info[1])-len("missing"):] != "missing" {
			t.Fatalf("%s: _revs_info after Compact = %v", id, info)
		}
	}
	if info, _ := st.Info(ctx); info.DocCount != n {
		t.Fatalf("DocCount after Compact = %d, want %d", info.DocCount, n)
	}
}
