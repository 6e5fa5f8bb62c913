package chunk_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/chunk"
)

var allSplitters = []chunk.SplitterVersion{chunk.V1Unset, chunk.V1, chunk.V2, chunk.V2Segmenter, chunk.V3RabinKarp}

func TestIsPlainText(t *testing.T) {
	for _, tc := range []struct {
		path        string
		plain, line bool
	}{
		{"note.md", true, true},
		{"dir/note.txt", true, true},
		{"board.canvas", true, true},
		{"img.svg", true, false},
		{"page.html", true, false},
		{"t.csv", true, false},
		{"s.css", true, false},
		{"a.js", true, false},
		{"x.xml", true, false},
		{"data/data.json", false, false},
		{"README.MD", false, false}, // upstream compares case-sensitively
		{"a.Md", false, false},
		{"a.mdx", false, false},
		{"a.htm", false, false},
		{"paper.pdf", false, false},
		{"md", false, false},
		{".md", true, true},
		{"", false, false},
		{"attachments/random.bin", false, false},
	} {
		if got := chunk.IsPlainText(tc.path); got != tc.plain {
			t.Errorf("IsPlainText(%q) = %v, want %v", tc.path, got, tc.plain)
		}
		if got := chunk.ShouldSplitAsPlainText(tc.path); got != tc.line {
			t.Errorf("ShouldSplitAsPlainText(%q) = %v, want %v", tc.path, got, tc.line)
		}
	}
}

func TestSettingsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    chunk.Settings
		ok   bool
	}{
		{"zero value is V1", chunk.Settings{}, true},
		{"v1", chunk.Settings{Splitter: chunk.V1}, true},
		{"v2", chunk.Settings{Splitter: chunk.V2}, true},
		{"v2-segmenter", chunk.Settings{Splitter: chunk.V2Segmenter}, true},
		{"v3 c60 m20", chunk.Settings{Splitter: chunk.V3RabinKarp, CustomChunkSize: 60, MinimumChunkSize: 20}, true},
		{"limits", chunk.Settings{Splitter: chunk.V3RabinKarp, CustomChunkSize: chunk.MaxCustomChunkSize, MinimumChunkSize: chunk.MaxMinimumChunkSize}, true},
		{"unknown splitter", chunk.Settings{Splitter: "v4"}, false},
		{"splitter case matters", chunk.Settings{Splitter: "V3-Rabin-Karp"}, false},
		{"negative custom", chunk.Settings{CustomChunkSize: -1}, false},
		{"huge custom", chunk.Settings{CustomChunkSize: chunk.MaxCustomChunkSize + 1}, false},
		{"negative minimum", chunk.Settings{MinimumChunkSize: -1}, false},
		{"huge minimum", chunk.Settings{MinimumChunkSize: chunk.MaxMinimumChunkSize + 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Validate()
			if tc.ok != (err == nil) {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			_, splitErr := chunk.Split("a.md", []byte("x"), true, tc.s)
			if tc.ok {
				if splitErr != nil {
					t.Fatalf("Split: %v", splitErr)
				}
				return
			}
			if !errors.Is(err, engine.ErrUnsupported) || !errors.Is(splitErr, engine.ErrUnsupported) {
				t.Fatalf("errors %v / %v do not wrap ErrUnsupported", err, splitErr)
			}
			if !strings.HasPrefix(err.Error(), "chunk: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestPieceSize(t *testing.T) {
	for _, tc := range []struct {
		custom int
		want   int64
	}{{0, 102400}, {1, 204800}, {10, 1126400}, {60, 6246400}} {
		if got := (chunk.Settings{CustomChunkSize: tc.custom}).PieceSize(); got != tc.want {
			t.Errorf("PieceSize(custom %d) = %d, want %d", tc.custom, got, tc.want)
		}
	}
}

// TestEmpty: an empty file has no pieces with any splitter (upstream V2
// and V3 yield none, V1 yields one empty piece that createChunks drops).
func TestEmpty(t *testing.T) {
	for _, v := range allSplitters {
		for _, isText := range []bool{true, false} {
			for _, path := range []string{"empty.md", "e.json", "e.pdf", "e.bin", "e.html"} {
				got, err := chunk.Split(path, nil, isText, chunk.Settings{Splitter: v})
				if err != nil || got != nil {
					t.Errorf("%s %s text=%v: Split(empty) = %q, %v; want nil, nil", v, path, isText, got, err)
				}
			}
		}
	}
}

// TestBOM checks engine/FORMAT.md §3.7: "a U+FEFF at the start of a chunk is
// preserved". The first case is the one of the plug-in's
// src/rabinKarpBom.unit.spec.ts (1024 × "a", U+FEFF, 1024 × "b", split
// with minimumChunkSize 1024), which expects three pieces, the middle one
// starting with U+FEFF; the text sizes are then min = max = 1024 bytes.
func TestBOM(t *testing.T) {
	content := strings.Repeat("a", 1024) + "\uFEFF" + strings.Repeat("b", 1024)
	got, err := chunk.Split("bom.md", []byte(content), true, chunk.Settings{Splitter: chunk.V3RabinKarp, MinimumChunkSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{strings.Repeat("a", 1024), "\uFEFF" + strings.Repeat("b", 1021), "bbb"}
	if !equalStrings(got, want) {
		t.Fatalf("got %d pieces %q, want %q", len(got), got, want)
	}

	// A file that starts with a BOM keeps it in its first piece with
	// every splitter.
	file := []byte("\uFEFF# Title\nSome text, with: punctuation; here <b>.\n```\ncode; more\n```\n")
	for _, v := range allSplitters {
		pieces, err := chunk.Split("notes/bom.md", file, true, chunk.Settings{Splitter: v})
		if err != nil {
			t.Fatal(err)
		}
		if len(pieces) == 0 || !strings.HasPrefix(pieces[0], "\uFEFF# Title") {
			t.Errorf("%s: first piece %q does not start with the BOM", v, pieces)
		}
		if strings.Join(pieces, "") != string(file) {
			t.Errorf("%s: pieces do not reassemble the file", v)
		}
	}
}

// TestV1Pieces pins V1's line and code-block rules (engine/FORMAT.md §3.4) on
// small inputs; the expected pieces are what commonlib's splitPieces2
// returned for them under Node.js. Note how String.split with a
// capturing group emits the text before a match ("```\n") and the match
// ("a;") as separate strings.
func TestV1Pieces(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{
		{"short lines gather until 20 units", "one\ntwo\nthree\nfour\nfive\nsix", []string{"one\ntwo\nthree\nfour\nfive\n", "six"}},
		{"line # flushes", "ab\n#\ncd", []string{"ab\n", "#\n", "cd"}},
		{"heading line is its own piece", "# H\nbody", []string{"# H\n", "body"}},
		{"code block split at punctuation", "x\n```\na;b,c\nd:e<f\n```\ny",
			[]string{"x\n", "```\n", "a;", "b,", "c\n", "d:", "e<", "f\n```\n", "y"}},
		{"indented fence", "   ```\nk:v\n   ```", []string{"   ```\n", "k:", "v\n   ```"}},
		{"four spaces is no fence", "    ```\nk:v", []string{"    ```\nk:v"}},
		{"line after the opening fence always joins", "```\n```\na;b", []string{"```\n```\n", "a;", "b"}},
		{"unterminated block ending in = is kept", "```\na;b=", []string{"```\na;b="}},
		{"CR ends a line for the regex", "```\na\rb;c\n```", []string{"```\na\r", "b;", "c\n```"}},
		{"U+2028 ends a line for the regex", "```\na\u2028b;c\n```", []string{"```\na\u2028", "b;", "c\n```"}},
		{"long line", strings.Repeat("x", 30) + "\ny", []string{strings.Repeat("x", 30) + "\n", "y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := chunk.Split("t.md", []byte(tc.in), true, chunk.Settings{Splitter: chunk.V1})
			if err != nil {
				t.Fatal(err)
			}
			if !equalStrings(got, tc.want) {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestSurrogateCut: V1/V2 cut text every pieceSize UTF-16 units and grow
// a piece by one unit rather than split a surrogate pair.
func TestSurrogateCut(t *testing.T) {
	// 102399 ASCII units, then U+1F600 (units 102399 and 102400), then
	// "z": the cut at 102400 units would split the pair.
	in := strings.Repeat("a", 102399) + "😀" + "z"
	for _, v := range []chunk.SplitterVersion{chunk.V1, chunk.V2} {
		for _, path := range []string{"a.md", "a.html"} {
			got, err := chunk.Split(path, []byte(in), true, chunk.Settings{Splitter: v, MinimumChunkSize: 200000})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{strings.Repeat("a", 102399) + "😀", "z"}
			if !equalStrings(got, want) {
				t.Errorf("%s %s: got %d pieces of %v bytes", v, path, len(got), pieceLens(got))
			}
		}
	}
}

// TestEarlyStop: returning false from yield stops the split.
func TestEarlyStop(t *testing.T) {
	data := bytes.Repeat([]byte("line one, two; three\n"), 20000)
	for _, v := range allSplitters {
		for _, isText := range []bool{true, false} {
			calls := 0
			err := chunk.SplitFunc("a.md", data, isText, chunk.Settings{Splitter: v}, func(string) bool {
				calls++
				return calls < 2
			})
			if err != nil || calls != 2 {
				t.Errorf("%s text=%v: %d calls, err %v; want 2 calls", v, isText, calls, err)
			}
		}
	}
}

// TestReassembly is a property test: for random text (with multi-byte
// characters, newlines, fences and punctuation) and random bytes, every
// splitter's pieces are non-empty and reassemble the input.
func TestReassembly(t *testing.T) {
	r := rand.New(rand.NewPCG(0x5eed, 1234))
	paths := []string{"a.md", "b.txt", "c.canvas", "d.html", "e.bin", "f.json", "g.pdf"}
	sizes := []int{1, 2, 47, 48, 49, 127, 128, 1000, 5000, 70000, 300000}
	for iter := range 200 {
		size := sizes[iter%len(sizes)]
		if iter%3 == 0 {
			size = r.IntN(size*2 + 1)
		}
		path := paths[r.IntN(len(paths))]
		isText := r.IntN(3) != 0
		var data []byte
		if isText {
			data = randomText(r, size)
		} else {
			data = randomBytes(r, size)
		}
		s := chunk.Settings{
			Splitter:         allSplitters[r.IntN(len(allSplitters))],
			CustomChunkSize:  []int{0, 0, 1, 10, 60}[r.IntN(5)],
			MinimumChunkSize: []int{0, 20, 1, 300, 5000}[r.IntN(5)],
		}
		pieces, err := chunk.Split(path, data, isText, s)
		if err != nil {
			t.Fatal(err)
		}
		var joined []byte
		for i, p := range pieces {
			if p == "" {
				t.Fatalf("iter %d: piece %d is empty", iter, i)
			}
			if isText {
				if !utf8.ValidString(p) {
					t.Fatalf("iter %d %+v: piece %d is not valid UTF-8", iter, s, i)
				}
				joined = append(joined, p...)
				continue
			}
			b, err := base64.StdEncoding.DecodeString(p)
			if err != nil {
				t.Fatalf("iter %d: piece %d: %v", iter, i, err)
			}
			joined = append(joined, b...)
		}
		if !bytes.Equal(joined, data) {
			t.Fatalf("iter %d %s %+v text=%v size %d: pieces do not reassemble the input", iter, path, s, isText, len(data))
		}
	}
}

func randomText(r *rand.Rand, n int) []byte {
	atoms := []string{"a", "word ", "xyz", "\n", "\n\n", "\r\n", ";", ",", ":", "<", "=", "#", "\n#\n", "```", "\n```\n", "é", "日本語", "😀", "👨‍👩‍👧", "\u2028", "\uFEFF", "key: value, more;"}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(atoms[r.IntN(len(atoms))])
	}
	return b.Bytes()
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		if r.IntN(4) == 0 {
			b[i] = []byte{0, '\n', ',', '/'}[r.IntN(4)]
		} else {
			b[i] = byte(r.Uint32())
		}
	}
	return b
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func pieceLens(p []string) []int {
	n := make([]int, len(p))
	for i := range p {
		n[i] = len(p[i])
	}
	return n
}
