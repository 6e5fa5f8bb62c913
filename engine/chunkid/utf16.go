package chunkid

import (
	"math/bits"
	"unicode/utf8"
)

// hi8 has the top bit of every byte of a word set: w&hi8 == 0 iff the
// eight bytes of w are ASCII.
const hi8 = 0x8080808080808080

// utf16Len returns the number of UTF-16 code units of the JavaScript
// string that the Go string s stands for (JavaScript's s.length), and
// whether s is valid UTF-8. It validates and counts in one pass, taking
// eight ASCII bytes at a time wherever it can (also after a non-ASCII
// character, unlike utf8.ValidString). A code point of 4 UTF-8 bytes is
// a surrogate pair (2 units), any other 1. For invalid UTF-8 every byte
// that is not part of a valid sequence counts one unit (U+FFFD).
func utf16Len(s string) (n int, valid bool) {
	i := 0
	for i < len(s) {
		for len(s)-i >= 16 { // long ASCII runs (base64 pieces)
			t := s[i : i+16]
			w := uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
				uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
			v := uint64(t[8]) | uint64(t[9])<<8 | uint64(t[10])<<16 | uint64(t[11])<<24 |
				uint64(t[12])<<32 | uint64(t[13])<<40 | uint64(t[14])<<48 | uint64(t[15])<<56
			if (w|v)&hi8 != 0 {
				break
			}
			n += 16
			i += 16
		}
		for len(s)-i >= 8 {
			t := s[i : i+8]
			w := uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
				uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
			if m := w & hi8; m != 0 {
				// Skip the ASCII bytes before the first non-ASCII one.
				k := bits.TrailingZeros64(m) >> 3
				n += k
				i += k
				break
			}
			n += 8
			i += 8
		}
		// A run of non-ASCII characters, or an ASCII tail shorter than a
		// word; return to the word loops at the next ASCII byte that has
		// a whole word after it.
		for i < len(s) {
			c := s[i]
			if c < utf8.RuneSelf {
				if len(s)-i >= 8 {
					break
				}
				n++
				i++
				continue
			}
			// The accepted second-byte ranges follow the Unicode table of
			// well-formed UTF-8 byte sequences (RFC 3629).
			lo, hi := byte(0x80), byte(0xBF)
			switch {
			case c < 0xC2:
				return slowUTF16Len(s, i, n), false
			case c < 0xE0:
				if i+1 >= len(s) || s[i+1] < lo || s[i+1] > hi {
					return slowUTF16Len(s, i, n), false
				}
				n++
				i += 2
			case c < 0xF0:
				if c == 0xE0 {
					lo = 0xA0
				} else if c == 0xED {
					hi = 0x9F // U+D800..U+DFFF are not valid UTF-8
				}
				if i+2 >= len(s) || s[i+1] < lo || s[i+1] > hi || s[i+2]&0xC0 != 0x80 {
					return slowUTF16Len(s, i, n), false
				}
				n++
				i += 3
			case c < 0xF5:
				if c == 0xF0 {
					lo = 0x90
				} else if c == 0xF4 {
					hi = 0x8F
				}
				if i+3 >= len(s) || s[i+1] < lo || s[i+1] > hi || s[i+2]&0xC0 != 0x80 || s[i+3]&0xC0 != 0x80 {
					return slowUTF16Len(s, i, n), false
				}
				n += 2
				i += 4
			default:
				return slowUTF16Len(s, i, n), false
			}
		}
	}
	return n, true
}

// slowUTF16Len continues utf16Len from byte i (n units counted so far)
// for a string that is known to hold invalid UTF-8, decoding it as Go's
// []rune conversion does.
func slowUTF16Len(s string, i, n int) int {
	for i < len(s) {
		r, w := utf8.DecodeRuneInString(s[i:])
		i += w
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// sanitize returns s with every byte that is not part of a valid UTF-8
// sequence replaced by U+FFFD, the UTF-8 that JavaScript's TextEncoder
// produces for the corresponding JavaScript string.
func sanitize(s string) string {
	b := make([]byte, 0, len(s)+len(s)/2)
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 {
			b = append(b, "\uFFFD"...)
		} else {
			b = append(b, s[i:i+w]...)
		}
		i += w
	}
	return string(b)
}

// utf16Units returns the UTF-16 code units of s (invalid bytes are
// U+FFFD), like utf16.Encode([]rune(s)).
func utf16Units(s string) []uint16 {
	u := make([]uint16, 0, len(s))
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			u = append(u, uint16(0xD800+r>>10), uint16(0xDC00+r&0x3FF))
		} else {
			u = append(u, uint16(r))
		}
	}
	return u
}
