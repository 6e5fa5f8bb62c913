package decorate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

func newMemStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.NewMemory(store.Options{Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Encoded serves a plaintext store in the remote form (chunks encrypted,
// the path obfuscated) with the same ids and revisions, and writes what
// it is sent back in plaintext: a round trip between two replicas gives
// the first one's documents.
func TestEncodedRoundTrip(t *testing.T) {
	ctx := t.Context()
	codec := codecWithSalt(t, 3)
	getCodec := func(context.Context) (*livesync.Codec, error) { return codec, nil }
	const secret = "a secret note body"
	meta, chunks, err := codec.FileDocs("notes/private.md", []byte(secret), 1000, 2000)
	if err != nil {
		t.Fatal(err)
	}
	meta.Rev = "1-abc"
	mdoc, _ := meta.Doc().MarshalJSON()
	docs := []json.RawMessage{mdoc}
	revs := []engine.DocRev{{ID: meta.ID, Rev: meta.Rev}}
	var ids []engine.ChunkID
	for _, c := range chunks {
		d := livesync.ChunkDoc(c)
		d["_rev"], _ = json.Marshal(store.ChunkRev(c.ID, c.Data))
		raw, _ := d.MarshalJSON()
		docs = append(docs, raw)
		revs = append(revs, engine.DocRev{ID: c.ID, Rev: store.ChunkRev(c.ID, c.Data)})
		ids = append(ids, c.ID)
	}
	a := newMemStore(t)
	if _, err := a.BulkDocs(ctx, docs); err != nil {
		t.Fatal(err)
	}
	served := Encoded(a, getCodec)
	remote, err := served.BulkGet(ctx, revs)
	if err != nil || len(remote) != len(revs) {
		t.Fatalf("bulk get: %d docs, %v", len(remote), err)
	}
	for _, d := range remote {
		if strings.Contains(string(d), secret) || strings.Contains(string(d), "private.md") {
			t.Fatalf("the remote form holds plaintext: %s", d)
		}
	}
	got, err := served.GetChunks(ctx, ids)
	if err != nil || len(got) != len(ids) {
		t.Fatalf("get chunks: %d, %v", len(got), err)
	}
	for _, c := range chunks {
		if g := got[c.ID]; g.Data == c.Data || !strings.HasPrefix(g.Data, "%") {
			t.Fatalf("chunk %s served as %q, want ciphertext", c.ID, g.Data)
		}
	}

	b := newMemStore(t)
	if res, err := Encoded(b, getCodec).BulkDocs(ctx, remote); err != nil || len(res) != len(remote) {
		t.Fatalf("bulk docs: %+v, %v", res, err)
	}
	raw, err := b.Get(ctx, meta.ID, store.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := livesync.ParseDoc(raw)
	back, err := livesync.ParseMeta(d)
	if err != nil || back.Path != meta.Path || back.Rev != meta.Rev || back.Size != meta.Size {
		t.Fatalf("written back: %+v, %v; want %+v", back, err, meta)
	}
	plain, err := b.GetChunks(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		if plain[c.ID].Data != c.Data {
			t.Fatalf("chunk %s written back as %q", c.ID, plain[c.ID].Data)
		}
	}
	if diff, err := Encoded(b, getCodec).RevsDiff(ctx, map[string][]string{meta.ID: {meta.Rev}}); err != nil || len(diff) != 0 {
		t.Fatalf("revs diff after the round trip: %v, %v", diff, err)
	}
}

// The codec's error is the call's; calls that need no codec pass.
func TestEncodedCodecError(t *testing.T) {
	ctx := t.Context()
	st := newMemStore(t)
	if _, err := st.BulkDocs(ctx, []json.RawMessage{json.RawMessage(`{"_id":"h:a","_rev":"1-a","type":"leaf","data":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	noSalt := errors.New("no salt yet")
	e := Encoded(st, func(context.Context) (*livesync.Codec, error) { return nil, noSalt })
	if _, err := e.BulkGet(ctx, []engine.DocRev{{ID: "h:a", Rev: "1-a"}}); !errors.Is(err, noSalt) {
		t.Fatalf("bulk get: %v", err)
	}
	if _, err := e.GetChunks(ctx, []engine.ChunkID{"h:a"}); !errors.Is(err, noSalt) {
		t.Fatalf("get chunks: %v", err)
	}
	if _, err := e.BulkDocs(ctx, []json.RawMessage{json.RawMessage(`{"_id":"b","_rev":"1-b"}`)}); !errors.Is(err, noSalt) {
		t.Fatalf("bulk docs: %v", err)
	}
	if info, err := e.Info(ctx); err != nil || info.DocCount != 1 {
		t.Fatalf("info: %+v, %v", info, err)
	}
	if page, err := e.Changes(ctx, engine.ChangesRequest{}); err != nil || len(page.Results) != 1 {
		t.Fatalf("changes: %+v, %v", page, err)
	}
}

type bulkRecorder struct {
	engine.Endpoint
	calls  [][]string
	refuse string
}

func (b *bulkRecorder) BulkDocs(_ context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	var ids []string
	var out []engine.BulkDocResult
	for _, d := range docs {
		id := rawDocID(d)
		ids = append(ids, id)
		r := engine.BulkDocResult{ID: id}
		if id == b.refuse {
			r.Error = "forbidden"
		}
		out = append(out, r)
	}
	b.calls = append(b.calls, ids)
	return out, nil
}

// ChunksFirst sends a batch's chunks alone first; a refused chunk stops
// the metadata.
func TestChunksFirst(t *testing.T) {
	rec := &bulkRecorder{}
	docs := []json.RawMessage{json.RawMessage(`{"_id":"note.md"}`), json.RawMessage(`{"_id":"h:abc"}`)}
	res, err := ChunksFirst(rec).BulkDocs(context.Background(), docs)
	if err != nil || len(res) != 2 || len(rec.calls) != 2 || rec.calls[0][0] != "h:abc" || rec.calls[1][0] != "note.md" {
		t.Fatalf("calls %v, %v: want the chunk first, alone", rec.calls, err)
	}
	rec = &bulkRecorder{refuse: "h:abc"}
	if _, err := ChunksFirst(rec).BulkDocs(context.Background(), docs); err == nil || len(rec.calls) != 1 {
		t.Fatalf("a refused chunk: calls %v, %v; want the metadata held back", rec.calls, err)
	}
}
