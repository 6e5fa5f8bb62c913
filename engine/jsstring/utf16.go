package jsstring

import (
	"unicode/utf16"
	"unicode/utf8"
)

// UTF16Len returns the JavaScript .length of s: the number of UTF-16 code
// units. Code points above U+FFFF count two, all others one; each invalid
// UTF-8 byte counts one, as the U+FFFD it decodes to.
func UTF16Len(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if r > 0xFFFF {
			n += 2
		} else {
			n++
		}
		i += w
	}
	return n
}

// UTF16Units returns the UTF-16 code units of s, the code units a
// JavaScript engine stores for the same text. Invalid UTF-8 bytes become
// U+FFFD each. len(UTF16Units(s)) == UTF16Len(s); the result is never nil
// for a non-empty s.
func UTF16Units(s string) []uint16 {
	return appendUnits(make([]uint16, 0, UTF16Len(s)), s, -1)
}

// UTF16Prefix returns the code units of JavaScript s.substring(0, n): the
// first n UTF-16 code units of s, with n clamped to [0, UTF16Len(s)].
// Like JavaScript, it may cut a surrogate pair and so end in a lone high
// surrogate; utf16.Decode turns that into U+FFFD if a string is needed.
func UTF16Prefix(s string, n int) []uint16 {
	if n <= 0 {
		return []uint16{}
	}
	return appendUnits(make([]uint16, 0, min(n, len(s)*2)), s, n)
}

// appendUnits appends the code units of s to dst, stopping after limit
// units when limit >= 0.
func appendUnits(dst []uint16, s string, limit int) []uint16 {
	for _, r := range s {
		if limit >= 0 && len(dst) >= limit {
			break
		}
		if r > 0xFFFF {
			hi, lo := utf16.EncodeRune(r)
			dst = append(dst, uint16(hi))
			if limit < 0 || len(dst) < limit {
				dst = append(dst, uint16(lo))
			}
			continue
		}
		dst = append(dst, uint16(r))
	}
	return dst
}
