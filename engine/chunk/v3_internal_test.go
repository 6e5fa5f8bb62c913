package chunk

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"slices"
	"testing"
)

// referenceV3 is engine/FORMAT.md §3.2 written down literally, one byte at a
// time, as an oracle for the phased splitV3.
func referenceV3(data []byte, sz rkSizes, isText bool) [][2]int {
	var out [][2]int
	var h uint32
	start := 0
	for pos := range data {
		if pos >= start+rkWindow {
			h = (h-uint32(data[pos-rkWindow])*rkPow)*rkPrime + uint32(data[pos])
		} else {
			h = h*rkPrime + uint32(data[pos])
		}
		n := pos - start + 1
		candidate := (n >= sz.min && h%uint32(sz.avg) == 1) || n >= sz.max
		if candidate && (!isText || pos+1 == len(data) || data[pos+1]&0xC0 != 0x80) {
			out = append(out, [2]int{start, pos + 1})
			start = pos + 1
		}
	}
	if start < len(data) {
		out = append(out, [2]int{start, len(data)})
	}
	return out
}

func TestRKPow(t *testing.T) {
	// 31^47 mod 2^32, as upstream's Math.imul loop computes it under
	// Node.js.
	if rkPow != 0x39CAA1DF || rkPowCheck() != 0x39CAA1DF {
		t.Fatalf("rkPow = %#x, check %#x; want 0x39caa1df", rkPow, rkPowCheck())
	}
	if p := rkPow; rkPow31 != p*31 {
		t.Fatalf("rkPow31 = %#x, want %#x", rkPow31, p*31)
	}
}

func rkPowCheck() uint32 {
	p := uint64(1)
	for range 47 {
		p = p * 31 % (1 << 32)
	}
	return uint32(p)
}

// TestBoundary checks the division-free x % d == 1 test against %.
func TestBoundary(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	divisors := []uint32{2, 3, 7, 128, 192, 256, 255, 257, 384, 1000, 1024, 65535, 65537, 102400, 1 << 20, 1<<22 - 3, 3 * 5 * 17 * 257}
	for _, d := range divisors {
		bd := newBoundary(d)
		xs := []uint32{0, 1, 2, d - 1, d, d + 1, 2*d + 1, ^uint32(0), ^uint32(0) - 1}
		for range 20000 {
			xs = append(xs, r.Uint32(), r.Uint32N(4)*d+1)
		}
		for _, x := range xs {
			if got, want := bd.isOne(x), x%d == 1; got != want {
				t.Fatalf("d=%d x=%d: isOne = %v, want %v", d, x, got, want)
			}
		}
	}
}

// TestV3MatchesReference compares splitV3 with referenceV3 over random
// text and binary inputs and many size settings, including ones where
// chunks end at max and text cuts must wait for a UTF-8 boundary.
func TestV3MatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for iter := range 300 {
		var data []byte
		isText := iter%2 == 0
		n := r.IntN(20000)
		if iter%10 == 0 {
			n = r.IntN(300)
		}
		switch iter % 4 {
		case 0: // multi-byte text
			for len(data) < n {
				data = append(data, []string{"a", "é", "日", "😀", "\n", "xyz "}[r.IntN(6)]...)
			}
		case 2: // mostly 4-byte characters: many unsafe candidates
			for len(data) < n {
				data = append(data, "😀"...)
			}
		default:
			data = make([]byte, n)
			for i := range data {
				data[i] = byte(r.Uint32())
			}
		}
		p := params{
			pieceSize:  PieceUnit * (1 + []int{0, 1, 60}[r.IntN(3)]),
			minimum:    []int{20, 1, 129, 300, 1024, 5000, 40000}[r.IntN(7)],
			plainSplit: r.IntN(2) == 0,
			isText:     isText,
		}
		sz := v3Sizes(len(data), p)
		if iter%5 == 0 { // small sizes to exercise every phase often
			sz.min = 49 + r.IntN(200)
			sz.max = sz.min + r.IntN(400)
			sz.avg = min(max(sz.min, 2+r.IntN(300)), sz.max)
		}
		want := referenceV3(data, sz, isText)
		var got [][2]int
		if len(data) > 0 {
			if sz.min == sz.max {
				splitV3Fixed(data, sz.max, isText, collect(&got))
			} else {
				splitV3Rolling(data, sz, isText, collect(&got))
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("iter %d (n=%d text=%v sizes %+v): got %d ranges, want %d\n got %v\nwant %v", iter, len(data), isText, sz, len(got), len(want), head(got), head(want))
		}
	}
}

// TestV3JumpMatchesReference stresses splitV3Rolling's jump to length
// min (h_p = S_p + h_{start−1}·31^L, see splitV3Rolling) with many short
// chunks: min from the smallest the jump allows (49) up, small avg so
// that boundaries are frequent, and max close to min so that forced cuts
// (and the hash they carry into the next chunk) occur too. A third of
// the cases have long scans with sparser boundaries, for scanV3's two
// streams (either one hitting first, or both in one pair of blocks).
func TestV3JumpMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for iter := range 3000 {
		isText := iter%2 == 0
		n := r.IntN(3000)
		long := iter%3 == 0 // long scans: the two-stream path of scanV3
		if long {
			n = r.IntN(40000)
		}
		data := make([]byte, 0, n+4)
		for len(data) < n {
			if isText {
				data = append(data, []string{"a", "é", "日", "😀", "\n", "xyz "}[r.IntN(6)]...)
			} else {
				data = append(data, byte(r.Uint32()))
			}
		}
		var sz rkSizes
		sz.min = 49 + r.IntN(4)*r.IntN(60)
		sz.max = sz.min + 1 + r.IntN(300)
		sz.avg = min(max(sz.min, 2+r.IntN(64)), sz.max)
		if long {
			sz.max = sz.min + 1 + r.IntN(12000)
			sz.avg = min(max(sz.min, 2+r.IntN(6000)), sz.max)
		}
		want := referenceV3(data, sz, isText)
		var got [][2]int
		if len(data) > 0 {
			splitV3Rolling(data, sz, isText, collect(&got))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("iter %d (n=%d text=%v sizes %+v): got %d ranges, want %d\n got %v\nwant %v", iter, len(data), isText, sz, len(got), len(want), head(got), head(want))
		}
	}
}

// TestPow31 checks pow31 against repeated multiplication.
func TestPow31(t *testing.T) {
	p := uint32(1)
	for k := range 5000 {
		if got := pow31(k); got != p {
			t.Fatalf("pow31(%d) = %#x, want %#x", k, got, p)
		}
		p *= 31
	}
}

// TestV3Sizes pins the derived sizes of engine/FORMAT.md §3.2.
func TestV3Sizes(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		p    params
		want rkSizes
	}{
		{"small text", 17, params{pieceSize: 102400, minimum: 20, isText: true, plainSplit: true}, rkSizes{128, 256, 1024}},
		{"text at 128000", 128000, params{pieceSize: 102400, minimum: 20, isText: true}, rkSizes{128, 256, 1024}},
		{"text at 128001", 128001, params{pieceSize: 102400, minimum: 20, isText: true}, rkSizes{192, 384, 1536}},
		{"large.md", 205907, params{pieceSize: 102400, minimum: 20, isText: true, plainSplit: true}, rkSizes{256, 512, 2048}},
		{"text below 4 MiB", 4<<20 - 1, params{pieceSize: 102400, minimum: 20, isText: true}, rkSizes{4224, 8448, 33792}},
		{"text at 4 MiB uses binary sizes", 4 << 20, params{pieceSize: 102400, minimum: 20, isText: true}, rkSizes{102400, 102400, 102400}},
		{"binary c0", 307200, params{pieceSize: 102400, minimum: 20}, rkSizes{102400, 102400, 102400}},
		{"binary c10", 307200, params{pieceSize: 1126400, minimum: 20}, rkSizes{262144, 1048576, 1126400}},
		{"binary c60", 307200, params{pieceSize: 6246400, minimum: 20}, rkSizes{262144, 1048576, 4194304}},
		{"binary .md", 1000, params{pieceSize: 102400, minimum: 20, plainSplit: true}, rkSizes{128, 256, 1024}},
		{"minimum above max", 1000, params{pieceSize: 102400, minimum: 5000, isText: true}, rkSizes{1024, 1024, 1024}},
		{"minimum between", 1000, params{pieceSize: 102400, minimum: 300, isText: true}, rkSizes{300, 300, 1024}},
	} {
		if got := v3Sizes(tc.n, tc.p); got != tc.want {
			t.Errorf("%s: v3Sizes = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestBinaryMinimum pins the V1/V2 binary minimum (10^(step−1)).
func TestBinaryMinimum(t *testing.T) {
	for _, tc := range []struct {
		size  int
		small bool
		want  int
	}{
		{0, false, 10000}, {4565, true, 1000}, {4565, false, 10000}, {50, true, 10}, {1562, true, 100},
		{1563, true, 1000}, {307200, false, 100000}, {2000000, false, 100000}, {1 << 40, false, 10000000},
	} {
		if got := binaryMinimum(tc.size, tc.small); got != tc.want {
			t.Errorf("binaryMinimum(%d, %v) = %d, want %d", tc.size, tc.small, got, tc.want)
		}
	}
}

func collect(out *[][2]int) func(int, int) bool {
	return func(start, end int) bool {
		*out = append(*out, [2]int{start, end})
		return true
	}
}

func head(r [][2]int) [][2]int {
	return r[:min(len(r), 8)]
}

// TestEncodeBase64 compares the pair-table encoder with encoding/base64
// for every length up to 200 and a few large ones.
func TestEncodeBase64(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	lengths := []int{1000, 4095, 102400, 102401, 102402}
	for n := range 201 {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		if n == 200 {
			for i := range src {
				src[i] = byte(i) // every byte value pattern near the start
			}
		}
		want := base64.StdEncoding.EncodeToString(src)
		dst := make([]byte, base64.StdEncoding.EncodedLen(n))
		encodeBase64(dst, src)
		if string(dst) != want {
			t.Fatalf("length %d: got %q, want %q", n, dst, want)
		}
	}
}

// FuzzV3Reference compares splitV3Rolling with referenceV3 for any bytes
// and any sizes the rolling splitter accepts (min > rkWindow, min < max).
// Short inputs are repeated to reach the long scans of the two-stream
// path.
func FuzzV3Reference(f *testing.F) {
	f.Add([]byte("# Title\nSome text, with: punctuation; here <b>.\n"), uint16(49), uint16(2000), uint16(300), uint8(40), true)
	f.Add([]byte{0, 1, 2, 0xFF, 0xF0, 0x9F, 0x98, 0x80}, uint16(128), uint16(5000), uint16(256), uint8(200), false)
	f.Fuzz(func(t *testing.T, data []byte, minC, span, avg uint16, repeat uint8, isText bool) {
		if len(data) == 0 {
			return
		}
		data = bytes.Repeat(data, 1+int(repeat)*(1+4000/len(data)))
		sz := rkSizes{min: rkWindow + 1 + int(minC)%4000}
		sz.max = sz.min + 1 + int(span)%20000
		sz.avg = min(max(sz.min, 2+int(avg)), sz.max)
		want := referenceV3(data, sz, isText)
		var got [][2]int
		splitV3Rolling(data, sz, isText, collect(&got))
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d text=%v sizes %+v: got %d ranges, want %d\n got %v\nwant %v", len(data), isText, sz, len(got), len(want), head(got), head(want))
		}
	})
}
