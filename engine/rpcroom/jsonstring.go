package rpcroom

import (
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// errBadString reports a JSON string token that JavaScript's JSON.parse
// would reject.
var errBadString = errors.New("invalid JSON string")

const hexDigits = "0123456789abcdef"

func isSurrogate(u uint16) bool { return u >= 0xD800 && u <= 0xDFFF }
func isHigh(u uint16) bool      { return u >= 0xD800 && u <= 0xDBFF }
func isLow(u uint16) bool       { return u >= 0xDC00 && u <= 0xDFFF }

// QuoteUTF16 returns the JSON string literal that JavaScript's
// JSON.stringify produces for the string with code units units: `"` and
// `\` escaped, U+0008, U+0009, U+000A, U+000C and U+000D as \b \t \n \f
// \r, other control characters as \u00xx, every surrogate that is not
// half of a pair as a lower-case \udxxx escape (ES2019 well-formed
// JSON.stringify), everything else as raw UTF-8.
func QuoteUTF16(units []uint16) []byte {
	return appendQuoted(make([]byte, 0, len(units)+2), units)
}

func appendQuoted(dst []byte, units []uint16) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(units); i++ {
		u := units[i]
		switch {
		case u == '"' || u == '\\':
			dst = append(dst, '\\', byte(u))
		case u < 0x20:
			dst = appendControl(dst, byte(u))
		case u < utf8.RuneSelf:
			dst = append(dst, byte(u))
		case isHigh(u) && i+1 < len(units) && isLow(units[i+1]):
			dst = utf8.AppendRune(dst, utf16.DecodeRune(rune(u), rune(units[i+1])))
			i++
		case isSurrogate(u):
			dst = appendUnitEscape(dst, u)
		default:
			dst = utf8.AppendRune(dst, rune(u))
		}
	}
	return append(dst, '"')
}

func appendControl(dst []byte, c byte) []byte {
	switch c {
	case '\b':
		return append(dst, '\\', 'b')
	case '\t':
		return append(dst, '\\', 't')
	case '\n':
		return append(dst, '\\', 'n')
	case '\f':
		return append(dst, '\\', 'f')
	case '\r':
		return append(dst, '\\', 'r')
	}
	return appendUnitEscape(dst, uint16(c))
}

func appendUnitEscape(dst []byte, u uint16) []byte {
	return append(dst, '\\', 'u', hexDigits[u>>12], hexDigits[u>>8&0xF], hexDigits[u>>4&0xF], hexDigits[u&0xF])
}

// UnquoteUTF16 decodes the JSON string literal tok (quotes included) as
// JavaScript's JSON.parse does, into UTF-16 code units. Unlike
// encoding/json, a \udxxx escape that is not half of a pair stays the
// lone surrogate it names instead of becoming U+FFFD. Invalid UTF-8 bytes
// in tok become U+FFFD, one per byte.
func UnquoteUTF16(tok []byte) ([]uint16, error) {
	w, err := unquoteWTF8(tok)
	if err != nil {
		return nil, err
	}
	return wtf8Units(w), nil
}

// unquoteWTF8 decodes the JSON string literal tok into generalised UTF-8
// (WTF-8): text as UTF-8, escaped surrogate pairs as one 4-byte sequence,
// and each lone surrogate as its 3-byte encoding ED A0..BF xx, which
// valid UTF-8 never contains. Concatenating two results and passing them
// to joinWTF8 re-forms a pair split between them.
func unquoteWTF8(tok []byte) ([]byte, error) {
	if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' {
		return nil, errBadString
	}
	body := tok[1 : len(tok)-1]
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '\\':
			var err error
			if out, i, err = unescape(out, body, i); err != nil {
				return nil, err
			}
		case c == '"' || c < 0x20:
			return nil, errBadString
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(body[i:])
			out = utf8.AppendRune(out, r) // an invalid byte becomes U+FFFD
			i += n
		}
	}
	return out, nil
}

// unescape decodes the escape sequence at body[i] (a backslash) and
// returns the extended output and the index after the sequence.
func unescape(out, body []byte, i int) ([]byte, int, error) {
	if i+1 >= len(body) {
		return nil, 0, errBadString
	}
	switch body[i+1] {
	case '"', '\\', '/':
		return append(out, body[i+1]), i + 2, nil
	case 'b':
		return append(out, '\b'), i + 2, nil
	case 'f':
		return append(out, '\f'), i + 2, nil
	case 'n':
		return append(out, '\n'), i + 2, nil
	case 'r':
		return append(out, '\r'), i + 2, nil
	case 't':
		return append(out, '\t'), i + 2, nil
	case 'u':
	default:
		return nil, 0, errBadString
	}
	u, ok := hex4(body, i+2)
	if !ok {
		return nil, 0, errBadString
	}
	i += 6
	if isHigh(u) && i+6 <= len(body) && body[i] == '\\' && body[i+1] == 'u' {
		if lo, ok := hex4(body, i+2); ok && isLow(lo) {
			return utf8.AppendRune(out, utf16.DecodeRune(rune(u), rune(lo))), i + 6, nil
		}
	}
	return appendWTF8Unit(out, u), i, nil
}

func hex4(b []byte, at int) (uint16, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var v uint16
	for _, c := range b[at : at+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint16(c)
	}
	return v, true
}

// appendWTF8Unit appends the BMP code unit u in 3-byte-or-shorter UTF-8
// form; for a surrogate that is the WTF-8 form ED A0..BF xx.
func appendWTF8Unit(dst []byte, u uint16) []byte {
	switch {
	case u < 0x80:
		return append(dst, byte(u))
	case u < 0x800:
		return append(dst, 0xC0|byte(u>>6), 0x80|byte(u&0x3F))
	}
	return append(dst, 0xE0|byte(u>>12), 0x80|byte(u>>6&0x3F), 0x80|byte(u&0x3F))
}

// wtf8Surrogate reports the surrogate encoded at w[i:i+3], if any.
func wtf8Surrogate(w []byte, i int) (uint16, bool) {
	if i+3 > len(w) || w[i] != 0xED || w[i+1] < 0xA0 || w[i+1] > 0xBF || w[i+2] < 0x80 || w[i+2] > 0xBF {
		return 0, false
	}
	return 0xD000 | uint16(w[i+1]&0x3F)<<6 | uint16(w[i+2]&0x3F), true
}

// wtf8Units returns the UTF-16 code units of the WTF-8 text w.
func wtf8Units(w []byte) []uint16 {
	units := make([]uint16, 0, len(w))
	for i := 0; i < len(w); {
		if s, ok := wtf8Surrogate(w, i); ok {
			units = append(units, s)
			i += 3
			continue
		}
		r, n := utf8.DecodeRune(w[i:])
		if r > 0xFFFF {
			hi, lo := utf16.EncodeRune(r)
			units = append(units, uint16(hi), uint16(lo))
		} else {
			units = append(units, uint16(r))
		}
		i += n
	}
	return units
}

// errLoneSurrogate reports a lone surrogate where JSON.parse would reject
// it: outside a string literal or right after a backslash.
var errLoneSurrogate = errors.New("lone surrogate outside a JSON string")

// envelopeJSON turns the WTF-8 text of a reassembled envelope into valid
// UTF-8 JSON with the same meaning to JSON.parse: a high and a low
// surrogate that meet (a pair split between two chunks) become one
// 4-byte sequence, and each remaining lone surrogate, which can only
// stand inside a string literal, becomes the \udxxx escape that
// JSON.stringify would have written for it. The result is w itself when
// w holds no surrogate.
func envelopeJSON(w []byte) ([]byte, error) {
	first := -1
	for i := 0; i+1 < len(w); i++ {
		if w[i] == 0xED && w[i+1] >= 0xA0 {
			first = i
			break
		}
	}
	if first < 0 {
		return w, nil
	}
	out := make([]byte, 0, len(w)+8)
	inString, escaped := false, false
	for i := 0; i < len(w); {
		if s, ok := wtf8Surrogate(w, i); ok {
			if lo, ok := wtf8Surrogate(w, i+3); ok && isHigh(s) && isLow(lo) {
				out = utf8.AppendRune(out, utf16.DecodeRune(rune(s), rune(lo)))
				i += 6
			} else {
				if !inString || escaped {
					return nil, errLoneSurrogate
				}
				out = appendUnitEscape(out, s)
				i += 3
			}
			escaped = false
			continue
		}
		c := w[i]
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		}
		out = append(out, c)
		i++
	}
	return out, nil
}
