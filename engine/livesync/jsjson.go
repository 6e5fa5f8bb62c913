package livesync

import (
	"strconv"
	"unicode/utf8"
)

// appendJSString appends s as JavaScript's JSON.stringify would write it.
// Go's encoding/json differs in ways that change ciphertexts: it escapes
// '<', '>', '&', U+2028 and U+2029 and writes upper-case hex. LiveSync
// encrypts the JSON.stringify output of metadata (commonlib
// src/pouchdb/encryption.ts), so the plaintext must match byte for byte.
// Invalid UTF-8 bytes are written as U+FFFD, as a JS string decoded from
// them would hold.
func appendJSString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				dst = append(dst, '\\', '"')
			case c == '\\':
				dst = append(dst, '\\', '\\')
			case c >= 0x20:
				dst = append(dst, c)
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// appendJSStringArray appends a JSON array of strings in JSON.stringify form.
func appendJSStringArray(dst []byte, a []string) []byte {
	dst = append(dst, '[')
	for i, s := range a {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSString(dst, s)
	}
	return append(dst, ']')
}

// appendJSInt appends an integer as JavaScript prints a safe integer.
func appendJSInt(dst []byte, n int64) []byte {
	return strconv.AppendInt(dst, n, 10)
}
