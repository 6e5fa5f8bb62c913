package jsstring

import "unicode/utf8"

const lowerHex = "0123456789abcdef"

// AppendJSONString appends to dst the JSON text that JavaScript's
// JSON.stringify(s) produces for the string s, and returns the extended
// buffer. It follows ECMAScript's QuoteJSONString: only '"', '\\' and
// the control characters below U+0020 are escaped, as \b \t \n \f \r or
// \u00XX with lower-case hex; every other character, including U+007F,
// U+2028, U+2029, '<', '>' and '&', is copied as it is. (Go's
// encoding/json escapes the last five as well, so its output is not
// JSON.stringify's.)
//
// JavaScript also escapes lone surrogates (\udXXX), which a Go string
// holding UTF-8 cannot contain: as everywhere in this package each
// invalid UTF-8 byte stands for one U+FFFD, and that is what is
// written. The result is valid UTF-8.
//
// LiveSync's revision ids hash JSON.stringify output (PouchDB's
// deterministic revisions, pouchdb-utils rev), so a hash input built
// with this function matches the plug-in byte for byte.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\r':
				dst = append(dst, '\\', 'r')
			default:
				dst = append(dst, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && w == 1 {
			dst = append(dst, s[start:i]...)
			dst = utf8.AppendRune(dst, utf8.RuneError)
			i++
			start = i
			continue
		}
		i += w
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
