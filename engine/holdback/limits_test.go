//go:build !js && !wasip1

package holdback

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// pushAs writes docs as owner's push and returns the results, per-document
// errors included.
func (r *rig) pushAs(owner string, docs ...json.RawMessage) []engine.BulkDocResult {
	r.t.Helper()
	res, err := r.s.BulkDocs(WithOwner(bg, owner), docs)
	if err != nil {
		r.t.Fatalf("BulkDocs: %v", err)
	}
	if len(res) != len(docs) {
		r.t.Fatalf("BulkDocs: %d results for %d docs", len(res), len(docs))
	}
	return res
}

// refusedIDs lists the ids answered TooManyHeld, and fails on any other
// error.
func refusedIDs(t *testing.T, res []engine.BulkDocResult) []string {
	t.Helper()
	var out []string
	for _, x := range res {
		switch x.Error {
		case "":
		case TooManyHeld:
			out = append(out, x.ID)
		default:
			t.Fatalf("unexpected error result %+v", x)
		}
	}
	return out
}

// metas returns metadata revisions of n notes prefix0.md … each needing
// its own chunk h:prefix<i>.
func metas(prefix string, n int) []json.RawMessage {
	var out []json.RawMessage
	for i := range n {
		out = append(out, meta(fmt.Sprintf("%s%d.md", prefix, i), "1-a", fmt.Sprintf("h:%s%d", prefix, i)))
	}
	return out
}

// "A metadata revision that would make one more document held is
// refused: its BulkDocs result has Error TooManyHeld and nothing of it is
// kept; the rest of the batch is written as usual. New revisions of
// documents held already are never refused."
func TestMaxHeldDocuments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{MaxHeldDocuments: 3}, Deps{})
		batch := append(metas("n", 5), chunk("h:c"), meta("whole.md", "1-w", "h:c"))
		res := r.pushAs("", batch...)
		if got := refusedIDs(t, res); fmt.Sprint(got) != "[n3.md n4.md]" {
			t.Fatalf("refused %v, want n3.md and n4.md", got)
		}
		reason := res[3].Reason
		for _, want := range []string{"holds 3 notes waiting for their chunks", "Push the notes' chunks before their metadata", "the limit of held documents per database"} {
			if !strings.Contains(reason, want) {
				t.Errorf("reason %q does not say %q", reason, want)
			}
		}
		if r.rev("whole.md") != "1-w" {
			t.Fatal("a complete note of the batch was not written")
		}
		st := r.s.Stats()
		if st.Documents != 3 || st.Held != 3 || st.Refused != 2 || st.Holds != 3 || st.MaxHeldDocuments != 3 {
			t.Fatalf("stats %+v", st)
		}
		// A refused revision is not kept: its pusher is asked for it again.
		diff, err := r.s.RevsDiff(bg, map[string][]string{"n0.md": {"1-a"}, "n4.md": {"1-a"}})
		if err != nil || fmt.Sprint(diff) != "map[n4.md:[1-a]]" {
			t.Fatalf("RevsDiff = %v, %v", diff, err)
		}
		if got := r.area("n4.md"); len(got) != 0 {
			t.Fatalf("refused revision in the holding area: %v", got)
		}
		// At the limit, a new revision of a held note is taken.
		if got := refusedIDs(t, r.pushAs("", metaHist("n0.md", "2-b", []string{"a"}, "h:n0", "h:x"))); got != nil {
			t.Fatalf("a new revision of a held note was refused: %v", got)
		}
		// A released note frees its slot.
		r.push(chunk("h:n1"))
		synctest.Wait()
		if r.rev("n1.md") != "1-a" || r.s.Stats().Documents != 2 {
			t.Fatalf("n1.md not released: %+v", r.s.Stats())
		}
		if got := refusedIDs(t, r.pushAs("", metas("n", 5)[3:]...)); fmt.Sprint(got) != "[n4.md]" {
			t.Fatalf("after a release, refused %v, want only n4.md", got)
		}
		if st := r.s.Stats(); st.Documents != 3 || st.Refused != 3 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// "A document counts against the owner of the revision that made it
// held, until it has no held revision left. Writes with no owner count
// against MaxHeldDocuments only."
func TestMaxHeldPerOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{MaxHeldDocuments: 6, MaxHeldPerOwner: 2, MaxHeldPerOwnerName: "[holdback] max_held_documents_per_user"}, Deps{})
		res := r.pushAs("alice", metas("a", 3)...)
		if got := refusedIDs(t, res); fmt.Sprint(got) != "[a2.md]" {
			t.Fatalf("alice: refused %v", got)
		}
		for _, want := range []string{`user "alice" already has 2 notes waiting`, "raise [holdback] max_held_documents_per_user"} {
			if !strings.Contains(res[2].Reason, want) {
				t.Errorf("reason %q does not say %q", res[2].Reason, want)
			}
		}
		// Others are not affected by alice's slots.
		if got := refusedIDs(t, r.pushAs("bob", metas("b", 2)...)); got != nil {
			t.Fatalf("bob refused %v", got)
		}
		// Bob writing a revision of a note alice made held takes no slot.
		if got := refusedIDs(t, r.pushAs("bob", metaHist("a0.md", "2-b", []string{"a"}, "h:a0", "h:y"))); got != nil {
			t.Fatalf("bob's revision of a held note refused: %v", got)
		}
		// Pulled revisions (no owner) count against the database only.
		res, err := r.s.BulkDocsFrom(bg, "upstream:1", metas("u", 3))
		if err != nil {
			t.Fatal(err)
		}
		if got := refusedIDs(t, res); fmt.Sprint(got) != "[u2.md]" {
			t.Fatalf("pulled: refused %v, want u2.md (database full at 6)", got)
		}
		if !strings.Contains(res[2].Reason, "the limit of held documents per database") {
			t.Errorf("reason %q", res[2].Reason)
		}
		// Releasing alice's a1.md gives her a slot back, but the database
		// is full until then.
		r.push(chunk("h:a1"))
		synctest.Wait()
		if got := refusedIDs(t, r.pushAs("alice", metas("a", 3)[2])); got != nil {
			t.Fatalf("alice refused after a release: %v", got)
		}
		if st := r.s.Stats(); st.Documents != 6 || st.Refused != 2 || fmt.Sprint(st.HeldByOwner) != "map[alice:2 bob:2]" {
			t.Fatalf("stats %+v", st)
		}
		// A note whose newest revision completes is released (late
		// binding), older revisions with it, and its slot is free.
		r.push(chunk("h:a0"), chunk("h:y"))
		synctest.Wait()
		if r.rev("a0.md") != "2-b" {
			t.Fatalf("a0.md = %q", r.rev("a0.md"))
		}
		if got := refusedIDs(t, r.pushAs("alice", meta("a9.md", "1-a", "h:a9"))); got != nil {
			t.Fatalf("alice refused after her note was released: %v", got)
		}
	})
}

// Expiry frees slots: the purgatory gives a note up after 30 min of
// hunting and 24 h of soft expiry, and the next save drops it.
func TestMaxHeldExpiryFreesSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{MaxHeldPerOwner: 1}, Deps{})
		if got := refusedIDs(t, r.pushAs("alice", metas("a", 2)...)); fmt.Sprint(got) != "[a1.md]" {
			t.Fatalf("refused %v", got)
		}
		time.Sleep(24*time.Hour + 31*time.Minute + DefaultSaveInterval)
		synctest.Wait()
		if st := r.s.Stats(); st.Documents != 0 || st.Purgatory.Expiries != 1 {
			t.Fatalf("after expiry: %+v", st)
		}
		if got := refusedIDs(t, r.pushAs("alice", metas("a", 2)[1])); got != nil {
			t.Fatalf("refused after expiry: %v", got)
		}
	})
}

// The counts survive a restart: the holding area keeps each note's
// owner, so a user at the limit stays there, and a release after the
// restart frees the slot.
func TestMaxHeldRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{MaxHeldDocuments: 4, MaxHeldPerOwner: 2}
		r := newRig(t, cfg, Deps{Inner: openBolt(t, path)})
		r.pushAs("alice", metas("a", 2)...)
		r.pushAs("", metas("u", 1)...)
		if err := r.s.Close(); err != nil {
			t.Fatal(err)
		}

		r = newRig(t, cfg, Deps{Inner: openBolt(t, path)})
		if st := r.s.Stats(); st.Documents != 3 || st.Held != 3 {
			t.Fatalf("after restart: %+v", st)
		}
		if got := refusedIDs(t, r.pushAs("alice", metas("a", 3)[2])); fmt.Sprint(got) != "[a2.md]" {
			t.Fatalf("alice after restart: refused %v, want a2.md", got)
		}
		if got := refusedIDs(t, r.pushAs("bob", metas("b", 2)...)); fmt.Sprint(got) != "[b1.md]" {
			t.Fatalf("bob after restart: refused %v, want b1.md (database full at 4)", got)
		}
		r.push(chunk("h:a0"))
		synctest.Wait()
		if got := refusedIDs(t, r.pushAs("alice", metas("a", 3)[2])); got != nil {
			t.Fatalf("alice refused after a release: %v", got)
		}
		if err := r.s.Close(); err != nil {
			t.Fatal(err)
		}

		// And again, with the slot freed and taken again.
		r = newRig(t, cfg, Deps{Inner: openBolt(t, path)})
		if st := r.s.Stats(); st.Documents != 4 {
			t.Fatalf("after the second restart: %+v", st)
		}
		if got := refusedIDs(t, r.pushAs("alice", meta("a7.md", "1-a", "h:a7"))); got == nil {
			t.Fatal("a full database took one more note after a restart")
		}
		r.push(chunk("h:u0"))
		synctest.Wait()
		if got := refusedIDs(t, r.pushAs("alice", meta("a7.md", "1-a", "h:a7"))); fmt.Sprint(got) != "[a7.md]" {
			t.Fatalf("alice at her limit after the second restart: refused %v", got)
		}
		if got := refusedIDs(t, r.pushAs("carol", meta("c.md", "1-a", "h:c"))); got != nil {
			t.Fatalf("carol refused %v", got)
		}
	})
}

// HeldFirst bounds what /status lists and says how many there are.
func TestHeldFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		r.push(metas("n", 5)...)
		docs, total := r.s.HeldFirst(2)
		if total != 5 || len(docs) != 2 || docs[0].Doc != "n0.md" || docs[1].Doc != "n1.md" {
			t.Fatalf("HeldFirst(2) = %+v, %d", docs, total)
		}
		if docs, total := r.s.HeldFirst(10); len(docs) != 5 || total != 5 {
			t.Fatalf("HeldFirst(10) = %d docs, %d", len(docs), total)
		}
	})
}

func TestConfigLimitsValidate(t *testing.T) {
	for _, c := range []Config{{MaxHeldDocuments: -1}, {MaxHeldPerOwner: -1}, {MaxHeldRevisions: -1}, {MaxHeldChunkIDs: -1}, {MaxHeldChunkIDsPerOwner: -1}} {
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "negative") {
			t.Errorf("%+v: Validate() = %v", c, err)
		}
	}
	if _, err := New(Config{MaxHeldDocuments: -1}, Deps{}); err == nil {
		t.Error("New accepted a negative limit")
	}
}

// "A new revision of a held document whose chunks are missing, past it,
// is refused (TooManyHeld), so that one document cannot grow without
// bound either; a revision that is complete (which releases the
// document) is never refused."
func TestMaxHeldRevisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{MaxHeldRevisions: 3}, Deps{})
		rev := func(k int, chunks ...string) json.RawMessage {
			var older []string
			for i := k - 1; i >= 1; i-- {
				older = append(older, fmt.Sprintf("r%d", i))
			}
			return metaHist("x.md", fmt.Sprintf("%d-r%d", k, k), older, chunks...)
		}
		for k := 1; k <= 3; k++ {
			if got := refusedIDs(t, r.pushAs("alice", rev(k, fmt.Sprintf("h:%d", k)))); got != nil {
				t.Fatalf("revision %d refused", k)
			}
		}
		res := r.pushAs("alice", rev(4, "h:4"))
		if got := refusedIDs(t, res); fmt.Sprint(got) != "[x.md]" || !strings.Contains(res[0].Reason, "already has 3 revisions waiting for their chunks") {
			t.Fatalf("a 4th held revision: %+v", res)
		}
		if st := r.s.Stats(); st.Held != 3 || st.Refused != 1 {
			t.Fatalf("stats %+v", st)
		}
		// Complete, it is taken and released at once, with the older ones.
		if got := refusedIDs(t, r.pushAs("alice", chunk("h:5"), rev(5, "h:5"))); got != nil {
			t.Fatalf("a complete revision was refused: %v", got)
		}
		synctest.Wait()
		if r.rev("x.md") != "5-r5" || r.s.Stats().Documents != 0 {
			t.Fatalf("x.md = %q, %+v", r.rev("x.md"), r.s.Stats())
		}
	})
}

// chunkIDs returns n chunk ids h:<prefix>-<i>.
func chunkIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("h:%s-%d", prefix, i)
	}
	return out
}

// Hold-back memory is capped by size, not only by document count (20
// held documents, each listing 50,000 missing chunk ids, once raised the
// heap in use by 528 MiB). The chunk ids
// of held revisions are bounded per database and per user: a revision
// past either limit is refused (TooManyHeld, naming the limit), ids count
// once per revision and distinct within it, and leave with the revision
// (released, or across a restart).
func TestMaxHeldChunkIDs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{MaxHeldChunkIDs: 250, MaxHeldChunkIDsPerOwner: 100, MaxHeldChunkIDsPerOwnerName: "[holdback] max_held_chunk_ids_per_user"}
		r := newRig(t, cfg, Deps{Inner: openBolt(t, path)})
		// 60 distinct ids (a repeated id counts once) then 40 more: 100.
		if got := refusedIDs(t, r.pushAs("alice", meta("a0.md", "1-a", append(chunkIDs("a0", 60), "h:a0-1", "h:a0-2")...))); got != nil {
			t.Fatalf("refused %v", got)
		}
		if got := refusedIDs(t, r.pushAs("alice", meta("a1.md", "1-a", chunkIDs("a1", 40)...))); got != nil {
			t.Fatalf("refused %v", got)
		}
		// One more id, in a new note or a new revision of a held one: refused.
		res := r.pushAs("alice", meta("a2.md", "1-a", "h:a2"), metaHist("a1.md", "2-b", []string{"a"}, chunkIDs("a1", 41)...))
		if got := refusedIDs(t, res); fmt.Sprint(got) != "[a2.md a1.md]" {
			t.Fatalf("alice past her ids: refused %v", got)
		}
		for _, want := range []string{`user "alice"'s held notes in this database already wait for 100 chunk ids`, "raise [holdback] max_held_chunk_ids_per_user"} {
			if !strings.Contains(res[0].Reason, want) {
				t.Errorf("reason %q does not say %q", res[0].Reason, want)
			}
		}
		// The refused new note took no document slot.
		if st := r.s.Stats(); st.Documents != 2 || st.ChunkIDs != 100 || st.MaxHeldChunkIDs != 250 || fmt.Sprint(st.HeldByOwner) != "map[alice:2]" {
			t.Fatalf("stats %+v", st)
		}
		// Others have their own ids, up to the database's limit.
		if got := refusedIDs(t, r.pushAs("bob", meta("b0.md", "1-a", chunkIDs("b0", 100)...))); got != nil {
			t.Fatalf("bob refused %v", got)
		}
		res, err := r.s.BulkDocsFrom(bg, "upstream:1", []json.RawMessage{meta("u0.md", "1-a", chunkIDs("u0", 51)...), meta("u1.md", "1-a", chunkIDs("u1", 50)...)})
		if err != nil {
			t.Fatal(err)
		}
		if got := refusedIDs(t, res); fmt.Sprint(got) != "[u0.md]" || !strings.Contains(res[0].Reason, "the limit of held chunk ids per database") {
			t.Fatalf("pulled past the database's ids: %+v", res)
		}
		// A complete revision is never refused, and a release gives the
		// ids back.
		var chunks []json.RawMessage
		for _, id := range chunkIDs("a1", 41) {
			chunks = append(chunks, chunk(id))
		}
		if got := refusedIDs(t, r.pushAs("alice", append(chunks, metaHist("a1.md", "2-b", []string{"a"}, chunkIDs("a1", 41)...))...)); got != nil {
			t.Fatalf("a complete revision refused: %v", got)
		}
		synctest.Wait()
		if st := r.s.Stats(); st.ChunkIDs != 210 || st.Documents != 3 {
			t.Fatalf("after a release: %+v", st)
		}
		if err := r.s.Close(); err != nil {
			t.Fatal(err)
		}
		// The counts survive a restart.
		r = newRig(t, cfg, Deps{Inner: openBolt(t, path)})
		if st := r.s.Stats(); st.ChunkIDs != 210 {
			t.Fatalf("after restart: %+v", st)
		}
		if got := refusedIDs(t, r.pushAs("alice", meta("a3.md", "1-a", chunkIDs("a3", 41)...))); fmt.Sprint(got) != "[a3.md]" {
			t.Fatalf("alice after restart: refused %v", got)
		}
		if got := refusedIDs(t, r.pushAs("alice", meta("a3.md", "1-a", chunkIDs("a3", 40)...))); got != nil {
			t.Fatalf("alice within her ids after restart: refused %v", got)
		}
	})
}
