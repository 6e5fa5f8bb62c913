package couchdb_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine/store"
)

// perDoc hides the Store's BatchReader, so that store.GetRevsMany and
// store.GetWinners take the per-document path.
type perDoc struct{ store.Store }

// canonical decodes JSON for a comparison that ignores the order of
// object fields.
func canonical(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// revDocsJSON turns GetRevs answers into comparable values.
func revDocsJSON(res [][]store.RevDocs) any {
	out := make([][]map[string]any, len(res))
	for i, rr := range res {
		for _, r := range rr {
			docs := make([]json.RawMessage, len(r.Docs))
			copy(docs, r.Docs)
			out[i] = append(out[i], map[string]any{"rev": r.Rev, "docs": docs})
		}
	}
	return out
}

// batchFixture writes documents with conflicts, deleted leaves, a deleted
// document and a history, and returns the revisions it made.
func batchFixture(t *testing.T, st store.Store) {
	t.Helper()
	h := func(c byte) string { return strings.Repeat(string(c), 32) }
	docs := []string{
		// "conf": 1-a → 2-b, and conflicting 1-c, and 2-d deleted on top of 1-a.
		fmt.Sprintf(`{"_id":"conf","_rev":"2-%s","_revisions":{"start":2,"ids":["%s","%s"]},"v":"b"}`, h('b'), h('b'), h('a')),
		fmt.Sprintf(`{"_id":"conf","_rev":"1-%s","v":"c"}`, h('c')),
		fmt.Sprintf(`{"_id":"conf","_rev":"2-%s","_revisions":{"start":2,"ids":["%s","%s"]},"_deleted":true}`, h('d'), h('d'), h('a')),
		// "gone": deleted at 2-f.
		fmt.Sprintf(`{"_id":"gone","_rev":"2-%s","_revisions":{"start":2,"ids":["%s","%s"]},"_deleted":true}`, h('f'), h('f'), h('e')),
		// "plain": a single revision; "long": three generations.
		fmt.Sprintf(`{"_id":"plain","_rev":"1-%s","x":1}`, h('1')),
		fmt.Sprintf(`{"_id":"long","_rev":"3-%s","_revisions":{"start":3,"ids":["%s","%s","%s"]},"y":[1,2]}`, h('9'), h('9'), h('8'), h('7')),
		fmt.Sprintf(`{"_id":"_design/d","_rev":"1-%s","views":{}}`, h('2')),
	}
	raw := make([]json.RawMessage, len(docs))
	for i, d := range docs {
		raw[i] = json.RawMessage(d)
	}
	res, err := st.BulkDocs(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error != "" {
			t.Fatalf("write %s: %s %s", r.ID, r.Error, r.Reason)
		}
	}
}

// TestStoreBatchEquivalence: GetRevsMany and GetWinners answer exactly as
// GetRevs, Get and BulkGet one document at a time do: conflicts, deleted
// leaves, a deleted document, missing documents and revisions, unreadable
// ids, latest=true and _revisions.
func TestStoreBatchEquivalence(t *testing.T) {
	s := envCouch(t)
	st := openStore(t, s, randomDBName())
	batchFixture(t, st)
	h := func(c byte) string { return strings.Repeat(string(c), 32) }
	ids := []string{"conf", "gone", "plain", "long", "_design/d", "absent", "_local/x", ""}
	revs := []string{"1-" + h('a'), "2-" + h('b'), "1-" + h('c'), "2-" + h('d'), "2-" + h('f'), "1-" + h('e'),
		"1-" + h('1'), "3-" + h('9'), "2-" + h('8'), "1-" + h('7'), "1-" + h('2'), "9-" + h('0'), "bogus"}
	var reqs []store.RevsRequest
	for _, id := range ids {
		for _, hist := range []bool{false, true} {
			reqs = append(reqs,
				store.RevsRequest{ID: id, Opts: store.RevsOptions{All: true, History: hist}},
				store.RevsRequest{ID: id, Opts: store.RevsOptions{Revs: revs, History: hist}},
				store.RevsRequest{ID: id, Opts: store.RevsOptions{Revs: revs, Latest: true, History: hist}},
				store.RevsRequest{ID: id, Opts: store.RevsOptions{Revs: []string{revs[0], revs[0]}, History: hist}},
			)
		}
	}
	got, err := store.GetRevsMany(t.Context(), st, reqs)
	if err != nil {
		t.Fatal(err)
	}
	want, err := store.GetRevsMany(t.Context(), perDoc{st}, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(reqs) {
		t.Fatalf("GetRevsMany: %d answers for %d requests", len(got), len(reqs))
	}
	for i := range reqs {
		g, w := canonical(t, revDocsJSON(got[i:i+1])), canonical(t, revDocsJSON(want[i:i+1]))
		if !reflect.DeepEqual(g, w) {
			t.Errorf("request %d %+v:\nbatched  %v\nper doc  %v", i, reqs[i], g, w)
		}
	}
	// The fixture's answers are what CouchDB's are, not only the same.
	all := got[0] // conf, All, no history: live winner 2-b, then 1-c, then the deleted 2-d
	if len(all) != 3 || all[0].Rev != "2-"+h('b') || all[1].Rev != "1-"+h('c') || all[2].Rev != "2-"+h('d') {
		t.Errorf("conf's leaves = %+v", all)
	}
	for _, conflicts := range []bool{false, true} {
		keys := append([]string{"conf", "plain", "conf"}, ids...)
		gw, err := store.GetWinners(t.Context(), st, keys, conflicts)
		if err != nil {
			t.Fatal(err)
		}
		ww, err := store.GetWinners(t.Context(), perDoc{st}, keys, conflicts)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			if k == "gone" {
				// The per-document path asks BulkGet for the winner without
				// a revision, which this store cannot answer for a deleted
				// document: it reports it absent. _all_docs says deleted,
				// as CouchDB's _all_docs?keys and the other stores do.
				continue
			}
			if g, w := canonical(t, gw[i]), canonical(t, ww[i]); !reflect.DeepEqual(g, w) {
				t.Errorf("GetWinners(conflicts=%v) %q:\nbatched  %v\nper doc  %v", conflicts, k, g, w)
			}
		}
		if gw[1].Doc == nil || !gw[4].Deleted || gw[4].Rev != "2-"+h('f') || gw[8].Rev != "" || gw[8].Deleted {
			t.Errorf("GetWinners(conflicts=%v) = %+v", conflicts, gw)
		}
	}
}
