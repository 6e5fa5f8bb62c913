package chunk

import "unicode/utf8"

// V1 and V2 measure text in UTF-16 code units, the length of a
// JavaScript string. These helpers count them on UTF-8 bytes: a code
// point below U+10000 is one unit, one above is two (a surrogate pair).
// A byte that does not start a valid UTF-8 sequence counts as one unit,
// as the U+FFFD that a JavaScript decoder would put in its place.

// utf16Len returns the number of UTF-16 code units of the text b.
func utf16Len(b []byte) int {
	n := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		n += runeUnits(r)
		i += size
	}
	return n
}

// runeUnits is the UTF-16 length of r (RuneError counts one).
func runeUnits(r rune) int {
	if r >= 0x10000 {
		return 2
	}
	return 1
}

// cutUnits emits data[start:end] in pieces of limit UTF-16 code units,
// the last one possibly shorter. A cut that would fall between the two
// halves of a surrogate pair is moved one unit later, so that piece has
// limit+1 units (commonlib src/string_and_binary/chunks.ts
// chunkStringGenerator and splitPiecesTextV1). It returns false when emit
// did.
func cutUnits(data []byte, start, end, limit int, emit func(start, end int) bool) bool {
	for {
		if end-start <= limit { // never more units than bytes
			return emit(start, end)
		}
		units, i := 0, start
		for i < end && units < limit {
			c := data[i]
			if c < utf8.RuneSelf {
				units++
				i++
				continue
			}
			r, size := utf8.DecodeRune(data[i:end])
			units += runeUnits(r)
			i += size
		}
		if !emit(start, i) {
			return false
		}
		if i == end {
			return true
		}
		start = i
	}
}
