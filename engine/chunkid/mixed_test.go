package chunkid

import (
	"fmt"
	"testing"
)

// TestMixedHash checks MixedHash against values printed by the
// JavaScript algorithm (octagonal-wheels src/hash/purejs.ts mixedHash)
// under Node.js, for seeds 0, 1 and 0x12345678, on strings with astral
// characters (surrogate pairs), lone and swapped surrogates and U+FFFD.
func TestMixedHash(t *testing.T) {
	tests := []struct {
		units             []uint16
		fnv               uint32
		h0, h1, h12345678 uint32
		each              string // MixedEach over the same units
	}{
		{nil, 2166136261, 0, 1364076727, 3816608188, "hydjuoepw9f3"},
		{[]uint16{0x61}, 3826002220, 913607431, 1480713549, 3477209223, "fcnphqu7z6br"},
		{[]uint16{0xD83D, 0xDE00}, 3409036472, 3462907078, 1774059129, 1680362110, "1lkwa6q1ow5yy0"},
		{[]uint16{0x61, 0xD800, 0x62}, 9810898, 3864610739, 1441085189, 522531112, "1h6q4131vu37p7"},
		{[]uint16{0xDC00}, 75204895, 2970860812, 494134511, 1686672819, "m4fwkw38cff8"},
		{[]uint16{0xD83D}, 931276136, 4245881917, 4012495194, 275749443, "4skypv4mjab7"},
		{[]uint16{0xDE00, 0xD83D}, 890604166, 603811843, 2845974658, 955022272, "1t8kvd2dn7cdy"},
		{[]uint16{0xD842, 0xDFB7, 0x91CE, 0x5BB6}, 4249779706, 396908864, 1741873080, 3103961538, "173qmpeiqzib4"},
		{[]uint16{0xFFFD}, 2007932456, 2046033666, 1197073526, 3213020352, "qndz721lu0qwj"},
		{[]uint16{0x68, 0xE9, 0x6C, 0x6C, 0x6F, 0x20, 0x77, 0xF6, 0x72, 0x6C, 0x64, 0x20, 0xD83C, 0xDF89, 0xD83C, 0xDF89},
			42825410, 540755029, 1362759612, 1711814152, "1ae7fp5su6d9h"},
	}
	for _, tt := range tests {
		for _, s := range []struct{ seed, want uint32 }{{0, tt.h0}, {1, tt.h1}, {0x12345678, tt.h12345678}} {
			h, fnv := MixedHash(tt.units, s.seed)
			if h != s.want || fnv != tt.fnv {
				t.Errorf("MixedHash(%x, %#x) = %d, %d; want %d, %d", tt.units, s.seed, h, fnv, s.want, tt.fnv)
			}
		}
		if got := mixedEachUTF16(tt.units); got != tt.each {
			t.Errorf("mixedEach(%x) = %q, want %q", tt.units, got, tt.each)
		}
	}
}

// TestMixedEach checks MixedEach on Go strings, including the mapping of
// invalid UTF-8 bytes to U+FFFD (one unit each).
func TestMixedEach(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "hydjuoepw9f3"},
		{"a", "fcnphqu7z6br"},
		{"😀", "1lkwa6q1ow5yy0"},
		{"𠮷野家", "173qmpeiqzib4"},
		{"\uFFFD", "qndz721lu0qwj"},
		{"\xff", "qndz721lu0qwj"},
		{"\xed\xa0\x80", mixedEachUTF16([]uint16{0xFFFD, 0xFFFD, 0xFFFD})}, // CESU surrogate: 3 invalid bytes
		{"héllo wörld 🎉🎉", "1ae7fp5su6d9h"},
		{"a83hrf7f\u0003y7sa8g31vector-passp", "1kn75ll12qr3l8"}, // e2ee.json chunkIdHashing
	}
	for _, tt := range tests {
		if got := MixedEach(tt.in); got != tt.want {
			t.Errorf("MixedEach(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestJSToUint32 pins the float step: the double product is rounded to
// 53 bits before ECMAScript ToInt32, which an exact integer product
// would not be.
func TestJSToUint32(t *testing.T) {
	// b = -0x7FFFFFFF: the exact product is -991806532716382829 (60 bits),
	// the double product is rounded to a multiple of 128, and Node.js
	// gives ((b * 0x1b873593) | 0) >>> 0 = 0x9b873580.
	b := int32(-0x7FFFFFFF)
	exact := uint32(b) * 0x1B873593
	got := jsToUint32(float64(b) * 461845907.0)
	if got == exact {
		t.Fatalf("float product gave the exact 32-bit product %#x; rounding not exercised", got)
	}
	if got != 0x9B873580 {
		t.Errorf("jsToUint32 = %#x, want %#x", got, 0x9B873580)
	}
	if jsToUint32(-1) != 0xFFFFFFFF || jsToUint32(4294967296+5) != 5 {
		t.Error("jsToUint32 does not reduce modulo 2^32")
	}
}

func ExampleMixedEach() {
	fmt.Println(MixedEach("a83hrf7f\u0003y7sa8g31tes"))
	// Output: 1whdoaoz2hdns
}
