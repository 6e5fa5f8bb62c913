package chunkid

import (
	"fmt"
	"testing"
)

// testPattern returns n bytes of the pattern (7i+3) mod 256.
func testPattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

// TestXXH32 checks XXH32 against the reference values of the xxHash
// test suite and values printed by xxhash-wasm 1.1.0 (h32Raw), the
// library LiveSync uses, for every code path (< 16 bytes, exactly one
// stripe, stripes plus 4-byte lanes plus single bytes) and three seeds.
func TestXXH32(t *testing.T) {
	known := []struct {
		in   string
		want uint32
	}{
		{"", 0x02CC5D05},
		{"a", 0x550D7456},
		{"abc", 0x32D153FF},
		{"Nobody inspects the spammish repetition", 0xE2293B2F},
	}
	for _, tt := range known {
		if got := XXH32([]byte(tt.in), 0); got != tt.want {
			t.Errorf("XXH32(%q, 0) = %#08x, want %#08x", tt.in, got, tt.want)
		}
	}
	pattern := []struct {
		n          int
		seed, want uint32
	}{
		{0, 0, 0x02cc5d05}, {0, 0x9E3779B1, 0x36b78ae7}, {0, 0x12345678, 0xbd209070},
		{1, 0, 0x21ae663a}, {1, 0x9E3779B1, 0x99bafee8}, {1, 0x12345678, 0xfe935803},
		{3, 0, 0xcd3d2242}, {3, 0x9E3779B1, 0x51c57254}, {3, 0x12345678, 0x0f037e5d},
		{4, 0, 0x725479f2}, {4, 0x9E3779B1, 0xf9528875}, {4, 0x12345678, 0x48d9327f},
		{15, 0, 0x82d3c84d}, {15, 0x9E3779B1, 0x321e160f}, {15, 0x12345678, 0x3843aeb1},
		{16, 0, 0x8845547d}, {16, 0x9E3779B1, 0xd392828c}, {16, 0x12345678, 0xafa7c98a},
		{17, 0, 0x450e5f84}, {17, 0x9E3779B1, 0x65172c35}, {17, 0x12345678, 0x0da0568c},
		{31, 0, 0x1f73d3c7}, {31, 0x9E3779B1, 0x54462da7}, {31, 0x12345678, 0x1e3f127f},
		{32, 0, 0xe988ccb7}, {32, 0x9E3779B1, 0x9537b9d6}, {32, 0x12345678, 0x68c8438c},
		{33, 0, 0x94f536d5}, {33, 0x9E3779B1, 0x9527373f}, {33, 0x12345678, 0x5b22a35c},
		{63, 0, 0x0bedc2f7}, {63, 0x9E3779B1, 0xa484df78}, {63, 0x12345678, 0x456e5e63},
		{100, 0, 0x73091a4d}, {100, 0x9E3779B1, 0x037b139b}, {100, 0x12345678, 0x63ebc042},
		{200, 0, 0x2870dbaa}, {200, 0x9E3779B1, 0x0a3924d2}, {200, 0x12345678, 0x469ea420},
	}
	for _, tt := range pattern {
		if got := XXH32(testPattern(tt.n), tt.seed); got != tt.want {
			t.Errorf("XXH32(pattern[:%d], %#x) = %#08x, want %#08x", tt.n, tt.seed, got, tt.want)
		}
	}
}

// TestXXH32Streaming checks that feeding the streaming state in any split
// gives the one-shot value, for strings and byte slices.
func TestXXH32Streaming(t *testing.T) {
	for _, n := range []int{0, 5, 16, 33, 100, 200} {
		data := testPattern(n)
		want := XXH32(data, 7)
		for split := 0; split <= n; split++ {
			for split2 := split; split2 <= n; split2 += 5 {
				var d xxh32
				d.reset(7)
				xxh32Write(&d, data[:split])
				xxh32Write(&d, string(data[split:split2]))
				xxh32Write(&d, data[split2:])
				if got := d.sum(); got != want {
					t.Fatalf("n=%d split %d,%d: %#08x, want %#08x", n, split, split2, got, want)
				}
			}
		}
	}
}

func ExampleXXH32() {
	fmt.Printf("%#08x\n", XXH32([]byte("abc"), 0))
	// Output: 0x32d153ff
}
