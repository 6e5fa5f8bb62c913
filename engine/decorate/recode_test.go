package decorate

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

func codecWithSalt(t *testing.T, b byte) *livesync.Codec {
	t.Helper()
	c, err := livesync.New(livesync.Config{
		Settings: livesync.Settings{Passphrase: "correct horse", Encrypt: true, PathObfuscation: true},
		Salt:     bytes.Repeat([]byte{b}, 32),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// chunkData decodes a remote-form chunk document with codec.
func chunkData(t *testing.T, codec *livesync.Codec, raw json.RawMessage) (string, string) {
	t.Helper()
	d, err := livesync.ParseDoc(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, err := codec.DecodeRemote(d)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	c, err := livesync.ParseChunk(p)
	if err != nil {
		t.Fatal(err)
	}
	return c.Data, p.Rev()
}

// TestRecode: documents read through the decorator come out encrypted
// with the local salt, documents written go out with the remote's; the
// revision is kept; the other salt cannot read them.
func TestRecode(t *testing.T) {
	remote, local := codecWithSalt(t, 1), codecWithSalt(t, 2)
	chunk := engine.Chunk{ID: "h:+abc", Data: "hello"}
	onRemote, err := EncodeChunk(remote, chunk)
	if err != nil {
		t.Fatal(err)
	}
	ep := &fakeEndpoint{fl: &flaky{}, docs: []json.RawMessage{onRemote}}
	r := Recode(ep, Recoder{Remote: remote, Local: local})
	got, err := r.BulkGet(t.Context(), []engine.DocRev{{ID: chunk.ID}})
	if err != nil || len(got) != 1 {
		t.Fatalf("BulkGet: %v %v", got, err)
	}
	data, rev := chunkData(t, local, got[0])
	if data != "hello" || rev != store.ChunkRev(chunk.ID, chunk.Data) {
		t.Errorf("read %q rev %q", data, rev)
	}
	d, _ := livesync.ParseDoc(got[0])
	if _, err := remote.DecodeRemote(d); err == nil {
		t.Error("the remote's salt still opens the document read for the local side")
	}
	if _, err := r.BulkDocs(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	data, _ = chunkData(t, remote, ep.written[0])
	if data != "hello" {
		t.Errorf("written %q", data)
	}
	if _, err := r.BulkDocs(t.Context(), []json.RawMessage{json.RawMessage(`not json`)}); err == nil {
		t.Error("a broken document was written")
	}
	same := Recoder{Remote: remote, Local: remote}
	if _, err := same.ToLocal(got[0]); !errors.Is(err, engine.ErrDecrypt) {
		t.Errorf("a document of another salt decoded: %v", err)
	}
}

// TestCodecView: the view reads plaintext out of a store that keeps the
// remote form and writes the remote form into it.
func TestCodecView(t *testing.T) {
	ctx := t.Context()
	st, err := store.NewMemory(store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	codec := codecWithSalt(t, 3)
	v := CodecView(st, codec, CodecOptions{})
	chunk := engine.Chunk{ID: "h:+c1", Data: "plain words"}
	if err := v.PutChunks(ctx, []engine.Chunk{chunk}); err != nil {
		t.Fatal(err)
	}
	if err := v.PutChunks(ctx, []engine.Chunk{chunk}); err != nil { // present: skipped
		t.Fatal(err)
	}
	raw, err := st.Get(ctx, chunk.ID, store.GetOptions{})
	if err != nil || bytes.Contains(raw, []byte("plain words")) {
		t.Fatalf("stored %s %v: want ciphertext", raw, err)
	}
	got, err := v.GetChunks(ctx, []engine.ChunkID{chunk.ID, "h:+none"})
	if err != nil || len(got) != 1 || got[chunk.ID] != chunk {
		t.Fatalf("GetChunks %v %v", got, err)
	}
	plainDoc, _ := livesync.ChunkDoc(livesync.Chunk{ID: "h:+c2", Data: "two"}).MarshalJSON()
	var m map[string]any
	_ = json.Unmarshal(plainDoc, &m)
	m["_rev"] = "1-aa"
	m["_revisions"] = map[string]any{"start": 1, "ids": []string{"aa"}}
	plainDoc, _ = json.Marshal(m)
	if _, err := v.BulkDocs(ctx, []json.RawMessage{plainDoc}); err != nil {
		t.Fatal(err)
	}
	if raw, _ := st.Get(ctx, "h:+c2", store.GetOptions{}); bytes.Contains(raw, []byte(`"two"`)) {
		t.Fatalf("BulkDocs stored plaintext: %s", raw)
	}
	docs, err := v.BulkGet(ctx, []engine.DocRev{{ID: "h:+c2", Rev: "1-aa"}})
	if err != nil || len(docs) != 1 || !bytes.Contains(docs[0], []byte(`"two"`)) {
		t.Fatalf("BulkGet %s %v", docs, err)
	}
	if d, err := v.Get(ctx, "h:+c2", store.GetOptions{}); err != nil || !bytes.Contains(d, []byte(`"two"`)) {
		t.Fatalf("Get %s %v", d, err)
	}
	if _, err := v.Put(ctx, plainDoc); !errors.Is(err, engine.ErrUnsupported) {
		t.Errorf("Put: %v", err)
	}
}

// TestCodecViewPlain: a view declared unencrypted refuses E2EE chunks
// with the caller's error and stores nothing.
func TestCodecViewPlain(t *testing.T) {
	st, err := store.NewMemory(store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	plainCodec, err := livesync.New(livesync.Config{})
	if err != nil {
		t.Fatal(err)
	}
	errPlain := errors.New("declared unencrypted")
	v := CodecView(st, plainCodec, CodecOptions{Plain: errPlain})
	if err := v.PutChunks(t.Context(), []engine.Chunk{{ID: "h:+x", Data: "secret"}}); !errors.Is(err, errPlain) {
		t.Fatalf("PutChunks: %v", err)
	}
	if err := v.PutChunks(t.Context(), []engine.Chunk{{ID: "h:y", Data: "open"}}); err != nil {
		t.Fatalf("a plain chunk: %v", err)
	}
	if got, _ := st.GetChunks(t.Context(), []engine.ChunkID{"h:+x", "h:y"}); len(got) != 1 {
		t.Fatalf("stored %v", got)
	}
}
