package chunk_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/livesync-go/livesync-go/engine/chunk"
	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
)

// vectorFile is the part of a chunks/chunks-*.json vector this package
// checks (engine/testdata/vectors/README.md, "chunks/").
type vectorFile struct {
	Case    string `json:"case"`
	Variant string `json:"variant"`
	Input   struct {
		File      string `json:"file"`
		VaultPath string `json:"vaultPath"`
		Size      int    `json:"size"`
		ReadAs    string `json:"readAs"`
	} `json:"input"`
	Settings struct {
		ChunkSplitterVersion string `json:"chunkSplitterVersion"`
		CustomChunkSize      int    `json:"customChunkSize"`
		MinimumChunkSize     int    `json:"minimumChunkSize"`
		Derived              struct {
			PieceSize  int64 `json:"pieceSize"`
			PlainSplit bool  `json:"plainSplit"`
		} `json:"derived"`
	} `json:"settings"`
	ChunkCount int `json:"chunkCount"`
	Chunks     []struct {
		Index           int    `json:"index"`
		Data            string `json:"data"`
		DataUTF16Length int    `json:"dataUtf16Length"`
		SrcByteOffset   int    `json:"srcByteOffset"`
		SrcByteLength   int    `json:"srcByteLength"`
	} `json:"chunks"`
	IdenticalTo string `json:"identicalTo"`
}

func readJSON(t testing.TB, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(testvectors.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func readInput(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(testvectors.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// loadVector reads one vector file, following identicalTo for the
// chunks while keeping the file's own settings.
func loadVector(t *testing.T, file string) vectorFile {
	t.Helper()
	var v vectorFile
	readJSON(t, "chunks/"+file, &v)
	if v.IdenticalTo != "" {
		var base vectorFile
		readJSON(t, "chunks/"+v.IdenticalTo, &base)
		if base.Input.File != v.Input.File || base.Input.VaultPath != v.Input.VaultPath {
			t.Fatalf("%s: identicalTo %s has a different input", file, v.IdenticalTo)
		}
		v.Chunks = base.Chunks
	}
	return v
}

// TestVectors splits every input of chunks/index.json with the recorded
// settings and vault path and compares the pieces, in order, with the
// chunk data the real LiveSync library stored, as well as the byte
// ranges and UTF-16 lengths it recorded.
func TestVectors(t *testing.T) {
	var index []struct {
		File       string `json:"file"`
		ChunkCount int    `json:"chunkCount"`
	}
	readJSON(t, "chunks/index.json", &index)
	if len(index) != 42 {
		t.Fatalf("index.json lists %d files, want 42", len(index))
	}
	for _, e := range index {
		t.Run(strings.TrimSuffix(e.File, ".json"), func(t *testing.T) {
			v := loadVector(t, e.File)
			if len(v.Chunks) != e.ChunkCount || v.ChunkCount != e.ChunkCount {
				t.Fatalf("vector has %d chunks, index says %d, file says %d", len(v.Chunks), e.ChunkCount, v.ChunkCount)
			}
			data := readInput(t, v.Input.File)
			if len(data) != v.Input.Size {
				t.Fatalf("input %s has %d bytes, want %d", v.Input.File, len(data), v.Input.Size)
			}
			isText := v.Input.ReadAs == "text"
			if got := chunk.IsPlainText(v.Input.VaultPath); got != isText {
				t.Errorf("IsPlainText(%q) = %v, vector read it as %s", v.Input.VaultPath, got, v.Input.ReadAs)
			}
			if got := chunk.ShouldSplitAsPlainText(v.Input.VaultPath); got != v.Settings.Derived.PlainSplit {
				t.Errorf("ShouldSplitAsPlainText(%q) = %v, want %v", v.Input.VaultPath, got, v.Settings.Derived.PlainSplit)
			}
			s := chunk.Settings{
				Splitter:         chunk.SplitterVersion(v.Settings.ChunkSplitterVersion),
				CustomChunkSize:  v.Settings.CustomChunkSize,
				MinimumChunkSize: v.Settings.MinimumChunkSize,
			}
			if got := s.PieceSize(); got != v.Settings.Derived.PieceSize {
				t.Errorf("PieceSize() = %d, want %d", got, v.Settings.Derived.PieceSize)
			}
			pieces, err := chunk.Split(v.Input.VaultPath, data, isText, s)
			if err != nil {
				t.Fatal(err)
			}
			if len(pieces) != len(v.Chunks) {
				t.Errorf("got %d pieces, want %d", len(pieces), len(v.Chunks))
			}
			for i := range min(len(pieces), len(v.Chunks)) {
				want := v.Chunks[i]
				if pieces[i] != want.Data {
					t.Errorf("piece %d = %q (%d bytes), want %q (%d bytes)", i, abbrev(pieces[i]), len(pieces[i]), abbrev(want.Data), len(want.Data))
					continue
				}
				if n := len(utf16.Encode([]rune(pieces[i]))); n != want.DataUTF16Length {
					t.Errorf("piece %d: UTF-16 length %d, want %d", i, n, want.DataUTF16Length)
				}
			}
			var ranges [][2]int
			if err := chunk.SplitRanges(v.Input.VaultPath, data, isText, s, func(start, end int) bool {
				ranges = append(ranges, [2]int{start, end})
				return true
			}); err != nil {
				t.Fatal(err)
			}
			for i := range min(len(ranges), len(v.Chunks)) {
				want := v.Chunks[i]
				if got := ranges[i]; got != [2]int{want.SrcByteOffset, want.SrcByteOffset + want.SrcByteLength} {
					t.Errorf("range %d = %v, want offset %d length %d", i, got, want.SrcByteOffset, want.SrcByteLength)
				}
			}
		})
	}
}

func abbrev(s string) string {
	if len(s) > 80 {
		return s[:40] + "…" + s[len(s)-40:]
	}
	return s
}
