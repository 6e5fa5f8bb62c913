package replicate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

func e2eeCodec(t *testing.T, passphrase string) *livesync.Codec {
	t.Helper()
	c, err := livesync.New(livesync.Config{
		Settings: livesync.Settings{Encrypt: true, Passphrase: passphrase, PathObfuscation: true},
		Salt:     bytes.Repeat([]byte{7}, 32),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// putLocal writes a local document as the store would (new_edits=true).
func putLocal(ep *memEP, d livesync.Doc) {
	var body map[string]any
	b, _ := d.MarshalJSON()
	_ = json.Unmarshal(b, &body)
	id := body["_id"].(string)
	delete(body, "_id")
	delete(body, "_rev")
	ep.write(id, body)
}

func TestTransformRoundTripE2EE(t *testing.T) {
	codec := e2eeCodec(t, "correct horse")
	local, remote := newMem("local"), newMem("remote")
	const text = "secret note body\nsecond line"
	meta, chunks, err := codec.FileDocs("dir/secret.md", []byte(text), 1000, 2000)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		putLocal(local, livesync.ChunkDoc(c))
	}
	putLocal(local, meta.Doc())

	r := newRep(t, replicate.Config{Local: local, Remote: replicate.Transform(remote, codec)})
	if _, err := r.Push(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The remote holds ciphertext only.
	for _, id := range remote.ids() {
		w := remote.winner(id)
		b, _ := json.Marshal(w)
		if strings.Contains(string(b), "secret") {
			t.Errorf("remote %s holds plaintext: %s", id, b)
		}
		if strings.HasPrefix(id, "h:") && w["e_"] != true {
			t.Errorf("remote chunk %s not encrypted: %s", id, b)
		}
	}
	if !strings.HasPrefix(meta.ID, "f:") || remote.winner(meta.ID) == nil {
		t.Fatalf("obfuscated metadata %s not on the remote", meta.ID)
	}

	// Pulling back into a fresh store yields the plaintext documents with
	// the same revisions.
	fresh := newMem("fresh")
	r2 := newRep(t, replicate.Config{Local: fresh, Remote: replicate.Transform(remote, codec)})
	if _, err := r2.Pull(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameDocs(t, local, fresh)
	raw, _ := json.Marshal(fresh.winner(meta.ID))
	d, err := livesync.ParseDoc(raw)
	if err != nil {
		t.Fatal(err)
	}
	m, err := livesync.ParseMeta(d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := livesync.ReadFile(m, func(id string) (string, error) {
		w := fresh.winner(id)
		if w == nil {
			return "", engine.ErrNotFound
		}
		return w["data"].(string), nil
	})
	if err != nil || string(got) != text || m.Path != "dir/secret.md" {
		t.Errorf("read back %q (%s), %v", got, m.Path, err)
	}
}

func TestTransformWrongPassphraseNamesTheDocument(t *testing.T) {
	codec := e2eeCodec(t, "right")
	local, remote := newMem("local"), newMem("remote")
	_, chunks, _ := codec.FileDocs("a.md", []byte("hello"), 1, 1)
	putLocal(local, livesync.ChunkDoc(chunks[0]))
	if _, err := newRep(t, replicate.Config{Local: local, Remote: replicate.Transform(remote, codec)}).Push(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := newRep(t, replicate.Config{Local: newMem("x"), Remote: replicate.Transform(remote, e2eeCodec(t, "wrong"))})
	_, err := r.Pull(context.Background())
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.DocID != chunks[0].ID || !errors.Is(err, engine.ErrDecrypt) {
		t.Fatalf("err = %v, want a decrypt error naming %s", err, chunks[0].ID)
	}
}

// rawGetter answers BulkGet with fixed bytes.
type rawGetter struct {
	engine.Endpoint
	docs []json.RawMessage
}

func (g rawGetter) BulkGet(context.Context, []engine.DocRev) ([]json.RawMessage, error) {
	return g.docs, nil
}

// A plain vault's documents pass through the transform as received (no
// second encoding); an E2EE vault's are decoded.
func TestTransformPassesPlainDocumentsThrough(t *testing.T) {
	raw := json.RawMessage(`{"_id":"h:x", "type":"leaf","data":"hello","_rev":"1-a"}`)
	plain, err := livesync.New(livesync.Config{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := replicate.Transform(rawGetter{docs: []json.RawMessage{raw}}, plain).BulkGet(context.Background(), nil)
	if err != nil || len(got) != 1 || !bytes.Equal(got[0], raw) {
		t.Fatalf("plain: %s, %v; want the bytes as received", got, err)
	}
	codec := e2eeCodec(t, "pw")
	enc, err := codec.EncodeRemote(livesync.Doc{"_id": json.RawMessage(`"h:x"`), "_rev": json.RawMessage(`"1-a"`),
		"type": json.RawMessage(`"leaf"`), "data": json.RawMessage(`"hello"`)})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := enc.MarshalJSON()
	got, err = replicate.Transform(rawGetter{docs: []json.RawMessage{b}}, codec).BulkGet(context.Background(), nil)
	if err != nil || len(got) != 1 || !strings.Contains(string(got[0]), `"data":"hello"`) || strings.Contains(string(got[0]), `"e_"`) {
		t.Fatalf("e2ee: %s, %v; want the decrypted document", got, err)
	}
}
