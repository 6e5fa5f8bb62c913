package jsstring

import (
	"encoding/base64"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Atob is the WHATWG forgiving-base64 decode behind JavaScript's atob:
// ASCII whitespace is ignored, one or two trailing "=" are optional when
// the length is a multiple of four, a length of 1 modulo 4 or an "="
// elsewhere fails, and the unused bits of the last character are not
// checked.
func Atob(s string) ([]byte, bool) {
	s = strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\n', '\f', '\r', ' ':
			return -1
		}
		return r
	}, s)
	if len(s)%4 == 0 {
		s = strings.TrimSuffix(s, "=")
		s = strings.TrimSuffix(s, "=")
	}
	if len(s)%4 == 1 || strings.ContainsRune(s, '=') {
		return nil, false
	}
	b, err := base64.RawStdEncoding.DecodeString(s)
	return b, err == nil
}

// Number is JavaScript's Number(s) for a string (StringToNumber):
// surrounding white space is ignored, an empty string is 0, and the rest
// must be a decimal literal (optionally signed, with fraction and
// exponent), "Infinity", or an unsigned 0x, 0o or 0b integer; anything
// else is NaN.
func Number(s string) float64 {
	s = strings.TrimFunc(s, IsSpace)
	if s == "" {
		return 0
	}
	if len(s) > 2 && s[0] == '0' {
		base := 0
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			n, ok := new(big.Int).SetString(s[2:], base)
			if !ok || strings.ContainsAny(s[2:], "+-_") {
				return math.NaN()
			}
			f, _ := new(big.Float).SetInt(n).Float64()
			return f
		}
	}
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 {
		return math.NaN()
	}
	if body == "Infinity" {
		if s[0] == '-' {
			return math.Inf(-1)
		}
		return math.Inf(1)
	}
	if !isDecimalLiteral(body) {
		return math.NaN()
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !strings.Contains(err.Error(), "range") {
		return math.NaN()
	}
	return f
}

// isDecimalLiteral reports whether s is an unsigned StrDecimalLiteral
// without "Infinity": digits with an optional fraction (at least one
// digit on either side of the point) and an optional exponent.
func isDecimalLiteral(s string) bool {
	i, digits := 0, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(s)
}

// IsSpace reports whether r is JavaScript WhiteSpace or LineTerminator
// (what String.prototype.trim and Number() remove).
func IsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}
