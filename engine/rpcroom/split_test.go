package rpcroom

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
)

// run is a run-length encoded list: n values v.
type run struct{ v, n int }

func expand(rs []run) []int {
	var out []int
	for _, r := range rs {
		for range r.n {
			out = append(out, r.v)
		}
	}
	return out
}

// TestSplitUTF16Vectors checks part lengths (in UTF-16 units) and their
// TextEncoder byte lengths against what commonlib's splitIntoChunks and
// estimateBytes (src/rpc/chunking.ts) returned in Node 20 for the same
// strings.
func TestSplitUTF16Vectors(t *testing.T) {
	tests := []struct {
		name    string
		s       string
		max     int
		lengths []run
		bytes   []run
	}{
		{"ascii 40000", strings.Repeat("a", 40000), 15360, []run{{7680, 5}, {1600, 1}}, []run{{7680, 5}, {1600, 1}}},
		{"cjk 20000", strings.Repeat("漢", 20000), 15360, []run{{5120, 3}, {4640, 1}}, []run{{15360, 3}, {13920, 1}}},
		{"emoji 10000", strings.Repeat("😀", 10000), 15360, []run{{7680, 2}, {4640, 1}}, []run{{15360, 2}, {9280, 1}}},
		{"emoji split by the step", "x" + strings.Repeat("😀", 5000), 15360, []run{{7680, 1}, {2321, 1}}, []run{{15360, 1}, {4643, 1}}},
		{"mixed at 800", strings.Repeat("ab漢😀é", 700), 800, []run{{400, 10}, {200, 1}},
			[]run{{734, 1}, {733, 1}, {735, 1}, {734, 1}, {733, 1}, {735, 1}, {734, 1}, {733, 1}, {735, 1}, {734, 1}, {368, 1}}},
		{"emoji across the first boundary", strings.Repeat("a", 7679) + "😀" + strings.Repeat("b", 9000), 15360,
			[]run{{7680, 2}, {1321, 1}}, []run{{7682, 2}, {1321, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			units := utf16.Encode([]rune(tt.s))
			parts := SplitUTF16(units, tt.max)
			var lens, sizes []int
			for _, p := range parts {
				lens = append(lens, len(p))
				sizes = append(sizes, EncodedLen(p))
			}
			if want := expand(tt.lengths); !slices.Equal(lens, want) {
				t.Errorf("part lengths %v, want %v", lens, want)
			}
			if want := expand(tt.bytes); !slices.Equal(sizes, want) {
				t.Errorf("part bytes %v, want %v", sizes, want)
			}
			if got := slices.Concat(parts...); !slices.Equal(got, units) {
				t.Error("parts do not join to the payload")
			}
		})
	}
}

// TestSplitUTF16LoneSurrogate: a lone high surrogate counts 3 bytes, as
// TextEncoder writes U+FFFD for it (Node: part bytes 402, then 400).
func TestSplitUTF16LoneSurrogate(t *testing.T) {
	units := append([]uint16{0xD83D}, utf16.Encode([]rune(strings.Repeat("a", 2000)))...)
	parts := SplitUTF16(units, 800)
	var sizes []int
	for _, p := range parts {
		sizes = append(sizes, EncodedLen(p))
	}
	if want := expand([]run{{402, 1}, {400, 4}, {1, 1}}); !slices.Equal(sizes, want) {
		t.Errorf("part bytes %v, want %v", sizes, want)
	}
}

func TestSplitUTF16Small(t *testing.T) {
	units := utf16.Encode([]rune("hello"))
	if parts := SplitUTF16(units, 800); len(parts) != 1 || !slices.Equal(parts[0], units) {
		t.Errorf("small payload split into %d parts", len(parts))
	}
	if parts := SplitUTF16(units, 0); len(parts) != 1 {
		t.Errorf("maxBytes 0 split into %d parts", len(parts))
	}
}

func TestEncodedLen(t *testing.T) {
	tests := []struct {
		units []uint16
		want  int
	}{
		{nil, 0},
		{[]uint16{'a'}, 1},
		{[]uint16{0xE9}, 2},
		{[]uint16{0x6F22}, 3},
		{[]uint16{0xD83D, 0xDE00}, 4},
		{[]uint16{0xD83D}, 3},
		{[]uint16{0xDE00, 0xD83D}, 6},
		{[]uint16{0xDE00}, 3},
	}
	for _, tt := range tests {
		if got := EncodedLen(tt.units); got != tt.want {
			t.Errorf("EncodedLen(%x) = %d, want %d", tt.units, got, tt.want)
		}
	}
}

func BenchmarkSplitUTF16(b *testing.B) {
	units := utf16.Encode([]rune(strings.Repeat("漢字かな😀", 20000)))
	b.SetBytes(int64(EncodedLen(units)))
	for b.Loop() {
		SplitUTF16(units, DefaultMaxWirePayloadBytes)
	}
}
