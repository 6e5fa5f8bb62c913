//go:build !js

package p2p

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// A served vault sends each chunk's revision with its encrypted data: the
// revision its plaintext store holds, which is the plug-in's revision of
// the chunk (store.ChunkRev over the plaintext); the document built from
// the wire decodes to the plaintext.
func TestServedVaultServesChunkRevisions(t *testing.T) {
	p := newVaultPeer(t, "laptop", e2ee)
	var text strings.Builder
	for i := range 400 {
		fmt.Fprintf(&text, "line %d: chunk revisions travel with the chunks\n", i)
	}
	p.write(t, "note.md", text.String())
	served := ServedVault(p.v, "g", e2ee)
	salt := bytes.Repeat([]byte{9}, negotiate.SaltSize)
	raw, _ := json.Marshal(negotiate.NewSyncParameters(salt))
	if _, err := served.Records.Write(t.Context(), negotiate.RecordSyncParameters, raw, ""); err != nil {
		t.Fatal(err)
	}
	st := p.v.Store()
	rows, err := st.AllDocs(t.Context(), store.AllDocsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	revs := map[engine.ChunkID]string{}
	var ids []engine.ChunkID
	for _, r := range rows {
		if docid.IsChunkID(r.ID) {
			ids, revs[r.ID] = append(ids, r.ID), r.Rev
		}
	}
	if len(ids) < 2 {
		t.Fatalf("%d chunks, want several", len(ids))
	}
	client := servePair(t, served.Chunks, true)
	found, missing, err := client.FetchRaw(t.Context(), append(ids, "h:+absent"))
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != len(ids) || len(missing) != 1 || missing[0] != "h:+absent" {
		t.Fatalf("found %d of %d, missing %v", len(found), len(ids), missing)
	}
	codec, err := livesync.New(livesync.Config{Settings: e2ee, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := st.GetChunks(t.Context(), ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range found {
		if c.Rev == "" || c.Rev != revs[c.ID] || c.Rev != store.ChunkRev(c.ID, plain[c.ID].Data) {
			t.Errorf("chunk %s served with rev %q, stored %q", c.ID, c.Rev, revs[c.ID])
		}
		d := livesync.ChunkDoc(livesync.Chunk{ID: c.ID, Data: c.Data})
		d["e_"] = json.RawMessage("true")
		dec, err := codec.DecodeRemote(d)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := livesync.ParseChunk(dec); got.Data != plain[c.ID].Data || strings.Contains(c.Data, "travel") {
			t.Errorf("chunk %s: served data does not decode to the stored plaintext", c.ID)
		}
	}
}

// DocChunks serves the revision of the stored chunk document (a relay's
// remote form); a reader that knows no revisions serves none, and the
// chunks still arrive.
func TestDocChunksServeRevisions(t *testing.T) {
	st, err := store.NewMemory(store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const rev = "1-0123456789abcdef0123456789abcdef"
	doc := `{"_id":"h:+abc","_rev":"` + rev + `","data":"%=ciphertext","type":"leaf","e_":true}`
	if _, err := st.BulkDocs(t.Context(), []json.RawMessage{json.RawMessage(doc)}); err != nil {
		t.Fatal(err)
	}
	client := servePair(t, DocChunks(st), true)
	found, _, err := client.FetchRaw(t.Context(), []engine.ChunkID{"h:+abc"})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Rev != rev || found[0].Data != "%=ciphertext" {
		t.Fatalf("served %+v, want the stored document's data and revision", found)
	}
	// FetchChunks reads the same frames as before the revisions.
	res, err := client.FetchChunks(t.Context(), []engine.ChunkID{"h:+abc"})
	if err != nil || len(res.Found) != 1 || res.Found[0].Data != "%=ciphertext" {
		t.Fatalf("FetchChunks: %+v, %v", res, err)
	}
	mem := enginetest.NewMemChunks(engine.Chunk{ID: "h:x", Data: "plain"})
	found, _, err = servePair(t, mem, true).FetchRaw(t.Context(), []engine.ChunkID{"h:x"})
	if err != nil || len(found) != 1 || found[0].Rev != "" || found[0].Data != "plain" {
		t.Fatalf("without revisions: %+v, %v", found, err)
	}
}
