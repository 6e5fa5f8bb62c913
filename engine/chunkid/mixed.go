package chunkid

import (
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// FNVInit is the initial value of the FNV-1a half of MixedHash
// (octagonal-wheels src/hash/purejs.ts epochFNV1a, 2166136261).
const FNVInit uint32 = 2166136261

// MixedHash is octagonal-wheels' pure-JS string hash mixedHash(s, seed)
// (src/hash/purejs.ts) over the UTF-16 code units s: a MurmurHash3-like
// value h and an FNV-1a value fnv (started at FNVInit), both uint32.
//
// It is not MurmurHash3: the JavaScript original multiplies the rotated
// key by 0x1B873593 as an IEEE-754 double (a product near 2^60 that gets
// rounded) and reduces it with ECMAScript ToInt32. MixedHash reproduces
// that step exactly; a 32-bit integer multiply would not. For an empty s
// it returns the finalised seed and FNVInit.
func MixedHash(s []uint16, seed uint32) (h, fnv uint32) {
	m := mixer{h: seed, fnv: FNVInit}
	for _, c := range s {
		m.unit(c)
	}
	return m.sum()
}

// MixedEach is octagonal-wheels' fallbackMixedHashEach(s)
// (src/hash/purejs.ts): MixedHash with seed 1 over the decimal UTF-16
// length of s followed by s, printed as base36(h) + base36(fnv) with
// lower-case digits. The result is ASCII, 2 to 14 characters long. The
// Go string s is read as a JavaScript string as described in the package
// documentation (invalid UTF-8 bytes are U+FFFD).
func MixedEach(s string) string {
	n, _ := utf16Len(s)
	var m mixer
	m.reset(1)
	var num [20]byte
	m.ascii(strconv.AppendUint(num[:0], uint64(n), 10))
	m.str(s)
	var out [14]byte
	return string(m.appendEach(out[:0]))
}

// mixedEachUTF16 is MixedEach over UTF-16 code units, for the passphrase
// material, whose truncation may split a surrogate pair.
func mixedEachUTF16(s []uint16) string {
	var m mixer
	m.reset(1)
	var num [20]byte
	m.ascii(strconv.AppendUint(num[:0], uint64(len(s)), 10))
	for _, c := range s {
		m.unit(c)
	}
	var out [14]byte
	return string(m.appendEach(out[:0]))
}

// mixer is the streaming state of MixedHash: the two running hashes and
// the number of code units consumed so far.
type mixer struct {
	h, fnv uint32
	n      uint32
}

func (m *mixer) reset(seed uint32) { *m = mixer{h: seed, fnv: FNVInit} }

// unit consumes one UTF-16 code unit. The JavaScript loop keeps h1 as a
// double that is always reduced modulo 2^32 before use, so uint32
// arithmetic is exact everywhere except the c2 product (see MixedHash).
func (m *mixer) unit(c uint16) {
	m.fnv = (m.fnv ^ uint32(c)) * 0x01000193
	k := int32(bits.RotateLeft32(uint32(c)*0xCC9E2D51, 15))
	k2 := jsToUint32(float64(k) * 461845907.0) // 0x1B873593 as a double
	m.h = bits.RotateLeft32(m.h^k2, 13)*5 + 0xE6546B64
	m.n++
}

// jsToUint32 is ECMAScript ToInt32/ToUint32 (the same bits) of an
// integral double whose magnitude is below 2^63: truncation, then
// reduction modulo 2^32. The products fed to it stay below 2^61.
func jsToUint32(d float64) uint32 { return uint32(int64(d)) }

// ascii consumes bytes that are all ASCII (one code unit each).
func (m *mixer) ascii(b []byte) {
	for _, c := range b {
		m.unit(uint16(c))
	}
}

// str consumes the UTF-16 code units of the JavaScript string that the
// Go string s stands for (invalid bytes are U+FFFD).
func (m *mixer) str(s string) {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			m.unit(uint16(c))
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		i += w
		if r >= 0x10000 {
			r -= 0x10000
			m.unit(uint16(0xD800 + r>>10))
			m.unit(uint16(0xDC00 + r&0x3FF))
		} else {
			m.unit(uint16(r))
		}
	}
}

// sum finalises: h ^= length, then the MurmurHash3 fmix32 avalanche.
func (m *mixer) sum() (h, fnv uint32) {
	h = m.h ^ m.n
	h ^= h >> 16
	h *= 0x85EBCA6B
	h ^= h >> 13
	h *= 0xC2B2AE35
	h ^= h >> 16
	return h, m.fnv
}

// appendEach appends base36(h) + base36(fnv), the fallbackMixedHashEach
// output format.
func (m *mixer) appendEach(dst []byte) []byte {
	h, f := m.sum()
	dst = strconv.AppendUint(dst, uint64(h), 36)
	return strconv.AppendUint(dst, uint64(f), 36)
}
