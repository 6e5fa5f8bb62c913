package decorate

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// TestEncodeChunkRevision checks that a chunk the bridge encodes from a
// journal's plaintext carries the revision the plug-in gives that chunk,
// "1-" + md5 of the UTF-8 JSON.stringify of the plaintext {_id, data,
// type} (values computed with Node's crypto or taken
// from the vault dumps), in the
// plain and in the encrypted remote form alike.
func TestEncodeChunkRevision(t *testing.T) {
	salt := bytes.Repeat([]byte{7}, 32)
	e2ee, err := livesync.New(livesync.Config{Settings: livesync.Settings{Encrypt: true, PathObfuscation: true, Passphrase: "vector-passphrase"}, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := livesync.New(livesync.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		codec *livesync.Codec
		chunk engine.Chunk
		want  string
	}{
		{plain, engine.Chunk{ID: "h:a", Data: "alpha"}, "1-e0465aef5f90592392fa563b1b68abe0"},
		{plain, engine.Chunk{ID: "h:b", Data: "bêta\n"}, "1-20e02bec8e08a722e8d06cb9ad532bd2"},
		// A chunk of engine/testdata/vectors/vault-dump-e2ee.json, with the
		// revision the real library gave it.
		{e2ee, engine.Chunk{ID: "h:+17u8alw5g4ih6", Data: "or sync elit\nA28: sit et vault replicate incididunt pouchdb sit journal dolore ut eiusmod encrypt\nA29: over aliqua magna sync chunk fox incidid"}, "1-a01bd2a7d2171709355c608bc7dec577"},
	} {
		raw, err := EncodeChunk(c.codec, c.chunk)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			ID  string `json:"_id"`
			Rev string `json:"_rev"`
		}
		if err := json.Unmarshal(raw, &d); err != nil || d.ID != c.chunk.ID {
			t.Fatalf("EncodeChunk(%s) = %s, %v", c.chunk.ID, raw, err)
		}
		if d.Rev != c.want {
			t.Errorf("EncodeChunk(%s) revision %s, the plug-in gives %s", c.chunk.ID, d.Rev, c.want)
		}
	}
}
