package chunk

import (
	"encoding/base64"
	"encoding/binary"
)

// Binary pieces are stored as standard padded base64 (ow
// src/binary/base64.ts arrayBufferToBase64Single; engine/FORMAT.md §3.2). For
// the fixed 100 KiB binary chunks of the default settings the encoding
// is most of the work of splitting, so the bulk is encoded here six
// bytes (eight characters) at a time with a table of character pairs,
// about twice as fast as encoding/base64; the output is identical.

const base64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// base64Pairs[v] holds the two characters encoding the 12-bit value v,
// the first one in the low byte.
var base64Pairs = func() (t [4096]uint16) {
	for v := range t {
		t[v] = uint16(base64Alphabet[v>>6]) | uint16(base64Alphabet[v&63])<<8
	}
	return t
}()

// encodeBase64 writes the standard padded base64 encoding of src to dst,
// which must be base64.StdEncoding.EncodedLen(len(src)) bytes long.
// The main loop encodes 24 bytes (32 characters) per iteration from four
// overlapping 8-byte loads, of which the first six bytes each are used.
func encodeBase64(dst, src []byte) {
	pairs := &base64Pairs
	for len(src) >= 26 && len(dst) >= 32 {
		binary.LittleEndian.PutUint64(dst[0:], encode48(pairs, binary.BigEndian.Uint64(src[0:])))
		binary.LittleEndian.PutUint64(dst[8:], encode48(pairs, binary.BigEndian.Uint64(src[6:])))
		binary.LittleEndian.PutUint64(dst[16:], encode48(pairs, binary.BigEndian.Uint64(src[12:])))
		binary.LittleEndian.PutUint64(dst[24:], encode48(pairs, binary.BigEndian.Uint64(src[18:])))
		src, dst = src[24:], dst[32:]
	}
	for len(src) >= 8 && len(dst) >= 8 {
		binary.LittleEndian.PutUint64(dst, encode48(pairs, binary.BigEndian.Uint64(src)))
		src, dst = src[6:], dst[8:]
	}
	base64.StdEncoding.Encode(dst, src)
}

// encode48 returns the eight characters encoding the top 48 bits of x,
// the first one in the low byte.
func encode48(pairs *[4096]uint16, x uint64) uint64 {
	return uint64(pairs[x>>52]) |
		uint64(pairs[x>>40&0xFFF])<<16 |
		uint64(pairs[x>>28&0xFFF])<<32 |
		uint64(pairs[x>>16&0xFFF])<<48
}
