package journalsync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// TestCheckpointID: the id is upstream's, btoa(encodeURI(…)) as
// JavaScript computes it (values from Node 20).
func TestCheckpointID(t *testing.T) {
	for id, want := range map[string]string{
		"http://127.0.0.1:9000,bucketvault/,auto":             "aHR0cDovLzEyNy4wLjAuMTo5MDAwLGJ1Y2tldHZhdWx0LyxhdXRv",
		"https://s3.example.com,my bucketNotes ü/,us-east-1":  "aHR0cHM6Ly9zMy5leGFtcGxlLmNvbSxteSUyMGJ1Y2tldE5vdGVzJTIwJUMzJUJDLyx1cy1lYXN0LTE=",
		"http://minio:9000,b,":                                "aHR0cDovL21pbmlvOjkwMDAsYiw=",
		"http://127.0.0.1:9000,vault-bucketmy vault/ü#?,auto": "aHR0cDovLzEyNy4wLjAuMTo5MDAwLHZhdWx0LWJ1Y2tldG15JTIwdmF1bHQvJUMzJUJDIz8sYXV0bw==",
	} {
		if got := CheckpointID(id); got != "bucketsync-checkpoint-"+want {
			t.Errorf("%q: %s", id, got)
		}
	}
	j := newJournal(t, Config{Local: newStore(t), Remote: newMemObjects("vault/")})
	if j.CheckpointID() != "bucketsync-checkpoint-aHR0cDovLzEyNy4wLjAuMTo5MDAwLGJ1Y2tldHZhdWx0LyxhdXRv" {
		t.Errorf("journal checkpoint id %s", j.CheckpointID())
	}
}

func sampleState() *state {
	s := newState()
	s.lastLocalSeq, s.epoch, s.opened, s.lastOpened = "42", "2:c2FsdA==", true, "1700000002000-docs.jsonl.gz"
	for _, k := range []string{"h:a", "notes/a.md-1-abc", "quote\"and\\slash\n\u2028", "ünï"} {
		s.knownIDs.add(k)
	}
	s.sentIDs.add("mine.md-2-def")
	s.addReceived("1700000001000-docs.jsonl.gz")
	s.addReceived("1700000002000-docs.jsonl.gz")
	s.addSentFile("1700000003000-docs.jsonl.gz")
	s.addIndex("1700000001000-docs.jsonl.gz", []string{"h:a", "h:b"})
	s.addIndex("1700000003000-docs.jsonl.gz", nil)
	s.quarantine["1700000000500-docs.jsonl.gz"] = quarantineEntry{Stage: "decrypt", Error: "bad tag", At: time.UnixMilli(t0).UTC()}
	s.retry["1700000000400-docs.jsonl.gz"] = struct{}{}
	return s
}

func stateEqual(a, b *state) error {
	switch {
	case a.lastLocalSeq != b.lastLocalSeq || a.epoch != b.epoch || a.opened != b.opened || a.lastOpened != b.lastOpened:
		return fmt.Errorf("scalars differ: %q %q %v %q / %q %q %v %q", a.lastLocalSeq, a.epoch, a.opened, a.lastOpened, b.lastLocalSeq, b.epoch, b.opened, b.lastOpened)
	case !maps.Equal(a.knownIDs.m, b.knownIDs.m) || !maps.Equal(a.sentIDs.m, b.sentIDs.m) ||
		!maps.Equal(a.receivedFiles.m, b.receivedFiles.m) || !maps.Equal(a.sentFiles.m, b.sentFiles.m):
		return errors.New("sets differ")
	case !slices.Equal(a.index.packs, b.index.packs) || !maps.Equal(a.index.chunks, b.index.chunks):
		return errors.New("index differs")
	case !maps.EqualFunc(a.quarantine, b.quarantine, func(x, y quarantineEntry) bool { return x.Stage == y.Stage && x.Error == y.Error && x.At.Equal(y.At) }):
		return errors.New("quarantine differs")
	case !maps.Equal(a.retry, b.retry):
		return errors.New("retry differs")
	case a.maxReceived != b.maxReceived || a.maxSent != b.maxSent || a.maxMillis != b.maxMillis:
		return errors.New("derived fields differ")
	}
	return nil
}

// saveState saves s into st under cpID as Journal.save does.
func saveState(t testing.TB, st store.Store, cpID string, s *state) savePlan {
	t.Helper()
	ctx := context.Background()
	p := s.plan(cpID)
	if p.seg != nil {
		if err := st.PutLocal(ctx, p.segID, p.seg); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PutLocal(ctx, cpID, p.head); err != nil {
		t.Fatal(err)
	}
	s.commit(p)
	return p
}

func loadState(t testing.TB, st store.Store, cpID string) *state {
	t.Helper()
	s, err := loadCheckpoint(context.Background(), st, cpID)
	if err != nil || s == nil {
		t.Fatalf("load: %v %v", s, err)
	}
	return s
}

// TestCheckpointRoundTrip: a checkpoint reads back as it was written;
// writing what was read changes nothing.
func TestCheckpointRoundTrip(t *testing.T) {
	st := newStore(t)
	s := sampleState()
	p := saveState(t, st, "cp", s)
	if !p.base || p.segID != "cp.0.0" || !json.Valid(p.seg) || !json.Valid(p.head) {
		t.Fatalf("first save: %+v", p)
	}
	back := loadState(t, st, "cp")
	if err := stateEqual(s, back); err != nil {
		t.Fatal(err)
	}
	if p2 := back.plan("cp"); p2.seg != nil || !bytes.Equal(p2.head, p.head) {
		t.Fatalf("a loaded checkpoint has something to save: %+v", p2)
	}
	if s.maxMillis != 1700000003000 || s.maxReceived != "1700000002000-docs.jsonl.gz" {
		t.Fatalf("derived: %d %q", s.maxMillis, s.maxReceived)
	}
	// Upstream's scalars: a number for lastLocalSeq.
	for in, want := range map[string]string{`0`: "", `17`: "17", `"9-x"`: "9-x", `null`: ""} {
		h, err := decodeHead([]byte(`{"version":1,"lastLocalSeq":` + in + `}`))
		if err != nil || h.lastLocalSeq != want {
			t.Errorf("lastLocalSeq %s: %q %v", in, h.lastLocalSeq, err)
		}
	}
}

// TestCheckpointSegments: saves append what was added as a segment;
// the log is compacted into a new base (of the other generation) when it
// outgrows the base or reaches maxSegments; a segment written without
// its head is ignored; a reset writes an empty base.
func TestCheckpointSegments(t *testing.T) {
	st := newStore(t)
	s := newState()
	for i := range 10 {
		s.knownIDs.add(fmt.Sprintf("h:%04d", i))
	}
	saveState(t, st, "cp", s)
	for i := range maxSegments - 1 {
		s.knownIDs.add(fmt.Sprintf("doc%d-1-x", i))
		p := saveState(t, st, "cp", s)
		if p.base || p.segID != fmt.Sprintf("cp.0.%d", i+1) || !strings.Contains(string(p.seg), fmt.Sprintf(`"knownIDs":["doc%d-1-x"]`, i)) {
			t.Fatalf("save %d: %s %s", i, p.segID, p.seg)
		}
	}
	if s.segments != maxSegments {
		t.Fatalf("%d segments", s.segments)
	}
	s.sentIDs.add("mine-1-y")
	p := saveState(t, st, "cp", s)
	if !p.base || p.segID != "cp.1.0" || s.gen != 1 || s.segments != 1 {
		t.Fatalf("compaction at %d segments: %s gen %d segments %d", maxSegments, p.segID, s.gen, s.segments)
	}
	if err := stateEqual(s, loadState(t, st, "cp")); err != nil {
		t.Fatal(err)
	}

	// A segment written, the head not (a crash): the previous checkpoint.
	before := loadState(t, st, "cp")
	s.knownIDs.add("lost-1-z")
	p = s.plan("cp")
	if err := st.PutLocal(t.Context(), p.segID, p.seg); err != nil {
		t.Fatal(err)
	}
	after := loadState(t, st, "cp")
	if err := stateEqual(before, after); err != nil || after.knownIDs.has("lost-1-z") {
		t.Fatalf("crash: %v", err)
	}
	// The loaded state saves over the orphan.
	after.knownIDs.add("next-1-z")
	saveState(t, st, "cp", after)
	if got := loadState(t, st, "cp"); !got.knownIDs.has("next-1-z") || got.knownIDs.has("lost-1-z") {
		t.Fatal("orphan segment read")
	}

	// A log larger than the base and than compactMin is compacted.
	s = loadState(t, st, "cp")
	big := strings.Repeat("x", compactMin)
	s.knownIDs.add(big)
	if p := saveState(t, st, "cp", s); !p.base || s.gen != 0 {
		t.Fatalf("large log: base %v gen %d", p.base, s.gen)
	}
	s.knownIDs.add("small")
	if p := saveState(t, st, "cp", s); p.base {
		t.Fatal("compacted a small log")
	}

	// A reset writes an empty base; the old segments are not read.
	s.reset()
	s.lastLocalSeq = "7"
	if p := saveState(t, st, "cp", s); !p.base || s.gen != 1 {
		t.Fatalf("reset: %+v", p)
	}
	if got := loadState(t, st, "cp"); got.knownIDs.len() != 0 || got.lastLocalSeq != "7" {
		t.Fatalf("after reset: %d known", got.knownIDs.len())
	}

	// A save planned before a reset does not mark the new sets saved.
	s.knownIDs.add("a")
	p = s.plan("cp")
	s.reset()
	s.knownIDs.add("b")
	s.commit(p)
	if p2 := s.plan("cp"); !p2.base || !strings.Contains(string(p2.seg), `"knownIDs":["b"]`) {
		t.Fatalf("after a reset during a save: %+v %s", p2, p2.seg)
	}
}

func TestCheckpointRejects(t *testing.T) {
	for _, in := range []string{
		``, `null`, `[]`, `{"version":1} {}`, `{"version":1,"lastLocalSeq":true}`, `{"version":1,"quarantine":[]}`,
		`{"lastLocalSeq":"1"}`, `{"version":1,"gen":2}`, `{"version":1,"segments":-1}`, `{"version":1,"segments":65}`,
	} {
		if _, err := decodeHead([]byte(in)); !errors.Is(err, engine.ErrMalformed) && !errors.Is(err, engine.ErrUnsupported) {
			t.Errorf("head %q: %v", in, err)
		}
	}
	if _, err := decodeHead([]byte(`{"version":2}`)); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("version 2: %v", err)
	}
	for _, in := range []string{
		``, `[]`, `{"knownIDs":"x"}`, `{"index":[["a"]]}`, `{"index":[["",[]]]}`, `{"index":[[1,[]]]}`, `{} {}`,
	} {
		if err := newState().applySegment([]byte(in)); !errors.Is(err, engine.ErrMalformed) {
			t.Errorf("segment %q: %v", in, err)
		}
	}
	// A head that counts a segment that is not there.
	st := newStore(t)
	if err := st.PutLocal(t.Context(), "cp", []byte(`{"version":1,"gen":0,"segments":2}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.PutLocal(t.Context(), "cp.0.0", []byte(`{"knownIDs":["a"]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCheckpoint(t.Context(), st, "cp"); !errors.Is(err, engine.ErrMalformed) {
		t.Errorf("missing segment: %v", err)
	}
}

// TestUnreadableCheckpoint: a checkpoint that cannot be read stops the
// run with a clear error and changes nothing; ResetCheckpoint starts over.
func TestUnreadableCheckpoint(t *testing.T) {
	ctx := t.Context()
	bucket := newMemObjects("")
	chainBucket(t, bucket, 2, nil)
	st := newStore(t)
	j := newJournal(t, Config{Local: st, Remote: bucket})
	if err := st.PutLocal(ctx, j.CheckpointID(), json.RawMessage(`{"version":1,"lastLocalSeq":true}`)); err != nil {
		t.Fatal(err)
	}
	_, err := j.Sync(ctx)
	var ee *engine.Error
	if !errors.Is(err, engine.ErrMalformed) || !errors.As(err, &ee) || ee.DocID != j.CheckpointID() || !strings.Contains(err.Error(), "ResetCheckpoint") {
		t.Fatalf("err %v", err)
	}
	if bucket.TotalGets() != 0 || bucket.Lists() != 0 {
		t.Fatal("the bucket was used")
	}
	if _, err := j.ChunkSource().FetchChunks(ctx, []string{"h:chunk00"}); !errors.Is(err, engine.ErrMalformed) {
		t.Fatalf("fetch: %v", err)
	}
	if err := j.ResetCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := j.Sync(ctx); err != nil || res.PacksReceived != 2 {
		t.Fatalf("%+v %v", res, err)
	}
}

// FuzzCheckpoint: neither decoder (head, segment) panics, and whatever
// they accept writes back to a checkpoint that reads the same.
func FuzzCheckpoint(f *testing.F) {
	s := sampleState()
	p := s.plan("cp")
	f.Add(p.head)
	f.Add(p.seg)
	f.Add(newState().encodeHead(0, 0))
	f.Add([]byte(`{"version":1,"lastLocalSeq":12,"gen":1,"segments":3,"retry":["b","a"],"quarantine":{"x":{"stage":"decode","error":"e","at":"2024-01-01T00:00:00Z"}}}`))
	f.Add([]byte(`{"knownIDs":["a","a"],"index":[["p",["h:1","h:1"]],["p",[]]],"sentFiles":["1-docs.jsonl.gz"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := decodeHead(b); err == nil {
			enc := h.encodeHead(h.gen, h.segments)
			back, err := decodeHead(enc)
			if err != nil {
				t.Fatalf("head re-read: %v\n%s", err, enc)
			}
			if again := back.encodeHead(back.gen, back.segments); !bytes.Equal(again, enc) {
				t.Fatalf("head unstable:\n%s\n%s", enc, again)
			}
		} else if !errors.Is(err, engine.ErrMalformed) && !errors.Is(err, engine.ErrUnsupported) {
			t.Fatalf("head error wraps no sentinel: %v", err)
		}
		s := newState()
		if err := s.applySegment(b); err != nil {
			if !errors.Is(err, engine.ErrMalformed) {
				t.Fatalf("segment error wraps no sentinel: %v", err)
			}
			return
		}
		enc := encodeSegment(s, offsets{})
		back := newState()
		if err := back.applySegment(enc); err != nil {
			t.Fatalf("segment re-read: %v\n%s", err, enc)
		}
		if again := encodeSegment(back, offsets{}); !bytes.Equal(again, enc) {
			t.Fatalf("segment unstable:\n%s\n%s", enc, again)
		}
	})
}
