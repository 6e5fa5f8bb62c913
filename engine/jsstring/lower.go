package jsstring

import (
	"strings"
	"unicode/utf8"
)

const (
	capitalSigma    = 'Σ' // U+03A3
	smallSigma      = 'σ' // U+03C3
	finalSmallSigma = 'ς' // U+03C2
	capitalIDot     = 'İ' // U+0130 LATIN CAPITAL LETTER I WITH DOT ABOVE
)

// ToLower returns s lower-cased exactly as JavaScript's
// String.prototype.toLowerCase() would: locale-independent, with the full
// (SpecialCasing.txt) mappings that apply without a language tag. Every
// code point takes its simple lowercase mapping, except U+0130, which
// becomes "i\u0307", and U+03A3, which becomes final ς when it follows a
// cased letter (ignoring case-ignorable characters in between) and is not
// followed by one (the Final_Sigma condition), σ otherwise. Invalid UTF-8
// bytes are copied unchanged and act as U+FFFD in the sigma context.
// ToLower returns s itself when nothing changes; ASCII-only input takes a
// fast path.
//
// LiveSync applies it to whole paths when the vault is case-insensitive
// (commonlib src/string_and_binary/path.ts path2id_base); V8 implements
// it with ICU's u_strToLower for the root locale.
func ToLower(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return lowerUnicode(s, i)
		}
		if 'A' <= c && c <= 'Z' {
			return lowerASCII(s, i)
		}
	}
	return s
}

// lowerASCII lower-cases s, whose first capital letter is the ASCII byte
// s[first] and of which s[:first] is ASCII.
func lowerASCII(s string, first int) string {
	var sb strings.Builder
	for i := first; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			sb.Grow(len(s) + 4)
			sb.WriteString(s[:first])
			return lowerFrom(&sb, s, first)
		}
	}
	sb.Grow(len(s))
	last := 0
	for i := first; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			sb.WriteString(s[last:i])
			sb.WriteByte(c + 'a' - 'A')
			last = i + 1
		}
	}
	sb.WriteString(s[last:])
	return sb.String()
}

// lowerUnicode lower-cases s, of which s[:start] is known to be ASCII
// without capitals, and returns s itself if nothing changes.
func lowerUnicode(s string, start int) string {
	i := start
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				break
			}
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if w == 1 || (r != capitalSigma && lowerRune(r) == r) {
			i += w // invalid byte, or a code point that maps to itself
			continue
		}
		break
	}
	if i == len(s) {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s) + 4)
	sb.WriteString(s[:i])
	return lowerFrom(&sb, s, i)
}

// lowerFrom appends the lower-cased s[i:] to sb and returns the result.
// Context for Final_Sigma is taken from the whole of s.
func lowerFrom(sb *strings.Builder, s string, i int) string {
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			sb.WriteByte(c)
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case w == 1:
			sb.WriteByte(c) // invalid UTF-8: copied unchanged
		case r == capitalIDot:
			sb.WriteString("i\u0307")
		case r == capitalSigma:
			sb.WriteRune(lowerSigma(s, i))
		default:
			sb.WriteRune(lowerRune(r))
		}
		i += w
	}
	return sb.String()
}

// lowerSigma returns the lowercase of the capital sigma at s[i]: ς when
// the Final_Sigma condition (Unicode §3.13, Table 3-17) holds, σ
// otherwise. Like ICU, a character that is both cased and case-ignorable
// (e.g. U+0345, U+02B0) is skipped as case-ignorable.
func lowerSigma(s string, i int) rune {
	if precededByCased(s[:i]) && !followedByCased(s[i+len("Σ"):]) {
		return finalSmallSigma
	}
	return smallSigma
}

// precededByCased reports whether before ends in a cased letter followed
// by zero or more case-ignorable characters.
func precededByCased(before string) bool {
	for len(before) > 0 {
		r, w := utf8.DecodeLastRuneInString(before)
		if !isCaseIgnorable(r) {
			return isCased(r)
		}
		before = before[:len(before)-w]
	}
	return false
}

// followedByCased reports whether after starts with zero or more
// case-ignorable characters followed by a cased letter.
func followedByCased(after string) bool {
	for len(after) > 0 {
		r, w := utf8.DecodeRuneInString(after)
		if !isCaseIgnorable(r) {
			return isCased(r)
		}
		after = after[w:]
	}
	return false
}
