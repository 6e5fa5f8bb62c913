package store_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
	"github.com/livesync-go/livesync-go/engine/jsstring"
	"github.com/livesync-go/livesync-go/engine/store"
)

// dumpChunk is a chunk of a vault dump's local database, as the plug-in
// stored it: plaintext, with the revision PouchDB gave it.
type dumpChunk struct {
	ID   string `json:"_id"`
	Rev  string `json:"_rev"`
	Data string `json:"data"`
	Type string `json:"type"`
}

// vaultDumpChunks reads the local chunks of both vault dumps. The E2EE
// dump's local database holds the plaintext chunks whose revisions its
// encrypted remote copies carry (vectors README, vault-dump-*.json).
func vaultDumpChunks(t *testing.T) []dumpChunk {
	t.Helper()
	var out []dumpChunk
	for _, name := range []string{"vault-dump-plain.json", "vault-dump-e2ee.json"} {
		raw, err := os.ReadFile(testvectors.Path(name))
		if err != nil {
			t.Fatal(err)
		}
		var dump struct {
			Local struct {
				AllDocs []struct {
					Doc json.RawMessage `json:"doc"`
				} `json:"allDocs"`
			} `json:"local"`
			Remote struct {
				AllDocs []struct {
					ID    string `json:"id"`
					Value struct {
						Rev string `json:"rev"`
					} `json:"value"`
				} `json:"allDocs"`
			} `json:"remote"`
		}
		if err := json.Unmarshal(raw, &dump); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		remote := map[string]string{}
		for _, r := range dump.Remote.AllDocs {
			remote[r.ID] = r.Value.Rev
		}
		n := 0
		for _, r := range dump.Local.AllDocs {
			var c dumpChunk
			if err := json.Unmarshal(r.Doc, &c); err != nil {
				t.Fatal(err)
			}
			if c.Type != "leaf" {
				continue
			}
			if remote[c.ID] != c.Rev {
				t.Fatalf("%s: chunk %s is %s locally, %s on the remote", name, c.ID, c.Rev, remote[c.ID])
			}
			out = append(out, c)
			n++
		}
		if n != 292 {
			t.Fatalf("%s: %d local chunks, want 292", name, n)
		}
	}
	return out
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// latin1MD5 is md5 over each UTF-16 code unit of s truncated to a byte:
// Node's hash.update(s, "binary"), which the vectors' Node build used.
func latin1MD5(s string) string {
	units := utf16.Encode([]rune(s))
	b := make([]byte, len(units))
	for i, u := range units {
		b[i] = byte(u)
	}
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// TestChunkRevVaultDumps checks ChunkRev, and the revision PutChunks and
// Put give a new chunk, against the revisions the real plug-in library
// gave the chunks of both vault dumps: "chunks are written locally with
// new_edits: true, so PouchDB 9 computes a deterministic rev
// 1-<md5hex(JSON.stringify(doc without _rev_tree))>" (engine/FORMAT.md §1.4).
//
// The dumps were made under Node, whose build hashes latin1-truncated
// code units; the plug-in in Obsidian hashes UTF-8. The two agree on
// ASCII content, which must match the dumps exactly. For the others the
// same JSON.stringify text, hashed the Node way, must give the dump's
// revision, which proves the hashed text byte for byte; that ChunkRev
// hashes it as UTF-8 is TestChunkRevUTF8 (and TestChunkRevNode).
func TestChunkRevVaultDumps(t *testing.T) {
	ctx := context.Background()
	chunks := vaultDumpChunks(t)
	st := openMemory(t)
	defer st.Close()
	var ascii []engine.Chunk
	for _, c := range chunks {
		if !isASCII(c.ID + c.Data) {
			continue
		}
		if got := store.ChunkRev(c.ID, c.Data); got != c.Rev {
			t.Errorf("ChunkRev(%s) = %s, the plug-in gave %s", c.ID, got, c.Rev)
		}
		ascii = append(ascii, engine.Chunk{ID: c.ID, Data: c.Data})
	}
	if len(ascii) != 10 {
		t.Fatalf("%d ASCII chunks in the dumps, want 10", len(ascii))
	}
	// The store, through both ways of writing a new chunk.
	if err := st.PutChunks(ctx, ascii[:5]); err != nil {
		t.Fatal(err)
	}
	for _, c := range ascii[5:] {
		doc, _ := json.Marshal(map[string]string{"_id": c.ID, "type": "leaf", "data": c.Data})
		if _, err := st.Put(ctx, doc); err != nil {
			t.Fatal(err)
		}
	}
	docs, err := st.AllDocs(ctx, store.AllDocsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, c := range chunks {
		want[c.ID] = c.Rev
	}
	if len(docs) != len(ascii) {
		t.Fatalf("%d documents stored, want %d", len(docs), len(ascii))
	}
	for _, d := range docs {
		if d.Rev != want[d.ID] {
			t.Errorf("stored chunk %s has revision %s, the plug-in gave %s", d.ID, d.Rev, want[d.ID])
		}
	}
	// Non-ASCII: the same text, hashed as the Node build hashes it.
	nonASCII := 0
	for _, c := range chunks {
		if isASCII(c.ID + c.Data) {
			continue
		}
		nonASCII++
		text := `{"_id":` + quote(c.ID) + `,"data":` + quote(c.Data) + `,"type":"leaf"}`
		if got := "1-" + latin1MD5(text); got != c.Rev {
			t.Errorf("chunk %s: JSON.stringify text hashed as Node does = %s, the library gave %s", c.ID, got, c.Rev)
		}
		if store.ChunkRev(c.ID, c.Data) == c.Rev {
			t.Errorf("chunk %s: ChunkRev gives the Node build's revision, not the UTF-8 one", c.ID)
		}
	}
	if nonASCII != 574 {
		t.Fatalf("%d non-ASCII chunks, want 574", nonASCII)
	}
}

// quote is jsstring.AppendJSONString as a string, the encoder ChunkRev
// uses (its own tests compare it with Node's JSON.stringify).
func quote(s string) string { return string(jsstring.AppendJSONString(nil, s)) }

// TestChunkRevUTF8 pins revisions of non-ASCII chunks computed outside
// Go: md5 of the UTF-8 bytes of JSON.stringify({_id, data, type:"leaf"})
// by Node's crypto (hash.update(s, "utf8")), and for "bêta\n" also by
// coreutils md5sum. They are what spark-md5 gives in Obsidian.
func TestChunkRevUTF8(t *testing.T) {
	for _, c := range []struct{ id, data, want string }{
		{"h:a", "alpha", "1-e0465aef5f90592392fa563b1b68abe0"},
		{"h:+c", "%=x", "1-77744017eef9fa4bc01c24ab608484e8"},
		{"h:b", "bêta\n", "1-20e02bec8e08a722e8d06cb9ad532bd2"},
		{"h:u", "文書 😀 <&> \u2028\u0001\u007f", "1-368ea4588cee0935ec83bae246c837c3"},
	} {
		if got := store.ChunkRev(c.id, c.data); got != c.want {
			t.Errorf("ChunkRev(%q, %q) = %s, want %s", c.id, c.data, got, c.want)
		}
	}
}
