package trystero

import "unicode/utf8"

// jsUTF8 is JavaScript's TextEncoder.encode of the Go string s read as a
// JavaScript string: valid UTF-8 is returned as is, and each invalid byte
// becomes U+FFFD (as engine/jsstring reads Go strings).
func jsUTF8(s string) []byte {
	if utf8.ValidString(s) {
		return []byte(s)
	}
	return []byte(string([]rune(s)))
}

// decodeText is JavaScript's new TextDecoder().decode(b), which Trystero
// applies to action names, room tokens, metadata, string and JSON bodies
// and opened signalling data (trystero core dist utils.mjs decodeBytes):
// UTF-8 with a leading byte order mark removed and every maximal invalid
// subsequence replaced by one U+FFFD, as the WHATWG Encoding Standard's
// UTF-8 decoder does. (Go's utf8 package replaces each invalid byte
// separately, which differs for truncated sequences.)
func decodeText(b []byte) string {
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		b = b[3:]
	}
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x80 {
			out = append(out, c)
			i++
			continue
		}
		need, lower, upper := utf8Lead(c)
		if need == 0 {
			out = utf8.AppendRune(out, utf8.RuneError)
			i++
			continue
		}
		j := i + 1
		for ; need > 0; need-- {
			if j >= len(b) || b[j] < lower || b[j] > upper {
				break
			}
			lower, upper = 0x80, 0xBF
			j++
		}
		if need > 0 {
			// The bytes read so far are one error; the byte that broke
			// the sequence is read again as the start of the next one.
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[i:j]...)
		}
		i = j
	}
	return string(out)
}

// utf8Lead returns how many continuation bytes the lead byte c needs and
// the range the first of them must fall in (WHATWG UTF-8 decoder); need
// is 0 for a byte that cannot start a sequence.
func utf8Lead(c byte) (need int, lower, upper byte) {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 1, 0x80, 0xBF
	case c == 0xE0:
		return 2, 0xA0, 0xBF
	case c == 0xED:
		return 2, 0x80, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		return 2, 0x80, 0xBF
	case c == 0xF0:
		return 3, 0x90, 0xBF
	case c == 0xF4:
		return 3, 0x80, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		return 3, 0x80, 0xBF
	}
	return 0, 0, 0
}
