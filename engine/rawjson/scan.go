package rawjson

import (
	"encoding/binary"
	"unicode/utf8"
)

// MaxDepth is how deeply nested a value Scan follows. A deeper one is
// reported as not valid, which for Scan's callers means "undecided": they
// hand it to encoding/json, which allows more.
const MaxDepth = 1000

// Scan checks the JSON value that starts at b[i] (no whitespace before
// it) and returns the index just after it.
//
// valid is set only when the value is well-formed JSON that encoding/json
// reads the same way: valid UTF-8 throughout and nested at most MaxDepth
// deep. It is clear for anything else, including input encoding/json
// accepts (invalid UTF-8 in a string, deeper nesting), so a caller that
// gets false falls back to encoding/json rather than reporting an error.
//
// canonical is set, with valid, when the value is already written the
// way encoding/json's Marshal writes a json.RawMessage: no whitespace
// between tokens and no '<', '>', '&', U+2028 or U+2029 (Marshal escapes
// them). AppendCanonical rewrites a valid value into that form.
func Scan(b []byte, i int) (end int, valid, canonical bool) {
	s := scanner{b: b, canon: true}
	end, ok := s.value(i)
	if !ok {
		return 0, false, false
	}
	return end, true, s.canon
}

// plain marks the bytes a string may hold as they are, that change nothing
// in a canonical value: printable ASCII but '"', '\\', '<', '>' and '&'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()

type scanner struct {
	b     []byte
	canon bool
	depth int
}

func (s *scanner) value(i int) (int, bool) {
	b := s.b
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return s.str(i)
	case c == '{':
		return s.object(i)
	case c == '[':
		return s.array(i)
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || '0' <= c && c <= '9':
		return number(b, i)
	}
	return 0, false
}

// space skips whitespace, which makes the value not canonical.
func (s *scanner) space(i int) int {
	for i < len(s.b) {
		switch s.b[i] {
		case ' ', '\t', '\r', '\n':
			s.canon = false
			i++
		default:
			return i
		}
	}
	return i
}

func (s *scanner) object(i int) (int, bool) {
	if s.depth++; s.depth > MaxDepth {
		return 0, false
	}
	b := s.b
	i = s.space(i + 1)
	if i < len(b) && b[i] == '}' {
		s.depth--
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		e, ok := s.str(i)
		if !ok {
			return 0, false
		}
		i = s.space(e)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		if e, ok = s.value(s.space(i + 1)); !ok {
			return 0, false
		}
		i = s.space(e)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = s.space(i + 1)
		case '}':
			s.depth--
			return i + 1, true
		default:
			return 0, false
		}
	}
}

func (s *scanner) array(i int) (int, bool) {
	if s.depth++; s.depth > MaxDepth {
		return 0, false
	}
	b := s.b
	i = s.space(i + 1)
	if i < len(b) && b[i] == ']' {
		s.depth--
		return i + 1, true
	}
	for {
		e, ok := s.value(i)
		if !ok {
			return 0, false
		}
		i = s.space(e)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = s.space(i + 1)
		case ']':
			s.depth--
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// str checks the string starting at b[i] (a quote).
func (s *scanner) str(i int) (int, bool) {
	b := s.b
	i++
	for {
		i = plainRun(b, i)
		if i >= len(b) {
			return 0, false
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return 0, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return 0, false
				}
				i += 6
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		case c < utf8.RuneSelf: // '<', '>' or '&'
			s.canon = false
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, false
			}
			if r == '\u2028' || r == '\u2029' {
				s.canon = false
			}
			i += size
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// number checks a number by JSON's grammar; what follows it is the
// caller's to check.
func number(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return 0, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return 0, false
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0, false
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	return i, true
}

const hexDigits = "0123456789abcdef"

// AppendCanonical appends v, a value Scan reported valid, in the form
// encoding/json's Marshal writes a json.RawMessage holding it: whitespace
// between tokens dropped, and '<', '>', '&', U+2028 and U+2029 escaped
// as \u003c, \u003e, \u0026, \u2028 and \u2029.
func AppendCanonical(dst, v []byte) []byte {
	inStr := false
	start := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\' && inStr:
			i++ // the escaped character, never one to rewrite
		case c == '"':
			inStr = !inStr
		case !inStr && (c == ' ' || c == '\t' || c == '\r' || c == '\n'):
			dst = append(dst, v[start:i]...)
			start = i + 1
		case c == '<' || c == '>' || c == '&':
			dst = append(dst, v[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			start = i + 1
		case c == 0xE2 && i+2 < len(v) && v[i+1] == 0x80 && v[i+2]&^1 == 0xA8:
			dst = append(dst, v[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[v[i+2]&0xF])
			i += 2
			start = i + 1
		}
	}
	return append(dst, v[start:]...)
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special reports whether any of the 8 bytes of x is not plain: a control
// character, '"', '\\', '<', '>', '&' or a byte of a multi-byte
// character. It may report bytes after the first such byte too, never
// miss one.
func special(x uint64) bool {
	zero := func(v uint64) uint64 { return (v - ones) &^ v & highs }
	return (x&highs | (x-ones*0x20)&^x&highs | zero(x^(ones*'"')) | zero(x^(ones*'\\')) |
		zero(x^(ones*'<')) | zero(x^(ones*'>')) | zero(x^(ones*'&'))) != 0
}

// plainRun returns the index of the first byte at or after i that is not
// plain, or len(b); eight bytes at a time while they are all plain.
func plainRun(b []byte, i int) int {
	for i+8 <= len(b) && !special(binary.LittleEndian.Uint64(b[i:])) {
		i += 8
	}
	for i < len(b) && plain[b[i]] {
		i++
	}
	return i
}
