package chunkid

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
)

type chunkVectorFile struct {
	Case        string `json:"case"`
	Variant     string `json:"variant"`
	IdenticalTo string `json:"identicalTo"`
	ChunkCount  int    `json:"chunkCount"`
	Chunks      []struct {
		Data            string `json:"data"`
		DataUTF16Length int    `json:"dataUtf16Length"`
	} `json:"chunks"`
	HashVariants map[string]struct {
		HashAlg    string `json:"hashAlg"`
		Encrypt    bool   `json:"encrypt"`
		Passphrase string `json:"passphrase"`
	} `json:"hashVariants"`
	IDs map[string][]string `json:"ids"`
}

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(testvectors.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestChunkVectors checks every id of every hash variant of every file in
// testdata/vectors/chunks (produced by the real LiveSync library; README
// "chunks/ — chunking and chunk ids"), and the recorded UTF-16 lengths.
func TestChunkVectors(t *testing.T) {
	var index []struct {
		File        string `json:"file"`
		ChunkCount  int    `json:"chunkCount"`
		IdenticalTo string `json:"identicalTo"`
	}
	readJSON(t, "chunks/index.json", &index)
	if len(index) != 42 {
		t.Fatalf("index lists %d files, want 42 (7 cases × 3 splitters × 2 sizes)", len(index))
	}
	wantVariants := map[string]HashAlg{
		"xxhash64": XXHash64, "xxhash32": XXHash32, "legacy-xxhash32raw": Legacy,
		"mixed-purejs": MixedPureJS, "sha1": SHA1,
	}
	checked, files := 0, 0
	for _, entry := range index {
		var f chunkVectorFile
		readJSON(t, "chunks/"+entry.File, &f)
		if f.IdenticalTo != "" {
			if f.IdenticalTo != entry.IdenticalTo {
				t.Errorf("%s: identicalTo %q, index says %q", entry.File, f.IdenticalTo, entry.IdenticalTo)
			}
			continue // its chunks and ids are checked with the file it names
		}
		files++
		if len(f.Chunks) != entry.ChunkCount || f.ChunkCount != entry.ChunkCount {
			t.Errorf("%s: %d chunks, index says %d", entry.File, len(f.Chunks), entry.ChunkCount)
		}
		if len(f.HashVariants) != 2*len(wantVariants) {
			t.Errorf("%s: %d hash variants, want %d", entry.File, len(f.HashVariants), 2*len(wantVariants))
		}
		for i, c := range f.Chunks {
			if n, valid := utf16Len(c.Data); n != c.DataUTF16Length || !valid {
				t.Errorf("%s chunk %d: utf16Len = %d, %v; want %d, true", entry.File, i, n, valid, c.DataUTF16Length)
			}
		}
		for name, v := range f.HashVariants {
			base := name
			if v.Encrypt {
				base = name[:len(name)-len("+e2ee")]
				if name != base+"+e2ee" {
					t.Errorf("%s: encrypting variant %q lacks the +e2ee suffix", entry.File, name)
				}
			}
			if alg, ok := wantVariants[base]; !ok || HashAlg(v.HashAlg) != alg {
				t.Errorf("%s: variant %q has hashAlg %q", entry.File, name, v.HashAlg)
			}
			h, err := New(HashAlg(v.HashAlg), v.Encrypt, v.Passphrase)
			if err != nil {
				t.Fatalf("%s %s: %v", entry.File, name, err)
			}
			ids := f.IDs[name]
			if len(ids) != len(f.Chunks) {
				t.Fatalf("%s %s: %d ids for %d chunks", entry.File, name, len(ids), len(f.Chunks))
			}
			for i, c := range f.Chunks {
				if got := h.ID(c.Data); got != ids[i] {
					t.Errorf("%s %s chunk %d: ID = %q, want %q", entry.File, name, i, got, ids[i])
				}
				checked++
			}
		}
	}
	t.Logf("checked %d chunk ids in %d distinct vector files", checked, files)
	// 22 distinct files × 10 hash variants × their chunks.
	if files != 22 || checked != 21920 {
		t.Fatalf("checked %d ids in %d files, want 21920 in 22", checked, files)
	}
}

// TestVectorPassphraseMaterial checks the passphrase material against
// e2ee.json intermediates.chunkIdHashing.
func TestVectorPassphraseMaterial(t *testing.T) {
	var v struct {
		Passphrase    string `json:"passphrase"`
		Intermediates struct {
			ChunkIDHashing struct {
				SaltOfID              string `json:"saltOfId"`
				UsingLetters          int    `json:"usingLetters"`
				HashedPassphraseInput string `json:"hashedPassphraseInput"`
				HashedPassphrase      string `json:"hashedPassphrase"`
				HashedPassphrase32    uint32 `json:"hashedPassphrase32"`
				MurmurSeed            uint32 `json:"murmurSeed"`
			} `json:"chunkIdHashing"`
		} `json:"intermediates"`
	}
	readJSON(t, "e2ee.json", &v)
	c := v.Intermediates.ChunkIDHashing
	if c.SaltOfID != saltOfID || c.MurmurSeed != seedMurmurHash {
		t.Errorf("saltOfId %q seed %d, want %q %d", c.SaltOfID, c.MurmurSeed, saltOfID, seedMurmurHash)
	}
	if c.UsingLetters != len(v.Passphrase)*3/4 || c.HashedPassphraseInput != saltOfID+v.Passphrase[:c.UsingLetters] {
		t.Errorf("usingLetters %d input %q do not follow floor(3/4 × length)", c.UsingLetters, c.HashedPassphraseInput)
	}
	if got := MixedEach(c.HashedPassphraseInput); got != c.HashedPassphrase {
		t.Errorf("MixedEach(input) = %q, want %q", got, c.HashedPassphrase)
	}
	h, err := New(MixedPureJS, true, v.Passphrase)
	if err != nil {
		t.Fatal(err)
	}
	if h.HashedPassphrase() != c.HashedPassphrase || h.HashedPassphrase32() != c.HashedPassphrase32 {
		t.Errorf("HashedPassphrase = %q, %d; want %q, %d",
			h.HashedPassphrase(), h.HashedPassphrase32(), c.HashedPassphrase, c.HashedPassphrase32)
	}
}
