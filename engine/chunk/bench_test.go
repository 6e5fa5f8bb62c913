package chunk_test

import (
	"math/rand/v2"
	"testing"

	"github.com/livesync-go/livesync-go/engine/chunk"
)

// benchText repeats the large.md vector up to size bytes, with a
// changing line in every copy so that no two copies are identical.
func benchText(b *testing.B, size int) []byte {
	b.Helper()
	src := readInput(b, "inputs/large.md")
	out := make([]byte, 0, size+len(src))
	for i := 0; len(out) < size; i++ {
		out = append(out, "\n## Copy "...)
		out = append(out, byte('0'+i%10), byte('0'+i/10%10), '\n')
		out = append(out, src...)
	}
	return out[:size]
}

func benchRandom(size int) []byte {
	r := rand.New(rand.NewPCG(7, 11))
	out := make([]byte, size)
	for i := range out {
		out[i] = byte(r.Uint32())
	}
	return out
}

func benchSplit(b *testing.B, path string, data []byte, isText bool, s chunk.Settings) {
	b.Helper()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := chunk.SplitFunc(path, data, isText, s, func(piece string) bool {
			n += len(piece)
			return true
		}); err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			b.Fatal("no pieces")
		}
	}
}

// BenchmarkSplitV3Text splits large.md-like text: 3.5 MB is below the
// 4 MiB limit (content-defined text chunks of a few KiB), 8 MB above it
// (binary sizes: fixed 100 KiB with the default customChunkSize).
func BenchmarkSplitV3Text(b *testing.B) {
	s := chunk.Settings{Splitter: chunk.V3RabinKarp}
	for _, tc := range []struct {
		name string
		size int
	}{{"3.5MB", 3_500_000}, {"8MB", 8_000_000}} {
		data := benchText(b, tc.size)
		b.Run(tc.name, func(b *testing.B) { benchSplit(b, "notes/large.md", data, true, s) })
	}
}

// BenchmarkSplitV3Binary splits 16 MB of random bytes with the default
// settings (fixed 100 KiB chunks) and with customChunkSize 60
// (content-defined, 256 KiB–4 MiB).
func BenchmarkSplitV3Binary(b *testing.B) {
	data := benchRandom(16 << 20)
	for _, tc := range []struct {
		name   string
		custom int
	}{{"c0", 0}, {"c60", 60}} {
		s := chunk.Settings{Splitter: chunk.V3RabinKarp, CustomChunkSize: tc.custom}
		b.Run(tc.name, func(b *testing.B) { benchSplit(b, "attachments/random.bin", data, false, s) })
	}
}

// BenchmarkSplitV3Ranges measures the boundary search alone (no piece
// strings) on text and on binary with customChunkSize 60.
func BenchmarkSplitV3Ranges(b *testing.B) {
	for _, tc := range []struct {
		name   string
		path   string
		data   []byte
		isText bool
		custom int
	}{
		{"text", "notes/large.md", benchText(b, 3_500_000), true, 0},
		{"binary-c60", "attachments/random.bin", benchRandom(16 << 20), false, 60},
	} {
		s := chunk.Settings{Splitter: chunk.V3RabinKarp, CustomChunkSize: tc.custom}
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.data)))
			for b.Loop() {
				n := 0
				if err := chunk.SplitRanges(tc.path, tc.data, tc.isText, s, func(start, end int) bool {
					n++
					return true
				}); err != nil || n == 0 {
					b.Fatal(err, n)
				}
			}
		})
	}
}

// BenchmarkSplitLegacy splits large.md-like text with V1 and V2.
func BenchmarkSplitLegacy(b *testing.B) {
	data := benchText(b, 3_500_000)
	for _, v := range []chunk.SplitterVersion{chunk.V1, chunk.V2} {
		b.Run(string(v), func(b *testing.B) {
			benchSplit(b, "notes/large.md", data, true, chunk.Settings{Splitter: v})
		})
	}
}
