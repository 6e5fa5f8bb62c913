package chunk_test

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/livesync-go/livesync-go/engine/chunk"
)

var fuzzPaths = []string{"a.md", "b.txt", "c.canvas", "d.html", "e.bin", "f.json", "g.pdf"}

// FuzzSplit: for any bytes, splitter, path and sizes, Split never
// panics, returns no empty piece, and the pieces reassemble the input
// (text pieces by concatenation, binary pieces by decoding each base64
// string), invalid UTF-8 included. SplitRanges reports the same pieces
// as adjacent ranges.
func FuzzSplit(f *testing.F) {
	f.Add([]byte("# Title\nSome text, with: punctuation; here <b>.\n```\ncode; more\n```\n"), uint8(0), true, uint8(0), uint16(0), uint8(0))
	f.Add([]byte("\uFEFFa😀b\r\n日本語\u2028```\nx=\n"), uint8(1), true, uint8(1), uint16(1), uint8(0))
	f.Add([]byte{0, 1, 2, 0xFF, '\n', ',', '/', 0xF0, 0x9F}, uint8(2), false, uint8(60), uint16(20), uint8(5))
	f.Add(bytes.Repeat([]byte("😀"), 400), uint8(4), true, uint8(0), uint16(1024), uint8(3))
	f.Add(bytes.Repeat([]byte{0xE6, 0x97}, 300), uint8(4), true, uint8(0), uint16(129), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, splitter uint8, isText bool, custom uint8, minimum uint16, pathSel uint8) {
		versions := []chunk.SplitterVersion{chunk.V1Unset, chunk.V1, chunk.V2, chunk.V2Segmenter, chunk.V3RabinKarp}
		s := chunk.Settings{
			Splitter:         versions[int(splitter)%len(versions)],
			CustomChunkSize:  int(custom % 4),
			MinimumChunkSize: int(minimum),
		}
		path := fuzzPaths[int(pathSel)%len(fuzzPaths)]
		pieces, err := chunk.Split(path, data, isText, s)
		if err != nil {
			t.Fatal(err)
		}
		var joined []byte
		for i, p := range pieces {
			if p == "" {
				t.Fatalf("piece %d is empty", i)
			}
			if isText {
				joined = append(joined, p...)
				continue
			}
			b, err := base64.StdEncoding.DecodeString(p)
			if err != nil {
				t.Fatalf("piece %d: %v", i, err)
			}
			joined = append(joined, b...)
		}
		if !bytes.Equal(joined, data) {
			t.Fatalf("%d pieces do not reassemble %d input bytes", len(pieces), len(data))
		}
		next, n := 0, 0
		if err := chunk.SplitRanges(path, data, isText, s, func(start, end int) bool {
			if start != next || end <= start || n >= len(pieces) || chunk.Piece(data[start:end], isText) != pieces[n] {
				t.Fatalf("range %d [%d,%d) does not match piece %d", n, start, end, n)
			}
			next, n = end, n+1
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if next != len(data) || n != len(pieces) {
			t.Fatalf("ranges end at %d after %d pieces, want %d after %d", next, n, len(data), len(pieces))
		}
	})
}
