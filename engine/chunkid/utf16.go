package chunkid

import (
	"unicode/utf8"
)

// hi8 has the top bit of every byte of a word set: w&hi8 == 0 iff the
// eight bytes of w are ASCII.
const hi8 = 0x8080808080808080

// lo1 has the low bit of every byte of a word set.
const lo1 = 0x0101010101010101

// UTF-8 is validated with a shift-based DFA: each state is a bit offset
// (a multiple of 6) and utf8DFA[b] packs, for every state s, the next
// state after byte b at bits s..s+5. One step is then
// state = utf8DFA[b] >> (state & 63): a single shift depends on the
// previous state, so a byte costs about one cycle of latency. The state
// carries garbage above its low 6 bits, which the & 63 (free in the
// shift instruction) ignores. dfaErr is 0, so the error state maps every
// byte to itself.
const (
	dfaErr = 6 * iota // invalid; absorbing
	dfaAcc            // between characters
	dfaC1             // one continuation byte 80..BF due
	dfaC2             // two continuation bytes due
	dfaC3             // three continuation bytes due
	dfaE0             // after E0: A0..BF, then one more
	dfaED             // after ED: 80..9F (no surrogates), then one more
	dfaF0             // after F0: 90..BF, then two more
	dfaF4             // after F4: 80..8F (at most U+10FFFF), then two more
)

// load64 returns the first eight bytes of s as a little-endian word.
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// utf8DFA follows the Unicode table of well-formed UTF-8 byte sequences
// (RFC 3629 §4); TestUTF8DFA checks it against utf8.ValidString on every
// sequence of up to four bytes from a representative byte set.
var utf8DFA = func() (t [256]uint64) {
	set := func(from, to int, lo, hi int) {
		for b := lo; b <= hi; b++ {
			t[b] |= uint64(to) << from
		}
	}
	set(dfaAcc, dfaAcc, 0x00, 0x7F)
	set(dfaAcc, dfaC1, 0xC2, 0xDF)
	set(dfaAcc, dfaE0, 0xE0, 0xE0)
	set(dfaAcc, dfaC2, 0xE1, 0xEC)
	set(dfaAcc, dfaED, 0xED, 0xED)
	set(dfaAcc, dfaC2, 0xEE, 0xEF)
	set(dfaAcc, dfaF0, 0xF0, 0xF0)
	set(dfaAcc, dfaC3, 0xF1, 0xF3)
	set(dfaAcc, dfaF4, 0xF4, 0xF4)
	set(dfaC1, dfaAcc, 0x80, 0xBF)
	set(dfaC2, dfaC1, 0x80, 0xBF)
	set(dfaC3, dfaC2, 0x80, 0xBF)
	set(dfaE0, dfaC1, 0xA0, 0xBF)
	set(dfaED, dfaC1, 0x80, 0x9F)
	set(dfaF0, dfaC2, 0x90, 0xBF)
	set(dfaF4, dfaC2, 0x80, 0x8F)
	return t
}()

// utf16Len returns the number of UTF-16 code units of the JavaScript
// string that the Go string s stands for (JavaScript's s.length), and
// whether s is valid UTF-8. A code point of 4 UTF-8 bytes is a surrogate
// pair (2 units), any other 1. For invalid UTF-8 every byte that is not
// part of a valid sequence counts one unit (U+FFFD).
//
// It validates with utf8DFA and counts without branches: in valid UTF-8
// every character has exactly one byte that is not a continuation byte
// (10xxxxxx), and exactly the 4-byte characters have a lead byte ≥ F0,
// so units = len − continuation bytes + bytes ≥ F0. Both counts are
// taken eight bytes at a time. Sixteen ASCII bytes after a complete
// character skip the DFA. Once the DFA reports invalid UTF-8 the count
// is redone by slowUTF16Len, where the formula does not hold.
func utf16Len(s string) (n int, valid bool) {
	dfa := &utf8DFA
	st := uint64(dfaAcc)
	// extra accumulates bytes ≥ F0 minus continuation bytes.
	extra := 0
	i := 0
	for ; len(s)-i >= 16; i += 16 {
		t := s[i : i+16]
		w := uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
			uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
		v := uint64(t[8]) | uint64(t[9])<<8 | uint64(t[10])<<16 | uint64(t[11])<<24 |
			uint64(t[12])<<32 | uint64(t[13])<<40 | uint64(t[14])<<48 | uint64(t[15])<<56
		if (w|v)&hi8 == 0 && st&63 == dfaAcc {
			// Long ASCII runs (base64 pieces): 32 bytes per test.
			for len(s)-i >= 48 {
				t := s[i+16 : i+48]
				if (load64(t[0:])|load64(t[8:])|load64(t[16:])|load64(t[24:]))&hi8 != 0 {
					break
				}
				i += 32
			}
			continue
		}
		// Continuation bytes (10xxxxxx) and bytes ≥ F0 as 0x80 flags:
		// shifting a word left by k moves bit 7−k of every byte to its
		// bit 7 (bits crossing into the next byte land below bit 7 and
		// are masked off by hi8).
		cont := (w&^(w<<1))>>7&lo1 + (v&^(v<<1))>>7&lo1
		f := (w&(w<<1)&(w<<2)&(w<<3))>>7&lo1 + (v&(v<<1)&(v<<2)&(v<<3))>>7&lo1
		// Each byte lane of cont and f holds 0..2; multiplying by lo1
		// sums the lanes into the top byte.
		extra += int(f*lo1>>56) - int(cont*lo1>>56)
		st = dfa[byte(w)] >> (st & 63)
		st = dfa[byte(w>>8)] >> (st & 63)
		st = dfa[byte(w>>16)] >> (st & 63)
		st = dfa[byte(w>>24)] >> (st & 63)
		st = dfa[byte(w>>32)] >> (st & 63)
		st = dfa[byte(w>>40)] >> (st & 63)
		st = dfa[byte(w>>48)] >> (st & 63)
		st = dfa[w>>56] >> (st & 63)
		st = dfa[byte(v)] >> (st & 63)
		st = dfa[byte(v>>8)] >> (st & 63)
		st = dfa[byte(v>>16)] >> (st & 63)
		st = dfa[byte(v>>24)] >> (st & 63)
		st = dfa[byte(v>>32)] >> (st & 63)
		st = dfa[byte(v>>40)] >> (st & 63)
		st = dfa[byte(v>>48)] >> (st & 63)
		st = dfa[v>>56] >> (st & 63)
	}
	for _, c := range []byte(s[i:]) {
		st = dfa[c] >> (st & 63)
		if c >= 0xF0 {
			extra++
		} else if c&0xC0 == 0x80 {
			extra--
		}
	}
	if st&63 != dfaAcc {
		return slowUTF16Len(s, 0, 0), false
	}
	return len(s) + extra, true
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
