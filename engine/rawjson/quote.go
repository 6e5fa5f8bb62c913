package rawjson

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// AppendString appends s as a JSON string, byte for byte as
// encoding/json's Marshal writes a Go string: '"' and '\\' escaped,
// control characters as \b, \f, \n, \r, \t or \u00XX, '<', '>', '&',
// U+2028 and U+2029 as \u escapes, and each byte of invalid UTF-8 as
// \ufffd.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		for i+8 <= len(s) && !special(uint64(s[i])|uint64(s[i+1])<<8|uint64(s[i+2])<<16|uint64(s[i+3])<<24|
			uint64(s[i+4])<<32|uint64(s[i+5])<<40|uint64(s[i+6])<<48|uint64(s[i+7])<<56) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			start = i + size
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Unquote returns the string the JSON string raw holds, exactly as
// encoding/json's Unmarshal into a string gives it (each byte of invalid
// UTF-8 and each unpaired surrogate escape becomes U+FFFD), and false
// where Unmarshal fails: raw is not one well-formed JSON string.
func Unquote(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	s := raw[1 : len(raw)-1]
	i := 0
	for i < len(s) {
		if i = plainRun(s, i); i >= len(s) {
			break
		}
		c := s[i]
		if plain[c] || c == '<' || c == '>' || c == '&' {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			break
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	if i == len(s) {
		return string(s), true
	}
	b := make([]byte, i, len(s)+utf8.UTFMax)
	copy(b, s[:i])
	for i < len(s) {
		switch c := s[i]; {
		case c == '\\':
			var ok bool
			if b, i, ok = unescape(b, s, i); !ok {
				return "", false
			}
		case c == '"' || c < ' ':
			return "", false
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			b = utf8.AppendRune(b, r)
			i += size
		}
	}
	return string(b), true
}

// unescape appends what the escape at s[i] (a backslash) stands for.
func unescape(b, s []byte, i int) ([]byte, int, bool) {
	if i+1 >= len(s) {
		return b, i, false
	}
	switch c := s[i+1]; c {
	case '"', '\\', '/':
		return append(b, c), i + 2, true
	case 'b':
		return append(b, '\b'), i + 2, true
	case 'f':
		return append(b, '\f'), i + 2, true
	case 'n':
		return append(b, '\n'), i + 2, true
	case 'r':
		return append(b, '\r'), i + 2, true
	case 't':
		return append(b, '\t'), i + 2, true
	case 'u':
		r := getu4(s[i:])
		if r < 0 {
			return b, i, false
		}
		i += 6
		if utf16.IsSurrogate(r) {
			if dec := utf16.DecodeRune(r, getu4(s[i:])); dec != unicode.ReplacementChar {
				return utf8.AppendRune(b, dec), i + 6, true
			}
			r = unicode.ReplacementChar
		}
		return utf8.AppendRune(b, r), i, true
	}
	return b, i, false
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
