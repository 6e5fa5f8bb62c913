package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Cases for input a hostile or broken client may send: batches
// of local edits, the id and revision size limits, and long _revisions.

// testPutBatch: PutBatch writes each edit as Put would, in order; a
// conflict or an invalid document is a per-document result that does not
// stop the others.
func testPutBatch(t *testing.T, st store.Store, p Profile) {
	first := put(t, st, `{"_id":"old","v":0}`)
	res, err := st.PutBatch(ctx, []json.RawMessage{
		raw(`{"_id":"a","v":1}`),
		raw(`{"_id":"a","v":2}`), // a exists now: no _rev is a conflict
		raw(`{"_id":"old","_rev":"` + first + `","v":1}`),
		raw(`{"_id":"old","_rev":"` + first + `","v":2}`), // no longer a leaf
		raw(`{"_id":"_bad"}`),
		raw(`{"_id":"b","_deleted":true}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"", "conflict", "", "conflict", "bad_request", ""}
	if len(res) != len(want) {
		t.Fatalf("%d results for %d documents", len(res), len(want))
	}
	for i, r := range res {
		if r.Error != want[i] || (r.Error == "") != (r.Rev != "") {
			t.Errorf("result %d = %+v, want error %q", i, r, want[i])
		}
	}
	if res[0].ID != "a" || res[4].ID != "_bad" {
		t.Errorf("result ids %q, %q", res[0].ID, res[4].ID)
	}
	if d := get(t, st, "a", store.GetOptions{}); d["v"] != 1.0 || d["_rev"] != res[0].Rev {
		t.Errorf("a = %v", d)
	}
	if d := get(t, st, "old", store.GetOptions{}); d["v"] != 1.0 || d["_rev"] != res[2].Rev || !strings.HasPrefix(res[2].Rev, "2-") {
		t.Errorf("old = %v", d)
	}
	wantNotFound(t, st, "b", store.GetOptions{})
	// The revision is Put's for the same edit.
	if rev := put(t, st, `{"_id":"c","v":1}`); rev != mustPutBatch(t, st, `{"_id":"d","v":1}`)[0].Rev && !p.RandomRevs {
		t.Errorf("Put and PutBatch give different first revisions for the same body")
	}
	if res, err := st.PutBatch(ctx, nil); err != nil || len(res) != 0 {
		t.Errorf("empty batch: %v, %v", res, err)
	}
}

func mustPutBatch(t *testing.T, st store.Store, docs ...string) []engine.BulkDocResult {
	t.Helper()
	in := make([]json.RawMessage, len(docs))
	for i, d := range docs {
		in[i] = raw(d)
	}
	res, err := st.PutBatch(ctx, in)
	if err != nil {
		t.Fatalf("PutBatch: %v", err)
	}
	return res
}

// testIDLimits: an id over MaxIDLength, a _local id over MaxLocalIDLength
// and a revision over MaxRevLength are refused per document (ErrInvalid,
// or a "bad_request" result) and leave nothing; ids and revisions at the
// limits are stored, their history kept and compacted.
func testIDLimits(t *testing.T, st store.Store) {
	long := strings.Repeat("x", store.MaxIDLength+1)
	atLimit := strings.Repeat("y", store.MaxIDLength)
	res, err := st.BulkDocs(ctx, []json.RawMessage{
		rdoc("before", 1, []string{"a"}, false, nil),
		rdoc(long, 1, []string{"a"}, false, nil),
		rdoc("after", 1, []string{"a"}, false, nil),
		raw(`{"_id":"longrev","_rev":"1-` + strings.Repeat("f", store.MaxRevLength) + `"}`),
	})
	if err != nil {
		t.Fatalf("BulkDocs with an over-long id: %v, want per-document results", err)
	}
	for i, want := range []string{"", "bad_request", "", "bad_request"} {
		if res[i].Error != want {
			t.Errorf("BulkDocs result %d = %+v, want error %q", i, res[i], want)
		}
	}
	if !strings.Contains(res[1].Reason, fmt.Sprint(store.MaxIDLength)) {
		t.Errorf("reason %q does not name the limit", res[1].Reason)
	}
	if _, err := st.Put(ctx, raw(`{"_id":"`+long+`"}`)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Put of an over-long id: %v, want ErrInvalid", err)
	}
	pb := mustPutBatch(t, st, `{"_id":"`+long+`"}`, `{"_id":"pb"}`)
	if pb[0].Error != "bad_request" || pb[1].Error != "" {
		t.Errorf("PutBatch with an over-long id: %+v", pb)
	}
	if err := st.PutChunks(ctx, []engine.Chunk{{ID: "h:" + long, Data: "x"}}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("PutChunks of an over-long id: %v, want ErrInvalid", err)
	}
	if err := st.PutLocal(ctx, strings.Repeat("l", store.MaxLocalIDLength+1), raw(`{}`)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("PutLocal of an over-long id: %v, want ErrInvalid", err)
	}
	wantNotFound(t, st, long, store.GetOptions{})
	all, _ := st.AllDocs(ctx, store.AllDocsOptions{})
	if len(all) != 3 { // before, after, pb
		t.Errorf("AllDocs after refusals = %v", all)
	}
	// At the limits: an id of MaxIDLength whose earlier revision, of
	// MaxRevLength, keeps its body (the longest key the store writes).
	maxRev := "1-" + strings.Repeat("e", store.MaxRevLength-2)
	bulk(t, st, raw(`{"_id":"`+atLimit+`","_rev":"`+maxRev+`","v":1}`))
	rev2 := put(t, st, `{"_id":"`+atLimit+`","_rev":"`+maxRev+`","v":2}`)
	if d := get(t, st, atLimit, store.GetOptions{}); d["_rev"] != rev2 {
		t.Fatalf("id at the limit: %v", d["_rev"])
	}
	if d := get(t, st, atLimit, store.GetOptions{Rev: maxRev}); d["v"] != 1.0 {
		t.Errorf("earlier revision at the limit: %v", d)
	}
	if err := st.PutLocal(ctx, strings.Repeat("l", store.MaxLocalIDLength), raw(`{"n":1}`)); err != nil {
		t.Errorf("PutLocal at the limit: %v", err)
	}
	if err := st.Compact(ctx); err != nil {
		t.Errorf("Compact: %v", err)
	}
	wantNotFound(t, st, atLimit, store.GetOptions{Rev: maxRev})
}

// testLongRevisions: a replicated revision with far more _revisions than
// the revs limit (and than MaxRevisions) is stored quickly and stemmed to
// the limit. Its history links to what the store had when the link is
// within MaxRevisions ids; further back it is not read, and the old leaf
// stays a conflict, as it would in CouchDB if the sender's revs limit
// were MaxRevisions.
func testLongRevisions(t *testing.T, st store.Store, p Profile) {
	limit := p.revsLimit()
	hashes := func(n int) []string {
		h := make([]string, n)
		for i := range h {
			h[i] = fmt.Sprintf("h%d", n-i) // h[0] is the newest, "h<n>"
		}
		return h
	}
	bulk(t, st, rdoc("far", 5, hashes(5), false, nil), rdoc("near", 1, hashes(1), false, nil))
	n := 3 * store.MaxRevisions
	start := time.Now()
	bulk(t, st, rdoc("far", n, hashes(n), false, map[string]any{"v": 2.0}))
	bulk(t, st, rdoc("near", 2000, hashes(2000), false, nil))
	took := time.Since(start)
	d := get(t, st, "far", store.GetOptions{Revs: true, Conflicts: true})
	revs := d["_revisions"].(map[string]any)
	if ids := revs["ids"].([]any); len(ids) != limit || revs["start"] != float64(n) || d["v"] != 2.0 {
		t.Errorf("_revisions start %v, %d ids (want %d), v %v", revs["start"], len(ids), limit, d["v"])
	}
	if c, _ := d["_conflicts"].([]any); len(c) != 1 || c[0] != "5-h5" {
		t.Errorf("conflicts %v, want [5-h5]: the old leaf is over MaxRevisions back", d["_conflicts"])
	}
	newest, stemmed := fmt.Sprintf("%d-h%d", n, n), fmt.Sprintf("%d-h%d", n-limit, n-limit)
	diff, err := st.RevsDiff(ctx, map[string][]string{"far": {newest, "5-h5", "1-h1", stemmed}})
	if err != nil || !reflect.DeepEqual(p.bodiless(diff["far"], "1-h1"), []string{stemmed}) {
		t.Errorf("RevsDiff after stemming = %v, %v; want only %s missing", diff, err, stemmed)
	}
	// A path reaching the stored leaf within MaxRevisions supersedes it.
	d = get(t, st, "near", store.GetOptions{Conflicts: true})
	if _, ok := d["_conflicts"]; ok || d["_rev"] != "2000-h2000" {
		t.Errorf("near = %v", d)
	}
	if took > 20*time.Second {
		t.Errorf("writing %d revision ids took %v", n, took)
	}
}

// RunAtomic checks that a failing write leaves nothing of its batch: it
// opens stores over backends newBackend returns, wrapped so that the k-th
// key written in a transaction fails with store.ErrStorageFull (a full
// disk), for every k a batch reaches, and checks after each failure that
// the call returned an error wrapping store.ErrStorageFull and that the
// store reads as before (documents, counts, sequence, feed), then that
// the same batch succeeds once the storage has room again.
func RunAtomic(t *testing.T, newBackend func(t *testing.T) store.Backend) {
	batches := []struct {
		name  string
		write func(st store.Store) error
	}{
		{"BulkDocs", func(st store.Store) error {
			var docs []json.RawMessage
			for i := range 20 {
				docs = append(docs, rdoc(fmt.Sprintf("doc%02d", i), 2, []string{"b", "a"}, false, map[string]any{"v": i}))
			}
			docs = append(docs, rdoc("seed", 2, []string{"n", "s"}, false, nil)) // a second leaf of a stored document
			_, err := st.BulkDocs(ctx, docs)
			return err
		}},
		{"PutBatch", func(st store.Store) error {
			docs := []json.RawMessage{raw(`{"_id":"seed","_rev":"1-s","v":2}`)}
			for i := range 20 {
				docs = append(docs, raw(fmt.Sprintf(`{"_id":"doc%02d","v":%d}`, i, i)))
			}
			_, err := st.PutBatch(ctx, docs)
			return err
		}},
		{"PutChunks", func(st store.Store) error {
			var cs []engine.Chunk
			for i := range 20 {
				cs = append(cs, engine.Chunk{ID: fmt.Sprintf("h:c%02d", i), Data: "data"})
			}
			return st.PutChunks(ctx, cs)
		}},
	}
	for _, b := range batches {
		for _, keep := range []int{0, store.KeepAllBodies} {
			t.Run(fmt.Sprintf("%s/KeepBodies=%d", b.name, keep), func(t *testing.T) {
				fb := &faultyBackend{Backend: newBackend(t), failAt: -1}
				st, err := store.Open(fb, store.Options{Name: "atomic", KeepBodies: keep})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				bulk(t, st, rdoc("seed", 1, []string{"s"}, false, map[string]any{"v": 1}))
				before := snapshot(t, st)
				for k := 1; ; k++ {
					fb.failAt, fb.puts = k, 0
					err := b.write(st)
					if err == nil {
						if k == 1 {
							t.Fatal("the batch wrote nothing")
						}
						break // k is past the batch's last write
					}
					if !errors.Is(err, store.ErrStorageFull) {
						t.Fatalf("write failing at key %d: %v, want an error wrapping store.ErrStorageFull", k, err)
					}
					if after := snapshot(t, st); after != before {
						t.Fatalf("after a write failing at key %d the store changed:\nbefore %s\nafter  %s", k, before, after)
					}
				}
				if snapshot(t, st) == before {
					t.Fatal("the batch changed nothing once the storage had room")
				}
			})
		}
	}
}

// snapshot describes what a store reads as: info, feed and every
// document with its conflicts and history.
func snapshot(t *testing.T, st store.Store) string {
	t.Helper()
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seq %s docs %d;", info.UpdateSeq, info.DocCount)
	changes, _ := allChanges(t, st, "", 0, "")
	for _, c := range changes {
		d, err := st.Get(ctx, c.ID, store.GetOptions{Revs: true, Conflicts: true, RevsInfo: true})
		fmt.Fprintf(&b, " %s@%s %v %s %v;", c.ID, c.Seq, c.Revs, d, err)
	}
	return b.String()
}

// faultyBackend fails the failAt-th Put of each write transaction with
// store.ErrStorageFull, as a full disk would (failAt < 0: never).
type faultyBackend struct {
	store.Backend
	failAt, puts int
}

func (f *faultyBackend) Update(fn func(store.Tx) error) error {
	return f.Backend.Update(func(tx store.Tx) error {
		return fn(&faultyTx{Tx: tx, f: f})
	})
}

type faultyTx struct {
	store.Tx
	f *faultyBackend
}

func (t *faultyTx) Put(b store.Bucket, key, value []byte) error {
	t.f.puts++
	if t.f.puts == t.f.failAt {
		return fmt.Errorf("write: %w", store.ErrStorageFull)
	}
	return t.Tx.Put(b, key, value)
}
