package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// safe returns s ready for a terminal: printable text, letters of every
// script included ("Ünïcode Ñame", "資料/概要.md"), is left as it is;
// control characters (C0 with tab and newline, DEL, C1), bidirectional
// overrides and isolates (U+202A–U+202E, U+2066–U+2069, the "Trojan
// Source" set), line and paragraph separators (U+2028, U+2029) and bytes
// that are not UTF-8 are escaped as %q escapes them ("\x1b", "\x00",
// "\a", "\u202e", "\xff"). Ids, paths, keys and error texts that come
// from a remote, a pack or a dump go through safe before every human
// print: a hostile writer could otherwise retitle the terminal, hide
// lines, or forge output. A backslash is doubled, as %q does, so a printed
// "\x1b" is always an escape, and invisible format characters (U+200B,
// U+2060, U+FEFF, U+00AD, U+180E) are escaped so two names cannot print
// alike; the --json output (escaped by encoding/json) is the exact form.
func safe(s string) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if unsafeRune(r, size) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r, size):
			q := strconv.QuoteRuneToASCII(r) // '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// safeErr is safe(err.Error()).
func safeErr(err error) string { return safe(err.Error()) }

// unsafeRune reports whether rune r (size bytes of UTF-8) must be escaped
// by safe.
func unsafeRune(r rune, size int) bool {
	switch {
	case r == utf8.RuneError && size == 1:
		return true
	case unicode.IsControl(r): // C0, DEL, C1
		return true
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x2028 || r == 0x2029:
		return true
	case r == '\\':
		// Escaped too, so that a printed "\x1b" can only be an escape.
		return true
	case r == 0x200B || r == 0x2060 || r == 0xFEFF || r == 0x00AD || r == 0x180E:
		// Invisible format characters (zero-width space, word joiner,
		// byte order mark, soft hyphen, Mongolian vowel separator) would
		// make two names print alike. The joiners of emoji and Persian
		// (U+200C, U+200D) stay.
		return true
	}
	return false
}
