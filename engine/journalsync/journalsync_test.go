package journalsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/activity"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

const t0 = int64(1700000000000)

func newStore(t testing.TB) store.Store {
	t.Helper()
	st, err := store.NewMemory(store.Options{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// stepClock returns a clock that starts at ms and moves one second per
// reading.
func stepClock(ms int64) func() time.Time {
	var mu sync.Mutex
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t := time.UnixMilli(ms)
		ms += 1000
		return t
	}
}

func newJournal(t testing.TB, cfg Config) *Journal {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = stepClock(t0)
	}
	j, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

var plainCodec = sync.OnceValues(func() (*livesync.Codec, error) {
	return livesync.New(livesync.Config{Settings: livesync.Settings{CustomChunkSize: 10}})
})

// putFile stores a file as the plugin does: its chunks, then its
// metadata (a new edit).
func putFile(t testing.TB, st store.Store, path, content string) livesync.Meta {
	t.Helper()
	codec, err := plainCodec()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, chunks, err := codec.FileDocs(path, []byte(content), t0, t0+1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutChunks(ctx, chunks); err != nil {
		t.Fatal(err)
	}
	old, err := st.Get(ctx, m.ID, store.GetOptions{})
	doc := m.Doc()
	if err == nil {
		var h docHeader
		json.Unmarshal(old, &h)
		doc["_rev"], _ = json.Marshal(h.Rev)
	}
	b, _ := json.Marshal(doc)
	if m.Rev, err = st.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	return m
}

func put(t testing.TB, st store.Store, doc string) string {
	t.Helper()
	rev, err := st.Put(context.Background(), json.RawMessage(doc))
	if err != nil {
		t.Fatalf("put %s: %v", doc, err)
	}
	return rev
}

// dump returns every leaf revision of st: "id rev" → the revision as
// BulkGet returns it (with _revisions).
func dump(t testing.TB, st store.Store) map[string]string {
	t.Helper()
	ctx := context.Background()
	page, err := st.Changes(ctx, engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var req []engine.DocRev
	for _, c := range page.Results {
		for _, r := range c.Revs {
			req = append(req, engine.DocRev{ID: c.ID, Rev: r})
		}
	}
	docs, err := st.BulkGet(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range docs {
		var h docHeader
		if err := json.Unmarshal(d, &h); err != nil {
			t.Fatal(err)
		}
		out[h.ID+" "+h.Rev] = string(d)
	}
	return out
}

// readFiles reassembles every live file of st: path → content.
func readFiles(t testing.TB, st store.Store) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	infos, err := st.AllDocs(ctx, store.AllDocsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, info := range infos {
		raw, err := st.Get(ctx, info.ID, store.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d, err := livesync.ParseDoc(raw)
		if err != nil || !d.IsFileDoc() || d.Deleted() {
			continue
		}
		m, err := livesync.ParseMeta(d)
		if err != nil {
			t.Fatal(err)
		}
		data, err := livesync.ReadFile(m, enginetest.ChunkData(ctx, st))
		if err != nil {
			t.Fatalf("%s: %v", m.Path, err)
		}
		out[m.Path] = data
	}
	return out
}

// packRecords opens every pack in the bucket (plain) and returns the
// record keys per pack.
func packRecords(t testing.TB, b *enginetest.MemObjects, c journal.Cipher) [][]string {
	t.Helper()
	var out [][]string
	for _, k := range b.PackKeys() {
		recs, err := journal.Open(k, b.Body(k), c, 0)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		keys := make([]string, len(recs))
		for i, r := range recs {
			keys[i] = r.Key()
		}
		out = append(out, keys)
	}
	return out
}

func readCheckpoint(t testing.TB, j *Journal) *state {
	t.Helper()
	st, err := loadCheckpoint(context.Background(), j.cfg.Local, j.CheckpointID())
	if err != nil || st == nil {
		t.Fatalf("checkpoint %v, %v", st, err)
	}
	return st
}

func setOf(s strSet) []string { return slices.Sorted(maps.Keys(s.m)) }

// vault fills st with files, an edited note (a revision tree of three),
// a tombstone, a legacy inline note and a document with two conflicting
// leaves.
func vault(t testing.TB, st store.Store) {
	t.Helper()
	putFile(t, st, "notes/a.md", "# A\nfirst note, long enough to be split into a few chunks.\n")
	putFile(t, st, "b.md", "b")
	putFile(t, st, "edited.md", "version 1")
	putFile(t, st, "edited.md", "version 2, longer")
	putFile(t, st, "edited.md", "version 3, longer still")
	putFile(t, st, "attachments/x.bin", "\x00\x01\x02binary\xff")
	m := putFile(t, st, "gone.md", "to be deleted")
	put(t, st, fmt.Sprintf(`{"_id":%q,"_rev":%q,"_deleted":true}`, m.ID, m.Rev))
	put(t, st, `{"_id":"legacy.md","type":"notes","path":"legacy.md","data":["line 1\n","line 2"],"ctime":1,"mtime":1,"size":13}`)
	res, err := st.BulkDocs(context.Background(), []json.RawMessage{
		json.RawMessage(`{"_id":"conflict.md","_rev":"2-bbbb","_revisions":{"start":2,"ids":["bbbb","aaaa"]},"type":"plain","path":"conflict.md","children":[],"size":0,"ctime":1,"mtime":1,"eden":{}}`),
		json.RawMessage(`{"_id":"conflict.md","_rev":"2-cccc","_revisions":{"start":2,"ids":["cccc","aaaa"]},"type":"plain","path":"conflict.md","children":[],"size":0,"ctime":1,"mtime":2,"eden":{}}`),
	})
	if err != nil || res[0].Error != "" || res[1].Error != "" {
		t.Fatalf("conflict: %v %+v", err, res)
	}
}

// TestRoundTrip: what one device sends, another receives identically:
// every leaf of every document (revision histories, a tombstone, both
// sides of a conflict) and every chunk; the files read back. Nothing
// received is sent back, nothing sent is received back.
func TestRoundTrip(t *testing.T) {
	ctx := t.Context()
	bucket := newMemObjects("vault/")
	a, b := newStore(t), newStore(t)
	vault(t, a)
	ja := newJournal(t, Config{Local: a, Remote: bucket})
	res, err := ja.Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := dump(t, a)
	if res.PacksSent != 1 || res.RecordsSent != len(want) || res.Skipped != 0 || res.BytesSent == 0 {
		t.Fatalf("send: %+v, %d leaves", res, len(want))
	}

	jb := newJournal(t, Config{Local: b, Remote: bucket})
	res, err = jb.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.PacksReceived != 1 || len(res.Quarantined) != 0 || res.Rejected != 0 {
		t.Fatalf("receive: %+v", res)
	}
	got := dump(t, b)
	if !maps.Equal(got, want) {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s:\n got %s\nwant %s", k, got[k], v)
			}
		}
		t.Fatalf("stores differ: %d vs %d leaves", len(got), len(want))
	}
	if fa, fb := readFiles(t, a), readFiles(t, b); !maps.EqualFunc(fa, fb, func(x, y []byte) bool { return string(x) == string(y) }) || len(fa) != 6 {
		t.Fatalf("files differ: %d vs %d", len(fa), len(fb))
	}
	if _, ok := readFiles(t, b)["edited.md"]; !ok || string(readFiles(t, b)["edited.md"]) != "version 3, longer still" {
		t.Fatal("edited.md is not at its last version")
	}

	// No resend: b sends nothing (everything came from the journal), a
	// sends nothing new, a receives nothing (its own pack).
	res, err = jb.Send(ctx)
	if err != nil || res.PacksSent != 0 || res.Skipped != len(want) {
		t.Fatalf("b send: %+v %v", res, err)
	}
	res, err = ja.Sync(ctx)
	if err != nil || res.PacksSent != 0 || res.PacksReceived != 0 {
		t.Fatalf("a sync: %+v %v", res, err)
	}
	if n := len(bucket.PackKeys()); n != 1 {
		t.Fatalf("%d packs in the bucket", n)
	}
	if cp := readCheckpoint(t, jb); cp.lastLocalSeq == "" || cp.knownIDs.len() != len(want) || cp.receivedFiles.len() != 1 {
		t.Fatalf("b checkpoint: seq %q known %d received %d", cp.lastLocalSeq, cp.knownIDs.len(), cp.receivedFiles.len())
	}

	// A new edit on b goes back to a, and only that edit.
	putFile(t, b, "b.md", "b, edited on b")
	res, err = jb.Sync(ctx)
	if err != nil || res.PacksSent != 1 || res.RecordsSent != 2 { // the new chunk and the metadata
		t.Fatalf("b sync after an edit: %+v %v", res, err)
	}
	if res, err = ja.Sync(ctx); err != nil || res.PacksReceived != 1 || res.DocsWritten != 1 || res.PacksSent != 0 {
		t.Fatalf("a sync: %+v %v", res, err)
	}
	if !maps.Equal(dump(t, a), dump(t, b)) {
		t.Fatal("stores differ after the edit")
	}
}

// TestPackLimits: a pack is sealed when its buffer holds more than
// MaxPackRecords records (upstream: > 250, so packs of 251, as the
// vectors' first pack) or more than MaxPackBytes of payload.
func TestPackLimits(t *testing.T) {
	chunks := func(n, size int) []engine.Chunk {
		out := make([]engine.Chunk, n)
		for i := range out {
			data := fmt.Sprintf("%0*d", size, i)
			out[i] = engine.Chunk{ID: fmt.Sprintf("h:%06d", i), Data: data}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		n, size  int
		maxBytes int
		want     []int // records per pack
	}{
		{"250", 250, 10, 0, []int{250}},
		{"251", 251, 10, 0, []int{251}},
		{"252", 252, 10, 0, []int{251, 1}},
		{"503", 503, 10, 0, []int{251, 251, 1}},
		// each record is "~h:000000" + U+001F + 300 bytes + "\n" = 311 bytes:
		// the fourth record takes the payload past 1000 bytes.
		{"bytes", 10, 300, 1000, []int{4, 4, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			if err := st.PutChunks(t.Context(), chunks(tc.n, tc.size)); err != nil {
				t.Fatal(err)
			}
			bucket := newMemObjects("")
			j := newJournal(t, Config{Local: st, Remote: bucket, MaxPackBytes: tc.maxBytes, ChangesBatch: 7})
			res, err := j.Send(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, p := range packRecords(t, bucket, nil) {
				got = append(got, len(p))
			}
			if !slices.Equal(got, tc.want) || res.PacksSent != len(tc.want) || res.RecordsSent != tc.n {
				t.Fatalf("packs of %v records (%+v), want %v", got, res, tc.want)
			}
		})
	}
}

// TestPackKeysIncrease: packs sealed within one millisecond get keys one
// millisecond apart, and a new pack sorts after every pack received.
func TestPackKeysIncrease(t *testing.T) {
	ctx := t.Context()
	st := newStore(t)
	for i := range 3 {
		putFile(t, st, fmt.Sprintf("n%d.md", i), fmt.Sprintf("note %d", i))
	}
	bucket := newMemObjects("p/")
	frozen := func() time.Time { return time.UnixMilli(t0) }
	j := newJournal(t, Config{Local: st, Remote: bucket, Now: frozen, MaxPackRecords: 1})
	if _, err := j.Send(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{journal.PackKey("p/", t0), journal.PackKey("p/", t0+1), journal.PackKey("p/", t0+2)}
	if !slices.Equal(bucket.Puts(), want) {
		t.Fatalf("keys %v, want %v", bucket.Puts(), want)
	}

	// A pack from a device whose clock is an hour ahead: the next pack
	// this device sends still sorts after it.
	other := newStore(t)
	putFile(t, other, "ahead.md", "from the future")
	jo := newJournal(t, Config{Local: other, Remote: bucket, Now: func() time.Time { return time.UnixMilli(t0 + 3600_000) }})
	if _, err := jo.Send(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	putFile(t, st, "later.md", "after")
	if _, err := j.Send(ctx); err != nil {
		t.Fatal(err)
	}
	if last := bucket.Puts()[len(bucket.Puts())-1]; last != journal.PackKey("p/", t0+3600_001) {
		t.Fatalf("last key %s", last)
	}
}

// TestSendResume: an upload that fails leaves the checkpoint at the last
// acknowledged pack; the next Send uploads the rest and nothing twice.
func TestSendResume(t *testing.T) {
	ctx := t.Context()
	st := newStore(t)
	for i := range 40 {
		putFile(t, st, fmt.Sprintf("n%02d.md", i), fmt.Sprintf("note number %d", i))
	}
	bucket := newMemObjects("")
	puts := 0
	bucket.FailPut(func(string) error {
		puts++
		if puts == 3 {
			return &engine.Error{Op: "put object", Stage: engine.StageTransport, Err: errors.New("fake: timeout")}
		}
		return nil
	})
	j := newJournal(t, Config{Local: st, Remote: bucket, MaxPackRecords: 9, ChangesBatch: 7})
	res, err := j.Send(ctx)
	if !IsTransportErr(err) || res.PacksSent != 2 {
		t.Fatalf("first send: %+v %v", res, err)
	}
	cp := readCheckpoint(t, j)
	if cp.sentFiles.len() != 2 || cp.sentIDs.len() != 20 {
		t.Fatalf("checkpoint after failure: %d files, %d ids", cp.sentFiles.len(), cp.sentIDs.len())
	}
	res, err = j.Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	total := 0
	for _, p := range packRecords(t, bucket, nil) {
		for _, k := range p {
			if seen[k] {
				t.Errorf("%s sent twice", k)
			}
			seen[k] = true
			total++
		}
	}
	if want := len(dump(t, st)); total != want {
		t.Fatalf("%d records sent, store has %d leaves", total, want)
	}
	if cp := readCheckpoint(t, j); cp.sentIDs.len() != total {
		t.Fatalf("checkpoint: %d sent ids, %d records", cp.sentIDs.len(), total)
	}
	// The checkpoint covers the whole feed: another Send reads nothing.
	if res, err := j.Send(ctx); err != nil || res.PacksSent != 0 || res.Skipped != 0 {
		t.Fatalf("third send: %+v %v", res, err)
	}
}

func IsTransportErr(err error) bool { return stageOf(err) == engine.StageTransport }

// TestReceiveResume: a pack that cannot be downloaded stops the run with
// the error; the checkpoint holds the packs before it, and the next run
// downloads only the rest.
func TestReceiveResume(t *testing.T) {
	ctx := t.Context()
	src := newStore(t)
	for i := range 25 {
		putFile(t, src, fmt.Sprintf("n%02d.md", i), fmt.Sprintf("note number %d", i))
	}
	bucket := newMemObjects("v/")
	if _, err := newJournal(t, Config{Local: src, Remote: bucket, MaxPackRecords: 9}).Send(ctx); err != nil {
		t.Fatal(err)
	}
	keys := bucket.PackKeys()
	if len(keys) != 5 {
		t.Fatalf("%d packs", len(keys))
	}
	bucket.FailGet(keys[2], transportErr(keys[2]))
	dst := newStore(t)
	j := newJournal(t, Config{Local: dst, Remote: bucket})
	res, err := j.Receive(ctx)
	if !IsTransportErr(err) || res.PacksReceived != 2 {
		t.Fatalf("first receive: %+v %v", res, err)
	}
	if cp := readCheckpoint(t, j); !slices.Equal(setOf(cp.receivedFiles), []string{j.name(keys[0]), j.name(keys[1])}) || len(cp.quarantine) != 0 {
		t.Fatalf("checkpoint: %v %v", setOf(cp.receivedFiles), cp.quarantine)
	}
	bucket.FailGet(keys[2], nil)
	res, err = j.Receive(ctx)
	if err != nil || res.PacksReceived != 3 {
		t.Fatalf("second receive: %+v %v", res, err)
	}
	for i, k := range keys {
		want := 1
		if i == 2 {
			want = 2
		}
		if n := bucket.Gets(k); n != want {
			t.Errorf("%s downloaded %d times", k, n)
		}
	}
	if !maps.Equal(dump(t, src), dump(t, dst)) {
		t.Fatal("stores differ")
	}
	// Re-applying a pack is harmless: reset and receive everything again.
	if err := j.ResetCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = j.Receive(ctx)
	if err != nil || res.PacksReceived != 5 || res.DocsWritten != 0 {
		t.Fatalf("receive after reset: %+v %v", res, err)
	}
	if !maps.Equal(dump(t, src), dump(t, dst)) {
		t.Fatal("stores differ after re-applying")
	}
}

// TestAuthErrorStops: an authentication failure ends the run at once.
func TestAuthErrorStops(t *testing.T) {
	ctx := t.Context()
	src := newStore(t)
	putFile(t, src, "a.md", "a")
	bucket := newMemObjects("")
	if _, err := newJournal(t, Config{Local: src, Remote: bucket}).Send(ctx); err != nil {
		t.Fatal(err)
	}
	bucket.FailList(func(int) error {
		return &engine.Error{Op: "list", Stage: engine.StageAuth, Err: errors.New("fake: 403")}
	})
	_, err := newJournal(t, Config{Local: newStore(t), Remote: bucket}).Sync(ctx)
	if stageOf(err) != engine.StageAuth {
		t.Fatalf("err %v", err)
	}
}

// TestManyPacks: a listing longer than one S3 page (1,000 keys) is
// applied whole (the adapter pages; the fake answers at once).
func TestManyPacks(t *testing.T) {
	ctx := t.Context()
	bucket := newMemObjects("big/")
	for i := range 1200 {
		payload, err := journal.EncodePack([]journal.Record{{ID: fmt.Sprintf("h:%05d", i), ChunkData: fmt.Sprintf("chunk %d", i)}})
		if err != nil {
			t.Fatal(err)
		}
		bucket.Set(journal.PackKey("big/", t0+int64(i)), storedDeflate(payload))
	}
	st := newStore(t)
	j := newJournal(t, Config{Local: st, Remote: bucket})
	res, err := j.Receive(ctx)
	if err != nil || res.PacksReceived != 1200 || res.ChunksReceived != 1200 {
		t.Fatalf("%+v %v", res, err)
	}
	got, err := st.GetChunks(ctx, []engine.ChunkID{"h:00000", "h:00999", "h:01000", "h:01199"})
	if err != nil || len(got) != 4 {
		t.Fatalf("%d chunks, %v", len(got), err)
	}
	if bucket.Lists() != 1 {
		t.Fatalf("%d listings", bucket.Lists())
	}
}

// TestActivity: Receive and Sync run inside the finite activity
// boundary (they deliver local documents), Send only inside the bounded
// one, as engine/replicate runs pushes.
func TestActivity(t *testing.T) {
	ctx := t.Context()
	tracker := activity.New(nil)
	defer tracker.Close()
	src := newStore(t)
	putFile(t, src, "a.md", "a")
	bucket := newMemObjects("")
	var seen []string
	progress := func(p Progress) {
		s := tracker.State()
		seen = append(seen, fmt.Sprintf("%s finite=%d bounded=%d", p.Direction, s.Finite, s.Bounded))
	}
	js := newJournal(t, Config{Local: src, Remote: bucket, Activity: tracker, Progress: progress})
	if _, err := js.Send(ctx); err != nil {
		t.Fatal(err)
	}
	jr := newJournal(t, Config{Local: newStore(t), Remote: bucket, Activity: tracker, Progress: progress})
	if _, err := jr.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	putFile(t, src, "b.md", "b")
	if _, err := js.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"send finite=0 bounded=1",
		"receive finite=1 bounded=1",
		"send finite=1 bounded=1", // Sync's send, inside the sync's finite boundary
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("activity %q, want %q", seen, want)
	}
	if s := tracker.State(); s.Finite != 0 || s.Bounded != 0 || s.FiniteStarts != 2 {
		t.Fatalf("after: %+v", s)
	}
}

type holdCall struct {
	rev    hold.Revision
	source string
}

type fakeHolder struct {
	mu      sync.Mutex
	holds   []holdCall
	arrived []engine.ChunkID
}

func (h *fakeHolder) Hold(_ context.Context, r hold.Revision, source string) (hold.Outcome, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holds = append(h.holds, holdCall{r, source})
	return hold.Outcome(0), nil
}

func (h *fakeHolder) ChunksArrived(ids []engine.ChunkID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.arrived = append(h.arrived, ids...)
}

// TestHooks: every written metadata revision goes to the Holder with the
// journal's id as source, chunk ids to Arrivals; revisions the store had
// already are not held again.
func TestHooks(t *testing.T) {
	ctx := t.Context()
	src := newStore(t)
	ma := putFile(t, src, "a.md", "alpha")
	mb := putFile(t, src, "b.md", "beta")
	put(t, src, fmt.Sprintf(`{"_id":%q,"_rev":%q,"_deleted":true}`, mb.ID, mb.Rev))
	bucket := newMemObjects("")
	if _, err := newJournal(t, Config{Local: src, Remote: bucket}).Send(ctx); err != nil {
		t.Fatal(err)
	}
	h := &fakeHolder{}
	j := newJournal(t, Config{Local: newStore(t), Remote: bucket, Holder: h, Arrivals: h})
	if _, err := j.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(h.holds, func(a, b holdCall) int { return strings.Compare(a.rev.Doc, b.rev.Doc) })
	if len(h.holds) != 2 || h.holds[0].rev.Doc != ma.ID || !slices.Equal(h.holds[0].rev.Chunks, ma.Children) ||
		h.holds[1].rev.Doc != mb.ID || len(h.holds[1].rev.Chunks) != 0 || h.holds[0].source != bucket.ID() {
		t.Fatalf("holds %+v", h.holds)
	}
	slices.Sort(h.arrived)
	want := slices.Sorted(slices.Values(append(slices.Clone(ma.Children), mb.Children...)))
	if !slices.Equal(h.arrived, slices.Compact(want)) {
		t.Fatalf("arrivals %v, want %v", h.arrived, want)
	}
}

func TestConfigValidate(t *testing.T) {
	st := newStore(t)
	for _, c := range []Config{
		{},
		{Local: st},
		{Remote: newMemObjects("")},
		{Local: st, Remote: newMemObjects(""), MaxPackRecords: -1},
		{Local: st, Remote: newMemObjects(""), InflateLimit: -1},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// TestSendSplitChange: a document whose leaves land in two packs; the
// second upload fails. The checkpoint must not cover that document, and
// the next Send uploads exactly the leaf that was not acknowledged.
func TestSendSplitChange(t *testing.T) {
	ctx := t.Context()
	st := newStore(t)
	put(t, st, `{"_id":"first.md","type":"plain","path":"first.md","children":[],"size":0,"ctime":1,"mtime":1}`)
	var docs []json.RawMessage
	for _, h := range []string{"aaaa", "bbbb", "cccc"} {
		docs = append(docs, json.RawMessage(`{"_id":"c.md","_rev":"2-`+h+`","_revisions":{"start":2,"ids":["`+h+`","0000"]},"type":"plain","path":"c.md","children":[],"size":0,"ctime":1,"mtime":1}`))
	}
	if _, err := st.BulkDocs(ctx, docs); err != nil {
		t.Fatal(err)
	}
	bucket := newMemObjects("")
	puts := 0
	bucket.FailPut(func(string) error {
		if puts++; puts == 2 {
			return transportErr("put")
		}
		return nil
	})
	// Packs of 2 records: [first.md, c.md leaf 1] [c.md leaves 2, 3].
	j := newJournal(t, Config{Local: st, Remote: bucket, MaxPackRecords: 1})
	if res, err := j.Send(ctx); !IsTransportErr(err) || res.PacksSent != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	cp := readCheckpoint(t, j)
	if cp.lastLocalSeq != "1" || cp.sentIDs.len() != 2 {
		t.Fatalf("checkpoint seq %q sent %v", cp.lastLocalSeq, setOf(cp.sentIDs))
	}
	res, err := j.Send(ctx)
	if err != nil || res.PacksSent != 1 || res.RecordsSent != 2 || res.Skipped != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	dst := newStore(t)
	if _, err := newJournal(t, Config{Local: dst, Remote: bucket}).Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(dump(t, st), dump(t, dst)) {
		t.Fatal("stores differ")
	}
}

// TestSendSkipsDeletedChunk: a deleted chunk revision has no data to
// pack (upstream's serializer would throw); it is skipped and counted,
// the rest is sent.
func TestSendSkipsDeletedChunk(t *testing.T) {
	ctx := t.Context()
	st := newStore(t)
	if err := st.PutChunks(ctx, []engine.Chunk{{ID: "h:gone", Data: "x"}, {ID: "h:kept", Data: "y"}}); err != nil {
		t.Fatal(err)
	}
	raw, err := st.Get(ctx, "h:gone", store.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var h docHeader
	json.Unmarshal(raw, &h)
	put(t, st, `{"_id":"h:gone","_rev":"`+h.Rev+`","_deleted":true}`)
	bucket := newMemObjects("")
	j := newJournal(t, Config{Local: st, Remote: bucket})
	res, err := j.Send(ctx)
	if err != nil || res.RecordsSent != 1 || res.Skipped != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if p := packRecords(t, bucket, nil); len(p) != 1 || !slices.Equal(p[0], []string{"h:kept"}) {
		t.Fatalf("packs %v", p)
	}
}

// storedDeflate is payload (< 64 KiB) as one final stored DEFLATE block:
// a valid pack body that costs nothing to make.
func storedDeflate(payload []byte) []byte {
	n := len(payload)
	return append([]byte{1, byte(n), byte(n >> 8), ^byte(n), ^byte(n >> 8)}, payload...)
}

// TestSameMillisecond: no pack is lost when two devices send in the
// same millisecond (their clocks frozen at one instant). Put is
// create-only, so the second device's first key is taken and it moves on
// to the next free millisecond: the bucket holds all four packs, each
// device receives the other's, and a third device gets all 18 files.
func TestSameMillisecond(t *testing.T) {
	ctx := t.Context()
	const ms = int64(1800000000000)
	frozen := func() time.Time { return time.UnixMilli(ms) }
	bucket := newMemObjects("p/")
	want := map[string][]byte{}
	var stores []store.Store
	var devices []*Journal
	for d := range 2 {
		st := newStore(t)
		for i := range 9 {
			path, content := fmt.Sprintf("dev%d/n%d.md", d, i), fmt.Sprintf("device %d note %d", d, i)
			putFile(t, st, path, content)
			want[path] = []byte(content)
		}
		stores = append(stores, st)
		devices = append(devices, newJournal(t, Config{Local: st, Remote: bucket, Now: frozen, MaxPackRecords: 9}))
	}
	for d, j := range devices {
		res, err := j.Send(ctx)
		if err != nil || res.PacksSent != 2 {
			t.Fatalf("device %d: %+v, %v; want 2 packs sent", d, res, err)
		}
	}
	wantKeys := []string{journal.PackKey("p/", ms), journal.PackKey("p/", ms+1), journal.PackKey("p/", ms+2), journal.PackKey("p/", ms+3)}
	if got := bucket.PackKeys(); !slices.Equal(got, wantKeys) {
		t.Fatalf("bucket holds %v, want %v", got, wantKeys)
	}
	if sent := setOf(readCheckpoint(t, devices[1]).sentFiles); !slices.Equal(sent, []string{journal.PackKey("", ms+2), journal.PackKey("", ms+3)}) {
		t.Fatalf("second device's sentFiles %v, want the keys after the first device's", sent)
	}
	for d, j := range devices {
		if res, err := j.Receive(ctx); err != nil || res.PacksReceived != 2 {
			t.Fatalf("device %d receive: %+v, %v; want the other device's 2 packs", d, res, err)
		}
		if got := readFiles(t, stores[d]); len(got) != 18 {
			t.Fatalf("device %d holds %d files, want 18", d, len(got))
		}
	}
	third := newStore(t)
	if _, err := newJournal(t, Config{Local: third, Remote: bucket}).Receive(ctx); err != nil {
		t.Fatal(err)
	}
	got := readFiles(t, third)
	if len(got) != len(want) {
		t.Fatalf("third device holds %d files, want %d", len(got), len(want))
	}
	for p, c := range want {
		if string(got[p]) != string(c) {
			t.Errorf("%s: %q, want %q", p, got[p], c)
		}
	}
}

// TestPackKeyTaken: when the key a pack would take exists, Send lists the
// bucket after it and takes one millisecond after the newest pack key
// there; it overwrites nothing, and gives up after keyTries taken keys
// with an error that wraps ErrExists and leaves the records unsent.
func TestPackKeyTaken(t *testing.T) {
	const ms = int64(1800000000000)
	frozen := func() time.Time { return time.UnixMilli(ms) }
	key := func(d int64) string { return journal.PackKey("p/", ms+d) }
	t.Run("jumps past the newest", func(t *testing.T) {
		ctx := t.Context()
		bucket := newMemObjects("p/")
		for _, d := range []int64{0, 1, 5} {
			bucket.Set(key(d), []byte("another device's pack"))
		}
		st := newStore(t)
		putFile(t, st, "a.md", "mine")
		j := newJournal(t, Config{Local: st, Remote: bucket, Now: frozen})
		res, err := j.Send(ctx)
		if err != nil || res.PacksSent != 1 {
			t.Fatalf("send: %+v, %v", res, err)
		}
		if !slices.Equal(bucket.Refused(), []string{key(0)}) || !slices.Equal(bucket.Puts(), []string{key(6)}) || bucket.Lists() != 1 {
			t.Fatalf("taken %v, puts %v, %d lists; want %s refused, one listing, %s created", bucket.Refused(), bucket.Puts(), bucket.Lists(), key(0), key(6))
		}
		for _, d := range []int64{0, 1, 5} {
			if got := string(bucket.Body(key(d))); got != "another device's pack" {
				t.Fatalf("%s was overwritten: %q", key(d), got)
			}
		}
		if sent := setOf(readCheckpoint(t, j).sentFiles); !slices.Equal(sent, []string{journal.PackKey("", ms+6)}) {
			t.Fatalf("sentFiles %v", sent)
		}
	})
	t.Run("gives up", func(t *testing.T) {
		ctx := t.Context()
		bucket := newMemObjects("p/")
		var refused []string
		bucket.FailPut(func(k string) error { // every key is taken by the time it is tried
			refused = append(refused, k)
			return &engine.Error{Op: "put object", DocID: k, Stage: engine.StageStorage, Err: ErrExists}
		})
		st := newStore(t)
		putFile(t, st, "a.md", "mine")
		j := newJournal(t, Config{Local: st, Remote: bucket, Now: frozen})
		res, err := j.Send(ctx)
		if !errors.Is(err, ErrExists) || stageOf(err) != engine.StageStorage || res.PacksSent != 0 || !strings.Contains(err.Error(), "send again") {
			t.Fatalf("send: %+v, %v; want a storage error wrapping ErrExists", res, err)
		}
		if len(refused) != keyTries || refused[0] != key(0) || refused[keyTries-1] != key(keyTries-1) {
			t.Fatalf("tried %v; want %d keys from %s, one millisecond apart", refused, keyTries, key(0))
		}
		if cp, err := loadCheckpoint(ctx, st, j.CheckpointID()); err != nil || (cp != nil && cp.sentIDs.len()+cp.sentFiles.len() != 0) {
			t.Fatalf("checkpoint after giving up: %v, %v; want nothing recorded as sent", cp, err)
		}
		bucket.FailPut(nil)
		if res, err := j.Send(ctx); err != nil || res.PacksSent != 1 || res.RecordsSent != 2 {
			t.Fatalf("send again: %+v, %v; want the note and its chunk", res, err)
		}
	})
	t.Run("listing fails", func(t *testing.T) {
		ctx := t.Context()
		bucket := newMemObjects("p/")
		bucket.Set(key(0), []byte("another device's pack"))
		bucket.FailList(func(int) error { return transportErr("p/") })
		st := newStore(t)
		putFile(t, st, "a.md", "mine")
		j := newJournal(t, Config{Local: st, Remote: bucket, Now: frozen})
		if res, err := j.Send(ctx); !IsTransportErr(err) || res.PacksSent != 0 || len(bucket.Puts()) != 0 {
			t.Fatalf("send: %+v, %v, puts %v; want the listing's error and nothing created", res, err, bucket.Puts())
		}
	})
}

// TestLateWindow: a device whose clock runs behind uploads a pack whose
// key sorts before packs others already received. Receive lists again
// from Config.LateWindow before its newest received pack, so it still gets
// that pack (upstream, listing strictly after, never does: LateWindow < 0).
func TestLateWindow(t *testing.T) {
	ctx := t.Context()
	const ms = int64(1800000000000)
	at := func(ms int64) func() time.Time { return func() time.Time { return time.UnixMilli(ms) } }
	for _, tc := range []struct {
		name   string
		window time.Duration
		behind time.Duration
		want   int // files the receiver ends with
	}{
		{"default window, 5 min behind", 0, 5 * time.Minute, 2},
		{"default window, 11 min behind", 0, 11 * time.Minute, 1},
		{"1 h window, 11 min behind", time.Hour, 11 * time.Minute, 2},
		{"upstream (no window)", -1, time.Second, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bucket := newMemObjects("p/")
			a, late, recv := newStore(t), newStore(t), newStore(t)
			putFile(t, a, "a.md", "from the device on time")
			putFile(t, late, "late.md", "from the device whose clock is behind")
			if _, err := newJournal(t, Config{Local: a, Remote: bucket, Now: at(ms)}).Send(ctx); err != nil {
				t.Fatal(err)
			}
			r := newJournal(t, Config{Local: recv, Remote: bucket, LateWindow: tc.window})
			if res, err := r.Receive(ctx); err != nil || res.PacksReceived != 1 {
				t.Fatalf("first receive: %+v, %v", res, err)
			}
			if _, err := newJournal(t, Config{Local: late, Remote: bucket, Now: at(ms - tc.behind.Milliseconds())}).Send(ctx); err != nil {
				t.Fatal(err)
			}
			before := bucket.TotalGets()
			if _, err := r.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			if got := readFiles(t, recv); len(got) != tc.want {
				t.Fatalf("receiver holds %d files, want %d", len(got), tc.want)
			}
			// The pack already received is in the window but not downloaded again.
			if n := bucket.TotalGets() - before; n != tc.want-1 {
				t.Fatalf("second receive downloaded %d packs, want %d", n, tc.want-1)
			}
		})
	}
}
