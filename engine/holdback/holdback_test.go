package holdback

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/purgatory"
	"github.com/livesync-go/livesync-go/engine/store"
)

// A metadata revision whose chunks the relay does not have is held:
// other clients do not see it in _changes, _all_docs or _bulk_get until
// its chunks are present; when it is released it appears in the feed at a
// sequence no client checkpoint can have passed, so nobody skips it.
func TestPushedMetadataHiddenUntilChunks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		r.push(chunk("h:0"), meta("other.md", "1-o", "h:0")) // a note that is complete
		res := r.push(meta("a.md", "1-a", "h:1", "h:2"))
		if res[0] != (engine.BulkDocResult{ID: "a.md", Rev: "1-a"}) {
			t.Fatalf("held doc answered %+v, want {id, rev} like CouchDB", res[0])
		}

		// A reader syncs now and checkpoints LastSeq.
		cs, checkpoint := r.changes("")
		if got := ids(cs); !reflect.DeepEqual(got, []string{"h:0", "other.md"}) {
			t.Fatalf("feed = %v: the held note must not be in it", got)
		}
		all, _ := r.s.AllDocs(bg, store.AllDocsOptions{})
		if !reflect.DeepEqual(all, []store.DocInfo{{ID: "h:0", Rev: "1-c0"}, {ID: "other.md", Rev: "1-o"}}) {
			t.Fatalf("AllDocs = %v", all)
		}
		if got, _ := r.s.BulkGet(bg, []engine.DocRev{{ID: "a.md", Rev: "1-a"}, {ID: "a.md"}}); len(got) != 0 {
			t.Fatalf("BulkGet served the held note: %s", got)
		}
		for _, opts := range []store.GetOptions{{}, {Rev: "1-a"}} {
			if _, err := r.s.Get(bg, "a.md", opts); !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("Get %+v = %v, want ErrNotFound", opts, err)
			}
		}
		if info, _ := r.s.Info(bg); info.DocCount != 2 {
			t.Fatalf("DocCount = %d", info.DocCount)
		}
		// The pusher is not asked to send it again; other revisions are missing.
		diff, err := r.s.RevsDiff(bg, map[string][]string{"a.md": {"1-a", "2-x"}, "other.md": {"1-o"}, "new.md": {"1-n"}})
		if err != nil || !reflect.DeepEqual(diff, map[string][]string{"a.md": {"2-x"}, "new.md": {"1-n"}}) {
			t.Fatalf("RevsDiff = %v, %v", diff, err)
		}
		if state, revs, ok := r.heldDoc("a.md"); !ok || state != "active" || !reflect.DeepEqual(revs, []string{"1-a"}) {
			t.Fatalf("Held = %+v", r.s.Held())
		}
		if got := r.area("a.md"); !reflect.DeepEqual(got, []string{"1-a"}) {
			t.Fatalf("holding area = %v", got)
		}

		// One chunk is not enough.
		r.push(chunk("h:1"))
		synctest.Wait()
		cs, _ = r.changes(checkpoint)
		if got := ids(cs); !reflect.DeepEqual(got, []string{"h:1"}) {
			t.Fatalf("feed after one chunk = %v", got)
		}
		// The second releases it, after every sequence the reader saw.
		r.push(chunk("h:2"))
		synctest.Wait()
		cs, _ = r.changes(checkpoint)
		if got := ids(cs); !reflect.DeepEqual(got, []string{"h:1", "h:2", "a.md"}) {
			t.Fatalf("feed after the chunks = %v", got)
		}
		if seqNum(t, cs[2].Seq) <= seqNum(t, checkpoint) {
			t.Fatalf("released at seq %s, not after the reader's checkpoint %s", cs[2].Seq, checkpoint)
		}
		b, err := r.s.Get(bg, "a.md", store.GetOptions{Revs: true})
		if err != nil {
			t.Fatal(err)
		}
		var got, want map[string]any
		json.Unmarshal(b, &got)
		json.Unmarshal(meta("a.md", "1-a", "h:1", "h:2"), &want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("served %v\nwant the pushed document %v", got, want)
		}
		if len(r.s.Held()) != 0 || r.area("a.md") != nil {
			t.Fatalf("still held: %+v, area %v", r.s.Held(), r.area("a.md"))
		}
		st := r.s.Stats()
		if st.Holds != 1 || st.Released != 1 || st.WrittenThrough != 1 || st.Held != 0 || st.Mode != ModeReadable {
			t.Fatalf("stats %+v", st)
		}
		// Released: RevsDiff is the store's again.
		if diff, _ := r.s.RevsDiff(bg, map[string][]string{"a.md": {"1-a"}}); len(diff) != 0 {
			t.Fatalf("RevsDiff after release = %v", diff)
		}
	})
}

// "Client-pushed metadata is held with the 3-minute first-hunt delay …
// (its chunks normally follow in the same push)": when they are in the
// same batch, or stored already, nothing is held.
func TestMetadataWithChunksWrittenThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		// Metadata first in the batch, its chunks after it.
		r.push(meta("a.md", "1-a", "h:1", "h:2", "h:1"), chunk("h:1"), chunk("h:2"))
		if r.rev("a.md") != "1-a" {
			t.Fatal("metadata with its chunks in the batch was not written")
		}
		// Chunks stored by an earlier push.
		r.push(meta("b.md", "1-b", "h:2"))
		// No chunks at all (an empty file), a soft deletion, a tombstone.
		r.push(meta("empty.md", "1-e"), tombstone("gone.md", "1-g"))
		if r.rev("b.md") != "1-b" || r.rev("empty.md") != "1-e" {
			t.Fatal("complete metadata not written through")
		}
		if len(r.hunter.Calls()) != 0 || len(r.s.Held()) != 0 {
			t.Fatalf("something was held: %v %+v", r.hunter.Calls(), r.s.Held())
		}
		st := r.s.Stats()
		if st.WrittenThrough != 4 || st.Holds != 0 {
			t.Fatalf("stats %+v", st)
		}
		// A chunk that is deleted in the batch does not count.
		r.push(meta("c.md", "1-c", "h:9"), tombstone("h:9", "1-d"))
		if r.rev("c.md") != "" {
			t.Fatal("metadata written though its only chunk is a tombstone")
		}
	})
}

// Documents that are not file metadata pass through untouched, and bad
// ones get the inner store's answer.
func TestOtherDocumentsPassThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		res, err := r.s.BulkDocs(bg, []json.RawMessage{
			json.RawMessage(`{"_id":"obsydian_livesync_version","_rev":"1-v","version":12}`),
			json.RawMessage(`{"_id":"_design/x","_rev":"1-d","children":["h:1"],"type":"plain"}`),
			json.RawMessage(`{"_id":"foreign","_rev":"1-f","children":["h:1"]}`),
			json.RawMessage(`{"_id":"bad.md","_rev":"zz","children":["h:1"],"type":"plain"}`),
			json.RawMessage(`{"_id":"norev.md","children":["h:1"],"type":"plain"}`),
			json.RawMessage(`[1]`),
		})
		if err != nil {
			t.Fatal(err)
		}
		var errs []string
		for _, x := range res {
			errs = append(errs, x.Error)
		}
		if !reflect.DeepEqual(errs, []string{"", "", "", "bad_request", "bad_request", "bad_request"}) {
			t.Fatalf("results %+v", res)
		}
		if r.rev("foreign") != "1-f" || r.rev("_design/x") != "1-d" || len(r.s.Held()) != 0 {
			t.Fatalf("foreign documents not written through: %+v", r.s.Held())
		}
	})
}

// The purgatory core's timeline for a client push, exact: first hunt
// after 3 minutes, 30 minutes active, 24 hours soft-expired, then
// dropped: never served, even when the chunks arrive later.
func TestHeldTimelineAndExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		r.push(meta("a.md", "1-a", "h:1"))
		at := func(d time.Duration, wantState string) {
			t.Helper()
			r.sleepUntil(d)
			synctest.Wait()
			state, _, ok := r.heldDoc("a.md")
			if !ok {
				state = "gone"
			}
			if state != wantState {
				t.Fatalf("at %v: %s, want %s", d, state, wantState)
			}
		}
		at(30*time.Minute-time.Nanosecond, "active")
		at(30*time.Minute, "soft-expired")
		at(30*time.Minute+24*time.Hour-time.Nanosecond, "soft-expired")
		at(30*time.Minute+24*time.Hour, "gone")
		want := []string{
			`0s enqueue a.md [h:1] origin="" delay=3m0s`,
			`30m0s remove a.md`,
		}
		if got := r.hunter.Calls(); !reflect.DeepEqual(got, want) {
			t.Fatalf("hunter calls\n got %q\nwant %q", got, want)
		}
		// Its body leaves the holding area at the next save.
		at(30*time.Minute+24*time.Hour+DefaultSaveInterval, "gone")
		if got := r.area("a.md"); got != nil {
			t.Fatalf("holding area after expiry: %v", got)
		}
		if diff, _ := r.s.RevsDiff(bg, map[string][]string{"a.md": {"1-a"}}); !reflect.DeepEqual(diff, map[string][]string{"a.md": {"1-a"}}) {
			t.Fatalf("RevsDiff after expiry = %v", diff)
		}
		st := r.s.Stats()
		if st.Dropped != 1 || st.Held != 0 || st.Purgatory.Expiries != 1 {
			t.Fatalf("stats %+v", st)
		}
		// Pushed again within the 7 days of memory, still incomplete:
		// dropped, no new hunt.
		r.push(meta("a.md", "1-a", "h:1"))
		if r.rev("a.md") != "" || len(r.s.Held()) != 0 || len(r.hunter.Calls()) != 2 || r.area("a.md") != nil {
			t.Fatalf("previously expired revision held again: %+v", r.s.Held())
		}
		// Its chunks arrive late: it stays unserved.
		r.push(chunk("h:1"))
		synctest.Wait()
		if r.rev("a.md") != "" {
			t.Fatal("an expired revision was served")
		}
		// Pushed again now that its chunks are stored: written through.
		r.push(meta("a.md", "1-a", "h:1"))
		if r.rev("a.md") != "1-a" {
			t.Fatal("complete revision not written through")
		}
	})
}

// "still released at once if its chunks arrive by any path" during the
// soft expiry.
func TestSoftExpiredReleasedWhenChunksArrive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		r.push(meta("a.md", "1-a", "h:1"))
		_, checkpoint := r.changes("")
		r.sleepUntil(5 * time.Hour)
		if state, _, _ := r.heldDoc("a.md"); state != "soft-expired" {
			t.Fatalf("state %s", state)
		}
		r.push(chunk("h:1"))
		synctest.Wait()
		cs, _ := r.changes(checkpoint)
		if got := ids(cs); !reflect.DeepEqual(got, []string{"h:1", "a.md"}) {
			t.Fatalf("feed = %v", got)
		}
	})
}

// Late binding: "never release an older revision after a newer one".
func TestNewerRevisionOvertakesHeld(t *testing.T) {
	t.Run("newer complete revision", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, Config{}, Deps{})
			r.push(chunk("h:0"), meta("a.md", "1-a", "h:0"))
			r.push(metaHist("a.md", "2-b", []string{"a"}, "h:1"))
			// A sibling of the held revision, newer in CouchDB's order.
			r.push(chunk("h:2"), metaHist("a.md", "2-c", []string{"a"}, "h:2"))
			synctest.Wait()
			if r.rev("a.md") != "2-c" || len(r.s.Held()) != 0 || r.area("a.md") != nil {
				t.Fatalf("rev %s, held %+v, area %v", r.rev("a.md"), r.s.Held(), r.area("a.md"))
			}
			_, checkpoint := r.changes("")
			r.push(chunk("h:1"))
			synctest.Wait()
			cs, _ := r.changes(checkpoint)
			if got := ids(cs); !reflect.DeepEqual(got, []string{"h:1"}) || r.rev("a.md") != "2-c" {
				t.Fatalf("the older revision came back: feed %v, rev %s", got, r.rev("a.md"))
			}
			if _, err := r.s.Get(bg, "a.md", store.GetOptions{Rev: "2-b"}); !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("older revision stored: %v", err)
			}
		})
	})
	t.Run("older complete revision, newer incomplete", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, Config{}, Deps{})
			r.push(meta("a.md", "2-b", "h:2"))
			// The newest complete revision is released even if a newer one is incomplete.
			r.push(chunk("h:1"), meta("a.md", "1-a", "h:1"))
			synctest.Wait()
			if r.rev("a.md") != "1-a" {
				t.Fatalf("rev %q, want 1-a", r.rev("a.md"))
			}
			if _, revs, _ := r.heldDoc("a.md"); !reflect.DeepEqual(revs, []string{"2-b"}) {
				t.Fatalf("held %v", revs)
			}
			r.push(chunk("h:2"))
			synctest.Wait()
			if r.rev("a.md") != "2-b" || len(r.s.Held()) != 0 {
				t.Fatalf("rev %q, held %+v", r.rev("a.md"), r.s.Held())
			}
		})
	})
	t.Run("two revisions in one batch", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, Config{}, Deps{})
			r.push(chunk("h:3"), meta("a.md", "1-a", "h:1"), metaHist("a.md", "2-b", []string{"a"}, "h:3"))
			synctest.Wait()
			if r.rev("a.md") != "2-b" || len(r.s.Held()) != 0 || r.area("a.md") != nil {
				t.Fatalf("rev %q, held %+v", r.rev("a.md"), r.s.Held())
			}
		})
	})
	t.Run("deletion of a held note", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, Config{}, Deps{})
			r.push(chunk("h:1"), meta("a.md", "1-a", "h:1"))
			r.push(metaHist("a.md", "2-b", []string{"a"}, "h:2"))
			// Deleted on another branch: a live revision released after
			// it would win over the deletion and bring the note back.
			r.push(tombstone("a.md", "2-c", "a"))
			synctest.Wait()
			if r.rev("a.md") != "" || len(r.s.Held()) != 0 {
				t.Fatalf("rev %q, held %+v", r.rev("a.md"), r.s.Held())
			}
			_, checkpoint := r.changes("")
			r.push(chunk("h:2"))
			synctest.Wait()
			cs, _ := r.changes(checkpoint)
			if got := ids(cs); !reflect.DeepEqual(got, []string{"h:2"}) || r.rev("a.md") != "" {
				t.Fatalf("the deleted note came back: feed %v, rev %q", got, r.rev("a.md"))
			}
		})
	})
	t.Run("older revision after a release", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, Config{}, Deps{})
			r.push(meta("a.md", "2-b", "h:2"))
			r.push(chunk("h:2"))
			synctest.Wait()
			// A lagging client pushes an older conflicting revision.
			r.push(meta("a.md", "1-z", "h:9"))
			synctest.Wait()
			if len(r.s.Held()) != 0 || r.area("a.md") != nil || r.s.Stats().Dropped != 1 {
				t.Fatalf("superseded revision held: %+v", r.s.Held())
			}
		})
	})
}

// The same revision pushed twice is held once.
func TestDuplicatePush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		r.push(meta("a.md", "1-a", "h:1"), meta("a.md", "1-a", "h:1"))
		r.push(meta("a.md", "1-a", "h:1"))
		if st := r.s.Stats(); st.Holds != 1 || st.Held != 1 {
			t.Fatalf("stats %+v", st)
		}
		r.push(chunk("h:1"))
		synctest.Wait()
		if r.rev("a.md") != "1-a" {
			t.Fatal("not released")
		}
	})
}

// Pulled from an upstream: the source is recorded and the pulled delay
// applies.
func TestBulkDocsFromUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		if _, err := r.s.BulkDocsFrom(bg, "couch.example:5984", []json.RawMessage{meta("a.md", "1-a", "h:1")}); err != nil {
			t.Fatal(err)
		}
		h := r.s.Held()
		if len(h) != 1 || h[0].Source != "couch.example:5984" {
			t.Fatalf("held %+v", h)
		}
		want := []string{`0s enqueue a.md [h:1] origin="couch.example:5984" delay=500ms`}
		if got := r.hunter.Calls(); !reflect.DeepEqual(got, want) {
			t.Fatalf("hunter calls %q", got)
		}
	})
}

// Put is never held (the inner store chooses the revision); chunks it
// writes release held notes; a complete revision put on a held note goes
// through the purgatory.
func TestPut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		rev, err := r.s.Put(bg, json.RawMessage(`{"_id":"tool.md","type":"plain","children":["h:x"]}`))
		if err != nil || r.rev("tool.md") != rev {
			t.Fatalf("Put: %q %v", rev, err)
		}
		r.push(meta("a.md", "1-a", "h:1"))
		if _, err := r.s.Put(bg, json.RawMessage(`{"_id":"h:1","type":"leaf","data":"x"}`)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if r.rev("a.md") != "1-a" {
			t.Fatal("a chunk written by Put did not release the note")
		}
		r.push(metaHist("a.md", "2-b", []string{"a"}, "h:2"))
		rev, err = r.s.Put(bg, json.RawMessage(`{"_id":"a.md","_rev":"1-a","type":"plain","children":["h:1"]}`))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		// 2-… from Put is newer than 2-b only if its hash sorts after "b";
		// either way the outcome follows CouchDB's order.
		if purgatory.CompareRevs(rev, "2-b") > 0 {
			if len(r.s.Held()) != 0 || r.rev("a.md") != rev {
				t.Fatalf("rev %q, held %+v", r.rev("a.md"), r.s.Held())
			}
		} else if _, revs, _ := r.heldDoc("a.md"); !slices.Equal(revs, []string{"2-b"}) {
			t.Fatalf("held %v", revs)
		}
	})
}

func TestReservedLocalDocuments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		r.push(meta("a.md", "1-a", "h:1"))
		for _, id := range []string{localIndex, localDocPrefix + "a.md", localState} {
			if _, err := r.s.GetLocal(bg, id); !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("GetLocal %s: %v", id, err)
			}
			if err := r.s.PutLocal(bg, id, json.RawMessage(`{}`)); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("PutLocal %s: %v", id, err)
			}
		}
		if _, err := r.inner.GetLocal(bg, localDocPrefix+"a.md"); err != nil {
			t.Fatalf("holding document not in the inner store: %v", err)
		}
		if err := r.s.PutLocal(bg, "checkpoint", json.RawMessage(`{"last_seq":"3"}`)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{SaveInterval: -1}, {Purgatory: purgatory.Config{ActiveFor: -1}}} {
		if c.Validate() == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if _, err := New(Config{}, Deps{}); err == nil {
		t.Error("New without Inner: no error")
	}
}

// After Close: writes fail with store.ErrClosed, the inner store is closed.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		if err := r.s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.s.BulkDocs(bg, []json.RawMessage{meta("a.md", "1-a")}); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("BulkDocs after Close: %v", err)
		}
		if _, err := r.inner.Info(bg); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("inner not closed: %v", err)
		}
	})
}

// Whatever announces chunks, a note is released only when every chunk
// is really stored (Release checks).
func TestFalseArrivalDoesNotRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		r.push(meta("a.md", "1-a", "h:1"))
		r.s.ChunksArrived([]engine.ChunkID{"h:1"})
		synctest.Wait()
		if r.rev("a.md") != "" {
			t.Fatal("released on an announcement without the chunk")
		}
		if _, revs, _ := r.heldDoc("a.md"); !slices.Equal(revs, []string{"1-a"}) {
			t.Fatalf("held %+v", r.s.Held())
		}
		// Stored by another path, then announced: released.
		if _, err := r.inner.BulkDocs(bg, []json.RawMessage{chunk("h:1")}); err != nil {
			t.Fatal(err)
		}
		r.s.ChunksArrived([]engine.ChunkID{"h:1"})
		synctest.Wait()
		if r.rev("a.md") != "1-a" {
			t.Fatal("not released")
		}
	})
}

// The pruning at each save drops only revisions the purgatory accepted
// and then gave up, never one still on its way to the purgatory.
func TestSaveKeepsRevisionsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		// In the holding area, not yet handed to the purgatory (gen 0).
		r.s.mu.Lock()
		r.s.held["a.md"] = map[string]*hrev{"1-a": {}}
		r.s.mu.Unlock()
		if err := r.s.area.add(bg, "a.md", "", map[string]heldBody{"1-a": {Body: meta("a.md", "1-a", "h:1")}}); err != nil {
			t.Fatal(err)
		}
		r.s.save(bg)
		if got := r.area("a.md"); !slices.Equal(got, []string{"1-a"}) || r.s.Stats().Held != 1 {
			t.Fatalf("a revision in flight was pruned: area %v", got)
		}
	})
}

// A revision of a held note that the Store cannot judge (here a
// deletion with a body field but no type) still goes through the
// purgatory: the older held revision is never released after it.
func TestUnjudgedRevisionOfHeldNote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		r.push(chunk("h:1"), meta("a.md", "1-a", "h:1"))
		r.push(metaHist("a.md", "2-b", []string{"a"}, "h:2"))
		r.push(json.RawMessage(`{"_id":"a.md","_rev":"2-c","_revisions":{"start":2,"ids":["c","a"]},"_deleted":true,"deleted":true}`))
		synctest.Wait()
		if r.rev("a.md") != "" || len(r.s.Held()) != 0 {
			t.Fatalf("rev %q, held %+v", r.rev("a.md"), r.s.Held())
		}
		r.push(chunk("h:2"))
		synctest.Wait()
		if r.rev("a.md") != "" {
			t.Fatalf("the deleted note came back at %q", r.rev("a.md"))
		}
	})
}
