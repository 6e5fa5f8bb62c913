package enginetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// EndpointSuite runs the conformance tests of engine.Endpoint against the
// databases newEndpoint returns. Each call must return a new, empty
// database that no other test writes to, and a cleanup function (nil if
// none) that the suite calls when the test ends.
func EndpointSuite(t *testing.T, newEndpoint func(t *testing.T) (engine.Endpoint, func())) {
	tests := []struct {
		name string
		fn   func(t *testing.T, ep engine.Endpoint)
	}{
		{"Info", testEndpointInfo},
		{"ChangesPaging", testEndpointChangesPaging},
		{"ChangesSince", testEndpointChangesSince},
		{"ChangesSelector", testEndpointChangesSelector},
		{"ChangesLeavesAndTombstones", testEndpointLeaves},
		{"ChangesWait", testEndpointChangesWait},
		{"RevsDiff", testEndpointRevsDiff},
		{"BulkGet", testEndpointBulkGet},
		{"BulkDocsNewEditsFalse", testEndpointNewEditsFalse},
		{"Local", testEndpointLocal},
		{"CancelledContext", testEndpointCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ep, cleanup := newEndpoint(t)
			if cleanup != nil {
				t.Cleanup(cleanup)
			}
			tc.fn(t, ep)
		})
	}
}

func rawf(format string, a ...any) json.RawMessage { return json.RawMessage(fmt.Sprintf(format, a...)) }

// seedIDs are the documents seedEndpoint writes, sorted.
var seedIDs = []string{"h:suite0", "h:suite1", "h:suite2", "note-0", "note-1", "note-2", "note-3"}

// seedEndpoint writes 4 metadata-like documents (at revision 2, with
// their history) and 3 chunks with new_edits=false.
func seedEndpoint(t *testing.T, ep engine.Endpoint) {
	t.Helper()
	var docs []json.RawMessage
	for i := range 4 {
		docs = append(docs, rawf(`{"_id":"note-%d","_rev":"2-b%d","_revisions":{"start":2,"ids":["b%d","a%d"]},"type":"plain","path":"n%d.md","children":[]}`, i, i, i, i, i))
	}
	for i := range 3 {
		docs = append(docs, rawf(`{"_id":"h:suite%d","_rev":"1-c%d","type":"leaf","data":"piece %d"}`, i, i, i))
	}
	bulkDocs(t, ep, docs...)
}

func bulkDocs(t *testing.T, ep engine.Endpoint, docs ...json.RawMessage) {
	t.Helper()
	res, err := ep.BulkDocs(t.Context(), docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error != "" {
			t.Fatalf("bulk docs %s: %s %s", r.ID, r.Error, r.Reason)
		}
	}
}

// readChanges reads the feed from since to its end in pages of limit
// (0: the endpoint's default), checking each page against the limit and
// Pending, and returns every row and the last sequence.
func readChanges(t *testing.T, ep engine.Endpoint, since string, limit int, selector string) ([]engine.Change, string) {
	t.Helper()
	var all []engine.Change
	var pages []engine.ChangesPage
	for {
		if len(pages) > 100 {
			t.Fatal("the changes feed never ends")
		}
		req := engine.ChangesRequest{Since: since, Limit: limit}
		if selector != "" {
			req.Selector = json.RawMessage(selector)
		}
		page, err := ep.Changes(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if limit > 0 && len(page.Results) > limit {
			t.Fatalf("a page of %d rows, limit %d", len(page.Results), limit)
		}
		for _, c := range page.Results {
			if c.Seq == "" || len(c.Revs) == 0 || c.ID == "" {
				t.Fatalf("change %+v lacks its id, sequence or revisions", c)
			}
		}
		if page.LastSeq == "" {
			t.Fatalf("a page without LastSeq: %+v", page)
		}
		pages = append(pages, page)
		all = append(all, page.Results...)
		since = page.LastSeq
		if len(page.Results) == 0 || (limit > 0 && len(page.Results) < limit) || (limit == 0 && selector != "") {
			break
		}
	}
	// Pending, when known, counts the rows after each page (an upper
	// bound under a selector, which the server may count unfiltered).
	left := len(all)
	for _, p := range pages {
		left -= len(p.Results)
		if p.Pending >= 0 && (p.Pending < left || (selector == "" && p.Pending != left)) {
			t.Fatalf("page of %d rows: Pending %d, but %d rows follow", len(p.Results), p.Pending, left)
		}
	}
	return all, since
}

func changeIDs(cs []engine.Change) []string {
	ids := make([]string, 0, len(cs))
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	slices.Sort(ids)
	return ids
}

func testEndpointInfo(t *testing.T, ep engine.Endpoint) {
	empty, err := ep.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if empty.DocCount != 0 {
		t.Fatalf("an empty database counts %d documents", empty.DocCount)
	}
	seedEndpoint(t, ep)
	info, err := ep.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.DocCount != 7 || info.UpdateSeq == "" || info.UpdateSeq == empty.UpdateSeq {
		t.Fatalf("info %+v (empty: %+v): want 7 documents and a new update sequence", info, empty)
	}
}

func testEndpointChangesPaging(t *testing.T, ep engine.Endpoint) {
	seedEndpoint(t, ep)
	cs, _ := readChanges(t, ep, "", 3, "")
	if got := changeIDs(cs); !slices.Equal(got, seedIDs) {
		t.Fatalf("paged ids %v, want %v", got, seedIDs)
	}
	all, _ := readChanges(t, ep, "", 0, "")
	if got := changeIDs(all); !slices.Equal(got, seedIDs) {
		t.Fatalf("one read: ids %v, want %v", got, seedIDs)
	}
}

// Since continues after a sequence: nothing is listed twice, and a
// document written later is the only row after the last sequence.
func testEndpointChangesSince(t *testing.T, ep engine.Endpoint) {
	seedEndpoint(t, ep)
	_, last := readChanges(t, ep, "", 0, "")
	if cs, _ := readChanges(t, ep, last, 0, ""); len(cs) != 0 {
		t.Fatalf("after the last sequence: %+v", cs)
	}
	bulkDocs(t, ep, rawf(`{"_id":"late","_rev":"1-l","type":"plain","path":"late.md","children":[]}`))
	cs, _ := readChanges(t, ep, last, 0, "")
	if len(cs) != 1 || cs[0].ID != "late" || cs[0].Revs[0] != "1-l" {
		t.Fatalf("after a later write: %+v, want the late document", cs)
	}
	info, err := ep.Info(t.Context())
	if err != nil || info.DocCount != 8 {
		t.Fatalf("info %+v, %v; want 8 documents", info, err)
	}
}

// The readChunksOnline selector lists only non-chunks, and LastSeq still
// advances past the chunks it filtered out.
func testEndpointChangesSelector(t *testing.T, ep engine.Endpoint) {
	seedEndpoint(t, ep)
	cs, last := readChanges(t, ep, "", 0, `{"type":{"$ne":"leaf"}}`)
	if got, want := changeIDs(cs), seedIDs[3:]; !slices.Equal(got, want) {
		t.Fatalf("selector gave %v, want %v", got, want)
	}
	if rest, _ := readChanges(t, ep, last, 0, ""); len(rest) != 0 {
		t.Fatalf("LastSeq did not advance past the filtered chunks: %v follow", changeIDs(rest))
	}
}

// A document's row names every leaf, the winner first (the longer
// branch, then the greater revision id); a deleted winner is Deleted.
func testEndpointLeaves(t *testing.T, ep engine.Endpoint) {
	bulkDocs(t, ep,
		rawf(`{"_id":"c","_rev":"2-aaa","_revisions":{"start":2,"ids":["aaa","root"]},"v":1}`),
		rawf(`{"_id":"c","_rev":"2-bbb","_revisions":{"start":2,"ids":["bbb","root"]},"v":2}`),
		rawf(`{"_id":"c","_rev":"3-ccc","_revisions":{"start":3,"ids":["ccc","aaa","root"]},"v":3}`),
		rawf(`{"_id":"gone","_rev":"2-dd","_revisions":{"start":2,"ids":["dd","d0"]},"_deleted":true}`),
	)
	cs, _ := readChanges(t, ep, "", 0, "")
	byID := map[string]engine.Change{}
	for _, c := range cs {
		byID[c.ID] = c
	}
	c := byID["c"]
	if len(c.Revs) != 2 || c.Revs[0] != "3-ccc" || c.Revs[1] != "2-bbb" || c.Deleted {
		t.Fatalf("conflicted document: %+v, want leaves [3-ccc 2-bbb]", c)
	}
	if g := byID["gone"]; !g.Deleted || len(g.Revs) != 1 || g.Revs[0] != "2-dd" {
		t.Fatalf("deleted document: %+v", g)
	}
	if len(cs) != 2 {
		t.Fatalf("%d rows, want one per document: %+v", len(cs), cs)
	}
}

// Wait blocks until a change exists after Since; a context that ends
// first returns its error.
func testEndpointChangesWait(t *testing.T, ep engine.Endpoint) {
	seedEndpoint(t, ep)
	info, err := ep.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		page engine.ChangesPage
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		page, err := ep.Changes(t.Context(), engine.ChangesRequest{Since: info.UpdateSeq, Wait: true})
		got <- answer{page, err}
	}()
	bulkDocs(t, ep, rawf(`{"_id":"late","_rev":"1-x","type":"plain"}`))
	a := <-got
	if a.err != nil || len(a.page.Results) != 1 || a.page.Results[0].ID != "late" {
		t.Fatalf("longpoll gave %+v, %v; want the late document", a.page.Results, a.err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := ep.Changes(ctx, engine.ChangesRequest{Since: a.page.LastSeq, Wait: true}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait that times out: %v, want context.DeadlineExceeded", err)
	}
}

// RevsDiff names, per document, the asked revisions the endpoint lacks.
func testEndpointRevsDiff(t *testing.T, ep engine.Endpoint) {
	seedEndpoint(t, ep)
	diff, err := ep.RevsDiff(t.Context(), map[string][]string{
		"note-0": {"2-b0", "3-zz"}, "h:suite1": {"1-c1"}, "absent": {"1-q"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"note-0": {"3-zz"}, "absent": {"1-q"}}
	if len(diff) != len(want) {
		t.Fatalf("revs diff %v, want %v", diff, want)
	}
	for id, revs := range want {
		if !slices.Equal(diff[id], revs) {
			t.Fatalf("revs diff %v, want %v", diff, want)
		}
	}
}

// docRevisions is what the suite reads of a document from BulkGet.
type docRevisions struct {
	ID        string `json:"_id"`
	Rev       string `json:"_rev"`
	Revisions struct {
		Start int      `json:"start"`
		IDs   []string `json:"ids"`
	} `json:"_revisions"`
	Data string `json:"data"`
	Path string `json:"path"`
}

// BulkGet answers in request order with _revisions, leaving out what the
// endpoint lacks.
func testEndpointBulkGet(t *testing.T, ep engine.Endpoint) {
	seedEndpoint(t, ep)
	docs, err := ep.BulkGet(t.Context(), []engine.DocRev{
		{ID: "h:suite2", Rev: "1-c2"}, {ID: "absent", Rev: "1-q"}, {ID: "note-1", Rev: "9-nope"}, {ID: "note-1", Rev: "2-b1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("bulk get returned %d docs, want 2 (missing revisions left out): %s", len(docs), docs)
	}
	var got [2]docRevisions
	for i, d := range docs {
		if err := json.Unmarshal(d, &got[i]); err != nil {
			t.Fatal(err)
		}
	}
	if got[0].ID != "h:suite2" || got[0].Data != "piece 2" || got[1].ID != "note-1" {
		t.Fatalf("bulk get: %+v", got)
	}
	if got[1].Rev != "2-b1" || got[1].Path != "n1.md" || got[1].Revisions.Start != 2 || !slices.Equal(got[1].Revisions.IDs, []string{"b1", "a1"}) {
		t.Fatalf("note-1 with its history: %+v", got[1])
	}
}

// BulkDocs with new_edits=false keeps each _rev and history, reports no
// conflict for a second branch or a revision written again, and later
// revisions extend the tree.
func testEndpointNewEditsFalse(t *testing.T, ep engine.Endpoint) {
	docs := []json.RawMessage{
		rawf(`{"_id":"d","_rev":"1-aa","type":"plain","n":1}`),
		rawf(`{"_id":"d","_rev":"1-aa","type":"plain","n":1}`),
		rawf(`{"_id":"d","_rev":"1-bb","type":"plain","n":2}`),
		rawf(`{"_id":"e","_rev":"5-ee","_revisions":{"start":5,"ids":["ee","e4","e3"]},"type":"plain"}`),
	}
	res, err := ep.BulkDocs(t.Context(), docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error != "" {
			t.Fatalf("new_edits=false reported %s for %s: %s", r.Error, r.ID, r.Reason)
		}
	}
	bulkDocs(t, ep, rawf(`{"_id":"d","_rev":"2-cc","_revisions":{"start":2,"ids":["cc","bb"]},"type":"plain","n":3}`))
	// Only leaves are asked about: whether an ancestor known only from
	// _revisions is "missing" differs between servers (PouchDB says yes).
	diff, err := ep.RevsDiff(t.Context(), map[string][]string{"d": {"1-aa", "2-cc"}, "e": {"5-ee"}})
	if err != nil || len(diff) != 0 {
		t.Fatalf("revs diff after the writes: %v, %v; want nothing missing", diff, err)
	}
	docs, err = ep.BulkGet(t.Context(), []engine.DocRev{{ID: "d", Rev: "2-cc"}, {ID: "e", Rev: "5-ee"}})
	if err != nil || len(docs) != 2 {
		t.Fatalf("bulk get: %d docs, %v", len(docs), err)
	}
	var d, e docRevisions
	_ = json.Unmarshal(docs[0], &d)
	_ = json.Unmarshal(docs[1], &e)
	if d.Rev != "2-cc" || !slices.Equal(d.Revisions.IDs, []string{"cc", "bb"}) || e.Rev != "5-ee" || e.Revisions.Start != 5 || !slices.Equal(e.Revisions.IDs, []string{"ee", "e4", "e3"}) {
		t.Fatalf("stored revisions: %+v %+v", d, e)
	}
	cs, _ := readChanges(t, ep, "", 0, "")
	for _, c := range cs {
		if c.ID == "d" && (len(c.Revs) != 2 || c.Revs[0] != "2-cc" || c.Revs[1] != "1-aa") {
			t.Fatalf("d's leaves: %v, want [2-cc 1-aa]", c.Revs)
		}
	}
}

// _local documents: absent is ErrNotFound, the last write wins, and they
// are neither in the changes feed nor counted.
func testEndpointLocal(t *testing.T, ep engine.Endpoint) {
	if _, err := ep.GetLocal(t.Context(), "checkpoint"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("absent _local: %v, want ErrNotFound", err)
	}
	for i := range 3 {
		if err := ep.PutLocal(t.Context(), "checkpoint", rawf(`{"last_seq":"%d"}`, i)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	got, err := ep.GetLocal(t.Context(), "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		LastSeq string `json:"last_seq"`
	}
	if err := json.Unmarshal(got, &v); err != nil || v.LastSeq != "2" {
		t.Fatalf("_local = %s, want the last write", got)
	}
	if _, err := ep.GetLocal(t.Context(), "other"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("another absent _local: %v, want ErrNotFound", err)
	}
	if cs, _ := readChanges(t, ep, "", 0, ""); len(cs) != 0 {
		t.Fatalf("changes lists _local documents: %+v", cs)
	}
	if info, err := ep.Info(t.Context()); err != nil || info.DocCount != 0 {
		t.Fatalf("info %+v, %v: _local documents counted", info, err)
	}
}

func testEndpointCancelled(t *testing.T, ep engine.Endpoint) {
	seedEndpoint(t, ep)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := ep.Info(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("info: %v, want context.Canceled", err)
	}
	if _, err := ep.Changes(ctx, engine.ChangesRequest{}); !errors.Is(err, context.Canceled) {
		t.Errorf("changes: %v, want context.Canceled", err)
	}
	if _, err := ep.BulkGet(ctx, []engine.DocRev{{ID: "note-0", Rev: "2-b0"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("bulk get: %v, want context.Canceled", err)
	}
	if _, err := ep.GetLocal(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Errorf("get local: %v, want context.Canceled", err)
	}
}
