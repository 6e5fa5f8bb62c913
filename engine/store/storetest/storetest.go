package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Run runs the conformance suite against the stores open returns: a new,
// empty store configured with opts (the suite sets RevsLimit and
// KeepBodies for its history cases; an implementation applies what it
// supports and fails the test for what it does not).
func Run(t *testing.T, open func(t *testing.T, opts store.Options) store.Store) {
	run(t, open, Profile{})
}

func run(t *testing.T, open func(t *testing.T, opts store.Options) store.Store, p Profile) {
	tests := []struct {
		name string
		opts store.Options
		fn   func(t *testing.T, st store.Store)
		skip bool // the case does not apply to p
	}{
		{"NewEditsFalse", store.Options{}, testNewEditsFalse, false},
		{"NewEditsTrue", store.Options{}, testNewEditsTrue, false},
		{"WinningRevision", store.Options{}, testWinningRevision, false},
		{"ConflictsAndResolution", store.Options{}, testConflicts, false},
		{"DeletedLeavesAndTombstones", store.Options{}, func(t *testing.T, st store.Store) { testTombstones(t, st, p) }, false},
		{"RevisionsAndStemming", store.Options{}, func(t *testing.T, st store.Store) { testStemming(t, st, p) }, false},
		{"RevsDiff", store.Options{}, func(t *testing.T, st store.Store) { testRevsDiff(t, st, p) }, false},
		{"BulkGet", store.Options{}, testBulkGet, false},
		{"GetRevs", store.Options{}, func(t *testing.T, st store.Store) { testGetRevs(t, st, p) }, false},
		{"ChangesOrderAndResume", store.Options{}, func(t *testing.T, st store.Store) { testChangesOrder(t, st, p) }, false},
		{"ChangesAllDocsLeaves", store.Options{}, testChangesLeaves, false},
		{"ChangesSelector", store.Options{}, func(t *testing.T, st store.Store) { testSelector(t, st, p) }, false},
		{"ChangesSelectorUnsupported", store.Options{}, testSelectorUnsupported, false},
		{"ChangesLongpoll", store.Options{}, testLongpoll, false},
		{"Local", store.Options{}, testLocal, false},
		{"LocalUpdate", store.Options{}, testLocalUpdate, false},
		{"Chunks", store.Options{}, testChunks, false},
		{"BigBatches", store.Options{}, testBigBatches, false},
		{"InvalidDocuments", store.Options{}, testInvalid, false},
		{"AllDocs", store.Options{}, testAllDocs, false},
		{"Concurrent", store.Options{}, testConcurrent, false},
		{"CancelAndClose", store.Options{}, testCancelAndClose, false},
		{"HistoryLeavesOnlyByDefault", store.Options{}, func(t *testing.T, st store.Store) { testHistoryLeavesOnly(t, st, p) }, false},
		{"HistoryKeepAllUntilCompact", store.Options{KeepBodies: store.KeepAllBodies}, func(t *testing.T, st store.Store) { testHistoryKeepAll(t, st, p) }, false},
		{"HistoryDeletedRevisions", store.Options{KeepBodies: store.KeepAllBodies}, func(t *testing.T, st store.Store) { testHistoryDeleted(t, st, p) }, false},
		{"HistoryKeepNewestN", store.Options{KeepBodies: 2}, testHistoryKeepN, p.KeepsAllBodies},
		{"RevsLimitDefaultAndSet", store.Options{KeepBodies: store.KeepAllBodies}, func(t *testing.T, st store.Store) { testRevsLimit(t, st, p) }, p.FixedRevsLimit},
		{"RevsLimitOption", store.Options{RevsLimit: 1000}, testRevsLimitOption, p.FixedRevsLimit},
		{"CompactManyDocuments", store.Options{KeepBodies: store.KeepAllBodies}, testCompactMany, false},
		{"PutBatch", store.Options{}, func(t *testing.T, st store.Store) { testPutBatch(t, st, p) }, false},
		{"IDLimits", store.Options{KeepBodies: store.KeepAllBodies}, testIDLimits, false},
		{"LongRevisions", store.Options{}, func(t *testing.T, st store.Store) { testLongRevisions(t, st, p) }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip {
				t.Skipf("does not apply to the store's profile %+v", p)
			}
			st := open(t, tc.opts)
			t.Cleanup(func() { st.Close() })
			tc.fn(t, st)
		})
	}
}

var ctx = context.Background()

// rdoc builds a replicated document: rev "N-h" with history hashes
// (newest first, the first being h) and extra body fields.
func rdoc(id string, gen int, hashes []string, deleted bool, fields map[string]any) json.RawMessage {
	m := map[string]any{"_id": id, "_rev": fmt.Sprintf("%d-%s", gen, hashes[0]),
		"_revisions": map[string]any{"start": gen, "ids": hashes}}
	if deleted {
		m["_deleted"] = true
	}
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return b
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func bulk(t *testing.T, st store.Store, docs ...json.RawMessage) {
	t.Helper()
	res, err := st.BulkDocs(ctx, docs)
	if err != nil {
		t.Fatalf("BulkDocs: %v", err)
	}
	if len(res) != len(docs) {
		t.Fatalf("BulkDocs: %d results for %d docs", len(res), len(docs))
	}
	for _, r := range res {
		if r.Error != "" {
			t.Fatalf("BulkDocs %s: %s %s", r.ID, r.Error, r.Reason)
		}
	}
}

func put(t *testing.T, st store.Store, doc string) string {
	t.Helper()
	rev, err := st.Put(ctx, raw(doc))
	if err != nil {
		t.Fatalf("Put %s: %v", doc, err)
	}
	return rev
}

func decode(t *testing.T, b json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("bad JSON %s: %v", b, err)
	}
	return m
}

func get(t *testing.T, st store.Store, id string, opts store.GetOptions) map[string]any {
	t.Helper()
	b, err := st.Get(ctx, id, opts)
	if err != nil {
		t.Fatalf("Get %s %+v: %v", id, opts, err)
	}
	return decode(t, b)
}

func wantNotFound(t *testing.T, st store.Store, id string, opts store.GetOptions) {
	t.Helper()
	if b, err := st.Get(ctx, id, opts); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Get %s %+v = %s, %v; want ErrNotFound", id, opts, b, err)
	}
}

// allChanges reads the whole feed from since with the given page size.
func allChanges(t *testing.T, st store.Store, since string, limit int, sel string) ([]engine.Change, string) {
	t.Helper()
	var out []engine.Change
	for range 100000 {
		req := engine.ChangesRequest{Since: since, Limit: limit}
		if sel != "" {
			req.Selector = raw(sel)
		}
		page, err := st.Changes(ctx, req)
		if err != nil {
			t.Fatalf("Changes: %v", err)
		}
		if page.LastSeq == "" {
			t.Fatalf("Changes: empty LastSeq")
		}
		out = append(out, page.Results...)
		since = page.LastSeq
		if limit == 0 || len(page.Results) < limit {
			if page.Pending != 0 {
				t.Fatalf("last page: Pending = %d, want 0", page.Pending)
			}
			return out, since
		}
	}
	t.Fatal("Changes never ended")
	return nil, ""
}

func ids(cs []engine.Change) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func testNewEditsFalse(t *testing.T, st store.Store) {
	bulk(t, st, rdoc("a", 1, []string{"x"}, false, map[string]any{"v": 1.0}))
	d := get(t, st, "a", store.GetOptions{})
	if d["_rev"] != "1-x" || d["v"] != 1.0 || d["_id"] != "a" {
		t.Fatalf("Get a = %v", d)
	}
	// The next revision replicated with its history extends the branch.
	bulk(t, st, rdoc("a", 3, []string{"z", "y", "x"}, false, map[string]any{"v": 3.0}))
	d = get(t, st, "a", store.GetOptions{Revs: true, Conflicts: true})
	if d["_rev"] != "3-z" || d["_conflicts"] != nil {
		t.Fatalf("Get a = %v", d)
	}
	if got := d["_revisions"]; !reflect.DeepEqual(got, map[string]any{"start": 3.0, "ids": []any{"z", "y", "x"}}) {
		t.Fatalf("_revisions = %v", got)
	}
	// Replaying an old or existing revision changes nothing and is no error.
	info0, _ := st.Info(ctx)
	bulk(t, st, rdoc("a", 1, []string{"x"}, false, map[string]any{"v": 9.0}),
		rdoc("a", 3, []string{"z", "y", "x"}, false, map[string]any{"v": 9.0}))
	info1, _ := st.Info(ctx)
	if info0.UpdateSeq != info1.UpdateSeq {
		t.Fatalf("replaying known revisions moved UpdateSeq %s → %s", info0.UpdateSeq, info1.UpdateSeq)
	}
	if d := get(t, st, "a", store.GetOptions{}); d["v"] != 3.0 {
		t.Fatalf("known revision overwritten: %v", d)
	}
	// A revision without _revisions is stored as its own root.
	bulk(t, st, raw(`{"_id":"b","_rev":"2-q","k":"v"}`))
	if d := get(t, st, "b", store.GetOptions{Revs: true}); d["_rev"] != "2-q" || !reflect.DeepEqual(d["_revisions"], map[string]any{"start": 2.0, "ids": []any{"q"}}) {
		t.Fatalf("Get b = %v", d)
	}
	if info1.DocCount != 1 {
		t.Fatalf("DocCount = %d, want 1", info1.DocCount)
	}
}

var revRe = regexp.MustCompile(`^([0-9]+)-[0-9a-f]{32}$`)

func testNewEditsTrue(t *testing.T, st store.Store) {
	r1 := put(t, st, `{"_id":"n","v":1}`)
	if m := revRe.FindStringSubmatch(r1); m == nil || m[1] != "1" {
		t.Fatalf("first rev %q, want 1-<32 hex>", r1)
	}
	if _, err := st.Put(ctx, raw(`{"_id":"n","v":2}`)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Put without _rev on an existing doc: %v, want ErrConflict", err)
	}
	r2 := put(t, st, `{"_id":"n","_rev":"`+r1+`","v":2}`)
	if m := revRe.FindStringSubmatch(r2); m == nil || m[1] != "2" {
		t.Fatalf("second rev %q", r2)
	}
	if _, err := st.Put(ctx, raw(`{"_id":"n","_rev":"`+r1+`","v":3}`)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Put with a stale _rev: %v, want ErrConflict", err)
	}
	if _, err := st.Put(ctx, raw(`{"_id":"nope","_rev":"1-abc","v":3}`)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Put with _rev on an absent doc: %v, want ErrConflict", err)
	}
	d := get(t, st, "n", store.GetOptions{Revs: true})
	h1, h2 := strings.SplitN(r1, "-", 2)[1], strings.SplitN(r2, "-", 2)[1]
	if d["v"] != 2.0 || !reflect.DeepEqual(d["_revisions"], map[string]any{"start": 2.0, "ids": []any{h2, h1}}) {
		t.Fatalf("Get n = %v", d)
	}
	// Delete, then recreate without _rev: the new revision extends the tombstone.
	r3 := put(t, st, `{"_id":"n","_rev":"`+r2+`","_deleted":true,"v":2}`)
	wantNotFound(t, st, "n", store.GetOptions{})
	r4 := put(t, st, `{"_id":"n","v":4}`)
	if m := revRe.FindStringSubmatch(r4); m == nil || m[1] != "4" {
		t.Fatalf("recreated rev %q after %s", r4, r3)
	}
	// A Put and the same revision replicated to another store agree.
	b, _ := st.BulkGet(ctx, []engine.DocRev{{ID: "n", Rev: r4}})
	if len(b) != 1 || decode(t, b[0])["v"] != 4.0 {
		t.Fatalf("BulkGet %s = %s", r4, b)
	}
}

func testWinningRevision(t *testing.T, st store.Store) {
	cases := []struct {
		name   string
		leaves []json.RawMessage
		want   string
	}{
		{"higher generation", []json.RawMessage{rdoc("w1", 2, []string{"a", "r"}, false, nil), rdoc("w1", 3, []string{"0", "b", "r"}, false, nil)}, "3-0"},
		{"same generation, greater id", []json.RawMessage{rdoc("w2", 2, []string{"abc", "r"}, false, nil), rdoc("w2", 2, []string{"abd", "r"}, false, nil)}, "2-abd"},
		{"id compared as a string", []json.RawMessage{rdoc("w3", 2, []string{"9", "r"}, false, nil), rdoc("w3", 2, []string{"10", "r"}, false, nil)}, "2-9"},
		{"live beats deleted of higher generation", []json.RawMessage{rdoc("w4", 1, []string{"a"}, false, nil), rdoc("w4", 5, []string{"z", "y", "x", "w", "v"}, true, nil)}, "1-a"},
		{"all deleted: highest generation", []json.RawMessage{rdoc("w5", 2, []string{"a", "r"}, true, nil), rdoc("w5", 3, []string{"b", "q", "r"}, true, nil)}, "3-b"},
	}
	for _, c := range cases {
		bulk(t, st, c.leaves...)
		var m map[string]any
		json.Unmarshal(c.leaves[0], &m)
		id := m["_id"].(string)
		page, err := st.Changes(ctx, engine.ChangesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, ch := range page.Results {
			if ch.ID == id {
				found = true
				if ch.Revs[0] != c.want {
					t.Errorf("%s: winner %s, want %s (leaves %v)", c.name, ch.Revs[0], c.want, ch.Revs)
				}
			}
		}
		if !found {
			t.Errorf("%s: %s not in changes", c.name, id)
		}
	}
	// Reverse arrival order on a fresh id gives the same winner.
	bulk(t, st, rdoc("w6", 2, []string{"abd", "r"}, false, nil), rdoc("w6", 2, []string{"abc", "r"}, false, nil))
	if d := get(t, st, "w6", store.GetOptions{}); d["_rev"] != "2-abd" {
		t.Errorf("reverse order: winner %v", d["_rev"])
	}
}

func testConflicts(t *testing.T, st store.Store) {
	bulk(t, st, rdoc("c", 1, []string{"a"}, false, map[string]any{"v": "a"}))
	bulk(t, st, rdoc("c", 2, []string{"b", "a"}, false, map[string]any{"v": "b"}),
		rdoc("c", 2, []string{"c", "a"}, false, map[string]any{"v": "c"}))
	d := get(t, st, "c", store.GetOptions{Conflicts: true})
	if d["_rev"] != "2-c" || d["v"] != "c" || !reflect.DeepEqual(d["_conflicts"], []any{"2-b"}) {
		t.Fatalf("Get c = %v", d)
	}
	// The losing leaf is readable by rev.
	if d := get(t, st, "c", store.GetOptions{Rev: "2-b"}); d["v"] != "b" {
		t.Fatalf("Get c@2-b = %v", d)
	}
	// Resolve by deleting the losing branch with a new edit.
	if _, err := st.Put(ctx, raw(`{"_id":"c","_rev":"2-b","_deleted":true,"v":"b"}`)); err != nil {
		t.Fatal(err)
	}
	d = get(t, st, "c", store.GetOptions{Conflicts: true})
	if d["_rev"] != "2-c" || d["_conflicts"] != nil {
		t.Fatalf("after resolution Get c = %v", d)
	}
	cs, _ := allChanges(t, st, "", 0, "")
	if len(cs) != 1 || len(cs[0].Revs) != 2 || cs[0].Revs[0] != "2-c" || cs[0].Deleted {
		t.Fatalf("changes after resolution = %+v", cs)
	}
	// Editing the winner of a conflicted doc keeps the conflict.
	bulk(t, st, rdoc("k", 2, []string{"x", "r"}, false, nil), rdoc("k", 2, []string{"y", "r"}, false, nil))
	r := put(t, st, `{"_id":"k","_rev":"2-y","v":1}`)
	d = get(t, st, "k", store.GetOptions{Conflicts: true})
	if d["_rev"] != r || !reflect.DeepEqual(d["_conflicts"], []any{"2-x"}) {
		t.Fatalf("Get k = %v", d)
	}
}

func testTombstones(t *testing.T, st store.Store, p Profile) {
	bulk(t, st, rdoc("t", 1, []string{"a"}, false, map[string]any{"path": "t.md"}))
	bulk(t, st, rdoc("t", 2, []string{"b", "a"}, true, map[string]any{"path": "t.md", "deleted": true}))
	wantNotFound(t, st, "t", store.GetOptions{})
	d := get(t, st, "t", store.GetOptions{Rev: "2-b"})
	if d["_deleted"] != true || d["path"] != "t.md" {
		t.Fatalf("tombstone body = %v", d)
	}
	if p.KeepsAllBodies {
		if d := get(t, st, "t", store.GetOptions{Rev: "1-a"}); d["path"] != "t.md" {
			t.Fatalf("earlier revision 1-a = %v", d)
		}
	} else {
		wantNotFound(t, st, "t", store.GetOptions{Rev: "1-a"}) // not a leaf: no body
	}
	got, err := st.BulkGet(ctx, []engine.DocRev{{ID: "t", Rev: "2-b"}})
	if err != nil || len(got) != 1 || decode(t, got[0])["_deleted"] != true {
		t.Fatalf("BulkGet tombstone = %s, %v", got, err)
	}
	cs, _ := allChanges(t, st, "", 0, "")
	if len(cs) != 1 || !cs[0].Deleted || cs[0].Revs[0] != "2-b" {
		t.Fatalf("changes = %+v", cs)
	}
	if info, _ := st.Info(ctx); info.DocCount != 0 {
		t.Fatalf("DocCount = %d with only a tombstone", info.DocCount)
	}
	// A deleted leaf next to a live one: the live one wins, the deleted
	// leaf is listed in style=all_docs but is no conflict.
	bulk(t, st, rdoc("u", 1, []string{"a"}, false, nil),
		rdoc("u", 3, []string{"c", "b", "a"}, true, nil),
		rdoc("u", 2, []string{"x", "a"}, false, nil))
	d = get(t, st, "u", store.GetOptions{Conflicts: true})
	if d["_rev"] != "2-x" || d["_conflicts"] != nil {
		t.Fatalf("Get u = %v", d)
	}
	cs, _ = allChanges(t, st, "", 0, "")
	last := cs[len(cs)-1]
	if last.ID != "u" || last.Deleted || !reflect.DeepEqual(last.Revs, []string{"2-x", "3-c"}) {
		t.Fatalf("change u = %+v", last)
	}
}

func testStemming(t *testing.T, st store.Store, p Profile) {
	limit := p.revsLimit()
	n := limit + 50
	hs := make([]string, n)
	for i := range hs {
		hs[i] = fmt.Sprintf("h%03d", n-i) // newest first
	}
	bulk(t, st, rdoc("s", n, hs, false, nil))
	d := get(t, st, "s", store.GetOptions{Revs: true})
	rv := d["_revisions"].(map[string]any)
	ids := rv["ids"].([]any)
	if rv["start"] != float64(n) || len(ids) != limit || ids[0] != hs[0] || ids[limit-1] != hs[limit-1] {
		t.Fatalf("_revisions start %v, %d ids (%v … %v), want %d from %s to %s", rv["start"], len(ids), ids[0], ids[len(ids)-1], limit, hs[0], hs[limit-1])
	}
	oldest := fmt.Sprintf("%d-%s", n-limit+1, hs[limit-1])
	next := fmt.Sprintf("%d-new", n+1)
	diff, err := st.RevsDiff(ctx, map[string][]string{"s": {"1-h001", oldest, fmt.Sprintf("%d-%s", n, hs[0]), next}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sorted(p.bodiless(diff["s"], oldest)), sorted([]string{"1-h001", next})) {
		t.Fatalf("RevsDiff after stemming = %v", diff)
	}
	// New edits on top keep the window at the limit.
	rev := d["_rev"].(string)
	for range 3 {
		rev = put(t, st, `{"_id":"s","_rev":"`+rev+`"}`)
	}
	d = get(t, st, "s", store.GetOptions{Revs: true})
	if ids := d["_revisions"].(map[string]any)["ids"].([]any); len(ids) != limit || ids[limit-1] != hs[limit-4] {
		t.Fatalf("after 3 edits: %d ids, oldest %v", len(ids), ids[len(ids)-1])
	}
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

func testRevsDiff(t *testing.T, st store.Store, p Profile) {
	bulk(t, st, rdoc("a", 2, []string{"b", "a"}, false, nil), rdoc("b", 1, []string{"x"}, true, nil))
	diff, err := st.RevsDiff(ctx, map[string][]string{
		"a":    {"1-a", "2-b", "2-c", "3-d"},
		"b":    {"1-x"},
		"none": {"1-q", "2-r"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"a": {"2-c", "3-d"}, "none": {"1-q", "2-r"}}
	for k := range diff {
		diff[k] = sorted(p.bodiless(diff[k], "1-a"))
	}
	if !reflect.DeepEqual(diff, want) {
		t.Fatalf("RevsDiff = %v, want %v", diff, want)
	}
}

func testBulkGet(t *testing.T, st store.Store) {
	bulk(t, st, rdoc("a", 2, []string{"b", "a"}, false, map[string]any{"v": "a2b"}),
		rdoc("a", 2, []string{"c", "a"}, false, map[string]any{"v": "a2c"}),
		rdoc("b", 1, []string{"x"}, false, map[string]any{"v": "b1"}))
	got, err := st.BulkGet(ctx, []engine.DocRev{
		{ID: "b", Rev: "1-x"}, {ID: "a", Rev: "2-b"}, {ID: "a", Rev: "1-a"}, {ID: "zz", Rev: "1-x"}, {ID: "a", Rev: "9-n"}, {ID: "a", Rev: "2-c"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var vs []string
	for _, g := range got {
		m := decode(t, g)
		vs = append(vs, m["v"].(string))
		if m["_revisions"] == nil {
			t.Errorf("BulkGet without _revisions: %s", g)
		}
	}
	if !reflect.DeepEqual(vs, []string{"b1", "a2b", "a2c"}) {
		t.Fatalf("BulkGet order = %v", vs)
	}
	if m := decode(t, got[1]); !reflect.DeepEqual(m["_revisions"], map[string]any{"start": 2.0, "ids": []any{"b", "a"}}) || m["_rev"] != "2-b" || m["_id"] != "a" {
		t.Fatalf("BulkGet a@2-b = %v", m)
	}
	// What BulkGet returns, BulkDocs replicates identically elsewhere.
	res, err := st.BulkDocs(ctx, got)
	if err != nil || len(res) != 3 || res[0].Error != "" {
		t.Fatalf("re-writing BulkGet output: %v %v", res, err)
	}
}

func testChangesOrder(t *testing.T, st store.Store, p Profile) {
	if page, err := st.Changes(ctx, engine.ChangesRequest{}); err != nil || len(page.Results) != 0 || page.LastSeq == "" {
		t.Fatalf("empty feed = %+v, %v", page, err)
	}
	for i := range 10 {
		bulk(t, st, rdoc(fmt.Sprintf("d%d", i), 1, []string{"a"}, false, nil))
	}
	// d3 updated: it moves to the end and appears once.
	bulk(t, st, rdoc("d3", 2, []string{"b", "a"}, false, nil))
	want := []string{"d0", "d1", "d2", "d4", "d5", "d6", "d7", "d8", "d9", "d3"}
	for _, limit := range []int{0, 1, 3, 10, 100} {
		cs, last := allChanges(t, st, "", limit, "")
		if !reflect.DeepEqual(ids(cs), want) {
			t.Fatalf("limit %d: %v, want %v", limit, ids(cs), want)
		}
		seen := map[string]bool{}
		for _, c := range cs {
			if seen[c.Seq] {
				t.Fatalf("seq %s twice", c.Seq)
			}
			seen[c.Seq] = true
		}
		if info, _ := st.Info(ctx); info.UpdateSeq != last {
			t.Fatalf("LastSeq %s, UpdateSeq %s", last, info.UpdateSeq)
		}
	}
	// Resume from the middle: a seq of a row resumes right after it.
	cs, _ := allChanges(t, st, "", 0, "")
	rest, last := allChanges(t, st, cs[4].Seq, 0, "")
	if !reflect.DeepEqual(ids(rest), want[5:]) {
		t.Fatalf("resume after %s: %v", cs[4].Seq, ids(rest))
	}
	page, err := st.Changes(ctx, engine.ChangesRequest{Limit: 3})
	if err != nil || len(page.Results) != 3 || page.Pending == 0 {
		t.Fatalf("first page of 3: %+v, %v (Pending must not be 0 with more to come)", page, err)
	}
	// Nothing new: an empty page that keeps LastSeq.
	page, err = st.Changes(ctx, engine.ChangesRequest{Since: last})
	if err != nil || len(page.Results) != 0 || page.LastSeq != last {
		t.Fatalf("caught-up page = %+v, %v", page, err)
	}
	bulk(t, st, rdoc("d0", 2, []string{"b", "a"}, false, nil))
	if cs, _ := allChanges(t, st, last, 0, ""); !reflect.DeepEqual(ids(cs), []string{"d0"}) {
		t.Fatalf("after one more write: %v", ids(cs))
	}
	if _, err := st.Changes(ctx, engine.ChangesRequest{Since: "not-a-seq"}); err == nil && !p.LenientSince {
		t.Fatal("Changes with a foreign since: no error")
	}
}

func testChangesLeaves(t *testing.T, st store.Store) {
	bulk(t, st, rdoc("x", 2, []string{"b", "a"}, false, nil), rdoc("x", 2, []string{"c", "a"}, false, nil),
		rdoc("x", 3, []string{"d", "e", "a"}, true, nil))
	cs, _ := allChanges(t, st, "", 0, "")
	if len(cs) != 1 || !reflect.DeepEqual(cs[0].Revs, []string{"2-c", "2-b", "3-d"}) || cs[0].Deleted {
		t.Fatalf("changes = %+v, want leaves [2-c 2-b 3-d], winner first", cs)
	}
}

func selectorDocs(t *testing.T, st store.Store) {
	bulk(t, st,
		rdoc("h:1", 1, []string{"a"}, false, map[string]any{"type": "leaf", "data": "x"}),
		rdoc("p", 1, []string{"a"}, false, map[string]any{"type": "plain", "size": 3.0}),
		rdoc("n", 1, []string{"a"}, false, map[string]any{"type": "newnote", "size": 5.0, "deleted": true}),
		rdoc("notype", 1, []string{"a"}, false, map[string]any{"size": 3.0}),
		rdoc("h:2", 1, []string{"a"}, false, map[string]any{"type": "leaf", "data": "y"}),
		rdoc("gone", 1, []string{"a"}, true, nil),
	)
}

func testSelector(t *testing.T, st store.Store, p Profile) {
	selectorDocs(t, st)
	cases := []struct{ sel, want string }{
		{`{"type":{"$ne":"leaf"}}`, "p n"},
		{`{"type":"leaf"}`, "h:1 h:2"},
		{`{"type":{"$eq":"plain"}}`, "p"},
		{`{"type":{"$in":["plain","newnote"]}}`, "p n"},
		{`{"type":{"$nin":["leaf"]}}`, "p n"},
		{`{"type":{"$exists":false}}`, "notype gone"},
		{`{"deleted":{"$exists":true}}`, "n"},
		{`{"size":3}`, "p notype"},
		{`{"type":{"$ne":"leaf","$exists":true},"size":{"$in":[3,4]}}`, "p"},
		{`{"$and":[{"type":{"$ne":"leaf"}},{"size":5}]}`, "n"},
		{`{"_id":{"$in":["p","h:2"]}}`, "p h:2"},
		{`{"_deleted":true}`, "gone"},
		{`{}`, "h:1 p n notype h:2 gone"},
		{`{"type":"nothing"}`, ""},
	}
	for _, c := range cases {
		for _, limit := range []int{0, 1} {
			cs, last := allChanges(t, st, "", limit, c.sel)
			got, want := ids(cs), strings.Fields(c.want)
			if p.SelectorIDOrder {
				got, want = sorted(got), sorted(want)
			}
			if got := strings.Join(got, " "); got != strings.Join(want, " ") {
				t.Errorf("selector %s limit %d: %q, want %q", c.sel, limit, got, c.want)
			}
			// LastSeq advances past the documents that do not match.
			info, _ := st.Info(ctx)
			if last != info.UpdateSeq {
				t.Errorf("selector %s: LastSeq %s, UpdateSeq %s", c.sel, last, info.UpdateSeq)
			}
		}
	}
}

func testSelectorUnsupported(t *testing.T, st store.Store) {
	selectorDocs(t, st)
	for _, sel := range []string{`{"$or":[{"type":"leaf"}]}`, `{"type":{"$regex":"^l"}}`,
		`{"a.b":1}`, `{"a":{"b":1}}`, `{"size":{"$gt":1}}`} {
		if _, err := st.Changes(ctx, engine.ChangesRequest{Selector: raw(sel)}); !errors.Is(err, engine.ErrUnsupported) {
			t.Errorf("selector %s: %v, want ErrUnsupported", sel, err)
		}
	}
	for _, sel := range []string{`[1]`, `"x"`, `{"type":{"$in":"leaf"}}`} {
		if _, err := st.Changes(ctx, engine.ChangesRequest{Selector: raw(sel)}); err == nil {
			t.Errorf("selector %s: no error", sel)
		}
	}
}

func testLongpoll(t *testing.T, st store.Store) {
	bulk(t, st, rdoc("a", 1, []string{"a"}, false, nil))
	info, _ := st.Info(ctx)
	type res struct {
		page engine.ChangesPage
		err  error
	}
	wait := func(c context.Context, sel string) chan res {
		ch := make(chan res, 1)
		req := engine.ChangesRequest{Since: info.UpdateSeq, Wait: true}
		if sel != "" {
			req.Selector = raw(sel)
		}
		go func() {
			p, err := st.Changes(c, req)
			ch <- res{p, err}
		}()
		return ch
	}
	// Wakes on a write.
	ch := wait(ctx, "")
	time.Sleep(20 * time.Millisecond)
	select {
	case r := <-ch:
		t.Fatalf("longpoll returned before any write: %+v %v", r.page, r.err)
	default:
	}
	bulk(t, st, rdoc("b", 1, []string{"a"}, false, nil))
	select {
	case r := <-ch:
		if r.err != nil || !reflect.DeepEqual(ids(r.page.Results), []string{"b"}) {
			t.Fatalf("longpoll = %+v, %v", r.page, r.err)
		}
		info, _ = st.Info(ctx)
	case <-time.After(5 * time.Second):
		t.Fatal("longpoll did not wake on a write")
	}
	// With a selector, writes that do not match keep it waiting.
	ch = wait(ctx, `{"type":{"$ne":"leaf"}}`)
	bulk(t, st, rdoc("h:c", 1, []string{"a"}, false, map[string]any{"type": "leaf"}))
	time.Sleep(20 * time.Millisecond)
	bulk(t, st, rdoc("m", 1, []string{"a"}, false, map[string]any{"type": "plain"}))
	select {
	case r := <-ch:
		if r.err != nil || !reflect.DeepEqual(ids(r.page.Results), []string{"m"}) {
			t.Fatalf("longpoll with selector = %+v, %v", r.page, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("longpoll with selector did not wake")
	}
	// Returns ctx.Err() when cancelled.
	info, _ = st.Info(ctx)
	c, cancel := context.WithCancel(ctx)
	ch = wait(c, "")
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case r := <-ch:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled longpoll: %v", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled longpoll did not return")
	}
	// Wait with changes already there returns at once.
	p, err := st.Changes(ctx, engine.ChangesRequest{Wait: true})
	if err != nil || len(p.Results) == 0 {
		t.Fatalf("Wait with pending changes = %+v, %v", p, err)
	}
}

func testLocal(t *testing.T, st store.Store) {
	if _, err := st.GetLocal(ctx, "cp"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("GetLocal absent: %v", err)
	}
	if err := st.PutLocal(ctx, "cp", raw(`{"_id":"_local/cp","last_seq":"1"}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.PutLocal(ctx, "cp", raw(`{"_id":"_local/cp","last_seq":"2"}`)); err != nil {
		t.Fatal(err)
	}
	b, err := st.GetLocal(ctx, "cp")
	if err != nil || decode(t, b)["last_seq"] != "2" {
		t.Fatalf("GetLocal = %s, %v", b, err)
	}
	cs, _ := allChanges(t, st, "", 0, "")
	if len(cs) != 0 {
		t.Fatalf("_local docs in the feed: %+v", cs)
	}
	if info, _ := st.Info(ctx); info.DocCount != 0 {
		t.Fatalf("_local docs counted: %d", info.DocCount)
	}
	wantNotFound(t, st, "cp", store.GetOptions{})
	if res, err := st.BulkDocs(ctx, []json.RawMessage{raw(`{"_id":"_local/x","_rev":"0-1"}`)}); err != nil || res[0].Error == "" {
		t.Fatalf("BulkDocs of a _local id: %+v, %v; want a per-doc error", res, err)
	}
}

func testChunks(t *testing.T, st store.Store) {
	chunks := []engine.Chunk{{ID: "h:a", Data: "alpha"}, {ID: "h:b", Data: "bêta\n"}, {ID: "h:+c", Data: "%=x"}}
	if err := st.PutChunks(ctx, chunks); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetChunks(ctx, []engine.ChunkID{"h:a", "h:b", "h:+c", "h:missing"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[engine.ChunkID]engine.Chunk{"h:a": chunks[0], "h:b": chunks[1], "h:+c": chunks[2]}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("GetChunks = %v", got)
	}
	d := get(t, st, "h:a", store.GetOptions{})
	if d["type"] != "leaf" || d["data"] != "alpha" || revRe.FindStringSubmatch(d["_rev"].(string)) == nil || !strings.HasPrefix(d["_rev"].(string), "1-") {
		t.Fatalf("chunk doc = %v", d)
	}
	// A new chunk's revision is the plug-in's: "1-" + md5 of the UTF-8
	// bytes of JSON.stringify({_id, data, type}) (engine/FORMAT.md §1.4; the
	// values were computed with Node's crypto and coreutils md5sum).
	for id, want := range map[string]string{
		"h:a":  "1-e0465aef5f90592392fa563b1b68abe0", // {"_id":"h:a","data":"alpha","type":"leaf"}
		"h:b":  "1-20e02bec8e08a722e8d06cb9ad532bd2", // {"_id":"h:b","data":"bêta\n","type":"leaf"}
		"h:+c": "1-77744017eef9fa4bc01c24ab608484e8", // {"_id":"h:+c","data":"%=x","type":"leaf"}
	} {
		if got := get(t, st, id, store.GetOptions{})["_rev"]; got != want {
			t.Errorf("chunk %s: revision %v, the plug-in gives %s", id, got, want)
		}
	}
	// Idempotent: no new revision and no new change.
	info0, _ := st.Info(ctx)
	if err := st.PutChunks(ctx, chunks[:1]); err != nil {
		t.Fatal(err)
	}
	info1, _ := st.Info(ctx)
	if info0.UpdateSeq != info1.UpdateSeq || info1.DocCount != 3 {
		t.Fatalf("re-putting a chunk: %+v → %+v", info0, info1)
	}
	cs, _ := allChanges(t, st, "", 0, `{"type":"leaf"}`)
	if len(cs) != 3 {
		t.Fatalf("chunks in the feed: %v", ids(cs))
	}
	// A deleted chunk is absent; putting it again brings it back.
	rev := d["_rev"].(string)
	if _, err := st.Put(ctx, raw(`{"_id":"h:a","_rev":"`+rev+`","_deleted":true,"type":"leaf","data":"alpha"}`)); err != nil {
		t.Fatal(err)
	}
	got, _ = st.GetChunks(ctx, []engine.ChunkID{"h:a", "h:b"})
	if _, ok := got["h:a"]; ok || len(got) != 1 {
		t.Fatalf("deleted chunk returned: %v", got)
	}
	if err := st.PutChunks(ctx, chunks[:1]); err != nil {
		t.Fatal(err)
	}
	if got, _ = st.GetChunks(ctx, []engine.ChunkID{"h:a"}); got["h:a"] != chunks[0] {
		t.Fatalf("re-put chunk = %v", got)
	}
	// A replicated leaf document is a chunk too.
	bulk(t, st, rdoc("h:r", 1, []string{"q"}, false, map[string]any{"type": "leaf", "data": "remote"}))
	if got, _ = st.GetChunks(ctx, []engine.ChunkID{"h:r"}); got["h:r"].Data != "remote" {
		t.Fatalf("replicated chunk = %v", got)
	}
	// Put (new_edits=true, such as a PUT through the relay) of a new chunk
	// gives the plug-in's revision too, whatever the order of its keys.
	const b2 = "1-93ab6ca3338853b96450d4b954d1d5d2" // {"_id":"h:b2","data":"bêta\n","type":"leaf"}
	if rev, err := st.Put(ctx, raw(`{"type":"leaf","data":"bêta\n","_id":"h:b2"}`)); err != nil || rev != b2 {
		t.Errorf("Put of a new chunk = %s, %v; want the plug-in's %s", rev, err, b2)
	}
	// A body the plug-in never hashes (the remote form, with e_, whose
	// plug-in revision was computed over the plaintext) keeps the store's
	// own rule.
	if rev, err := st.Put(ctx, raw(`{"_id":"h:+e","data":"%=x","type":"leaf","e_":true}`)); err != nil || rev == store.ChunkRev("h:+e", "%=x") || !revRe.MatchString(rev) {
		t.Errorf("Put of an encrypted chunk = %s, %v", rev, err)
	}
}

func testBigBatches(t *testing.T, st store.Store) {
	const n = 5000
	docs := make([]json.RawMessage, n)
	for i := range docs {
		docs[i] = rdoc(fmt.Sprintf("doc%05d", i), 1, []string{"a"}, false, map[string]any{"type": "plain", "i": float64(i)})
	}
	bulk(t, st, docs...)
	chunks := make([]engine.Chunk, n)
	for i := range chunks {
		chunks[i] = engine.Chunk{ID: fmt.Sprintf("h:%05d", i), Data: strings.Repeat("x", i%100)}
	}
	if err := st.PutChunks(ctx, chunks); err != nil {
		t.Fatal(err)
	}
	cs, _ := allChanges(t, st, "", 0, `{"type":{"$ne":"leaf"}}`)
	if len(cs) != n {
		t.Fatalf("%d metadata changes, want %d", len(cs), n)
	}
	cs, _ = allChanges(t, st, "", 997, "")
	if len(cs) != 2*n {
		t.Fatalf("%d changes in pages of 997, want %d", len(cs), 2*n)
	}
	want := make([]engine.ChunkID, n)
	for i := range want {
		want[i] = chunks[i].ID
	}
	got, err := st.GetChunks(ctx, want)
	if err != nil || len(got) != n || got["h:04321"].Data != chunks[4321].Data {
		t.Fatalf("GetChunks of %d: %d, %v", n, len(got), err)
	}
	if info, _ := st.Info(ctx); info.DocCount != 2*n {
		t.Fatalf("DocCount = %d", info.DocCount)
	}
}

func testInvalid(t *testing.T, st store.Store) {
	res, err := st.BulkDocs(ctx, []json.RawMessage{
		raw(`{"_id":"ok","_rev":"1-a"}`),
		raw(`{"_id":"norev"}`),
		raw(`[1,2]`),
		raw(`{"_rev":"1-a"}`),
		raw(`{"_id":"bad","_rev":"x"}`),
		raw(`{"_id":"badrevs","_rev":"2-a","_revisions":{"start":2,"ids":["b","a"]}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if (i == 0) != (r.Error == "") {
			t.Errorf("result %d = %+v", i, r)
		}
	}
	for _, d := range []string{`{"v":1}`, `{"_id":"_bad"}`, `null`, `{"_id":"x","_rev":"nope"}`} {
		if _, err := st.Put(ctx, raw(d)); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Put %s: %v, want ErrInvalid", d, err)
		}
	}
	if _, err := st.Put(ctx, raw(`{"_id":"_design/x","views":{}}`)); err != nil {
		t.Errorf("design doc: %v", err)
	}
}

func testAllDocs(t *testing.T, st store.Store) {
	bulk(t, st, rdoc("c", 1, []string{"a"}, false, nil), rdoc("a", 1, []string{"a"}, false, nil),
		rdoc("b", 1, []string{"a"}, true, nil), rdoc("d", 2, []string{"z", "a"}, false, nil))
	all, err := st.AllDocs(ctx, store.AllDocsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(all, []store.DocInfo{{ID: "a", Rev: "1-a"}, {ID: "c", Rev: "1-a"}, {ID: "d", Rev: "2-z"}}) {
		t.Fatalf("AllDocs = %v", all)
	}
	part, _ := st.AllDocs(ctx, store.AllDocsOptions{StartKey: "b", EndKey: "c"})
	lim, _ := st.AllDocs(ctx, store.AllDocsOptions{StartKey: "b", Limit: 1})
	if !reflect.DeepEqual(part, []store.DocInfo{{ID: "c", Rev: "1-a"}}) || !reflect.DeepEqual(lim, part) {
		t.Fatalf("AllDocs ranges = %v, %v", part, lim)
	}
}

func testConcurrent(t *testing.T, st store.Store) {
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if _, err := st.BulkDocs(ctx, []json.RawMessage{rdoc(fmt.Sprintf("w%d-%d", w, i), 1, []string{"a"}, false, nil)}); err != nil {
					t.Error(err)
				}
				if err := st.PutChunks(ctx, []engine.Chunk{{ID: fmt.Sprintf("h:%d-%d", w, i), Data: "d"}}); err != nil {
					t.Error(err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			since := ""
			for range 50 {
				p, err := st.Changes(ctx, engine.ChangesRequest{Since: since, Limit: 7})
				if err != nil {
					t.Error(err)
					return
				}
				since = p.LastSeq
				if _, err := st.GetChunks(ctx, []engine.ChunkID{"h:0-1"}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	cs, _ := allChanges(t, st, "", 13, "")
	if len(cs) != 400 {
		t.Fatalf("%d changes after concurrent writes, want 400", len(cs))
	}
}

func testCancelAndClose(t *testing.T, st store.Store) {
	c, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := st.Changes(c, engine.ChangesRequest{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Changes with a cancelled ctx: %v", err)
	}
	if _, err := st.BulkDocs(c, []json.RawMessage{rdoc("a", 1, []string{"a"}, false, nil)}); !errors.Is(err, context.Canceled) {
		t.Errorf("BulkDocs with a cancelled ctx: %v", err)
	}
	if err := st.PutChunks(c, []engine.Chunk{{ID: "h:a", Data: "x"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("PutChunks with a cancelled ctx: %v", err)
	}
	if err := st.Compact(c); !errors.Is(err, context.Canceled) {
		t.Errorf("Compact with a cancelled ctx: %v", err)
	}
	info, _ := st.Info(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := st.Changes(ctx, engine.ChangesRequest{Since: info.UpdateSeq, Wait: true})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("waiting Changes at Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake a waiting Changes")
	}
	if _, err := st.Info(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Info after Close: %v", err)
	}
	if _, err := st.GetChunks(ctx, []engine.ChunkID{"h:a"}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("GetChunks after Close: %v", err)
	}
	if err := st.Compact(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Compact after Close: %v", err)
	}
	if _, err := st.RevsLimit(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("RevsLimit after Close: %v", err)
	}
}
