package jsstring

import "unicode"

// The standard library carries Unicode 15.0.0 case data. JavaScript
// engines follow newer Unicode versions (V8 through ICU), so the tables
// below add what Unicode 16.0 and 17.0 changed in the three properties
// ToLower depends on. Every entry was checked against Node 20 (ICU 78,
// Unicode 17.0) over all code points; TestToLower and
// TestNewerUnicodeProperties pin a sample.

// caseDelta maps the code points lo..hi to r+delta.
type caseDelta struct {
	lo, hi rune
	delta  rune
}

// newerLower lists the simple lowercase mappings added after Unicode 15.0
// (UnicodeData.txt field 13), sorted by lo.
var newerLower = []caseDelta{
	{0x1C89, 0x1C89, 1},               // CYRILLIC CAPITAL LETTER TJE
	{0xA7CB, 0xA7CB, 0x0264 - 0xA7CB}, // LATIN CAPITAL LETTER RAMS HORN
	{0xA7CC, 0xA7CC, 1},               // LATIN CAPITAL LETTER S WITH DIAGONAL STROKE
	{0xA7CE, 0xA7CE, 1},               // LATIN CAPITAL LETTER PHARYNGEAL VOICED FRICATIVE
	{0xA7D2, 0xA7D2, 1},               // LATIN CAPITAL LETTER DOUBLE THORN
	{0xA7D4, 0xA7D4, 1},               // LATIN CAPITAL LETTER DOUBLE WYNN
	{0xA7DA, 0xA7DA, 1},               // LATIN CAPITAL LETTER LAMBDA
	{0xA7DC, 0xA7DC, 0x019B - 0xA7DC}, // LATIN CAPITAL LETTER LAMBDA WITH STROKE
	{0x10D50, 0x10D65, 0x20},          // GARAY CAPITAL LETTERS
	{0x16EA0, 0x16EB8, 0x1B},          // BERIA ERFE CAPITAL LETTERS
}

// newerCased holds the code points that became Cased after Unicode 15.0.
var newerCased = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x1C89, Hi: 0x1C8A, Stride: 1},
		{Lo: 0xA7CB, Hi: 0xA7CF, Stride: 1},
		{Lo: 0xA7D2, Hi: 0xA7D4, Stride: 2},
		{Lo: 0xA7DA, Hi: 0xA7DC, Stride: 1},
		{Lo: 0xA7F1, Hi: 0xA7F1, Stride: 1},
	},
	R32: []unicode.Range32{
		{Lo: 0x10D50, Hi: 0x10D65, Stride: 1},
		{Lo: 0x10D70, Hi: 0x10D85, Stride: 1},
		{Lo: 0x16EA0, Hi: 0x16EB8, Stride: 1},
		{Lo: 0x16EBB, Hi: 0x16ED3, Stride: 1},
	},
}

// noLongerCased is U+0295 LATIN LETTER PHARYNGEAL VOICED FRICATIVE, which
// Unicode 16.0 moved from Ll to Lo.
const noLongerCased = 0x0295

// newerCaseIgnorable holds the code points that became Case_Ignorable
// after Unicode 15.0 (new Mn, Lm and Sk characters).
var newerCaseIgnorable = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x0897, Hi: 0x0897, Stride: 1},
		{Lo: 0x1ACF, Hi: 0x1ADD, Stride: 1},
		{Lo: 0x1AE0, Hi: 0x1AEB, Stride: 1},
		{Lo: 0xA7F1, Hi: 0xA7F1, Stride: 1},
	},
	R32: []unicode.Range32{
		{Lo: 0x10D4E, Hi: 0x10D4E, Stride: 1},
		{Lo: 0x10D69, Hi: 0x10D6D, Stride: 1},
		{Lo: 0x10D6F, Hi: 0x10D6F, Stride: 1},
		{Lo: 0x10EC5, Hi: 0x10EC5, Stride: 1},
		{Lo: 0x10EFA, Hi: 0x10EFC, Stride: 1},
		{Lo: 0x113BB, Hi: 0x113C0, Stride: 1},
		{Lo: 0x113CE, Hi: 0x113D2, Stride: 2},
		{Lo: 0x113E1, Hi: 0x113E2, Stride: 1},
		{Lo: 0x11B60, Hi: 0x11B60, Stride: 1},
		{Lo: 0x11B62, Hi: 0x11B64, Stride: 1},
		{Lo: 0x11B66, Hi: 0x11B66, Stride: 1},
		{Lo: 0x11DD9, Hi: 0x11DD9, Stride: 1},
		{Lo: 0x11F5A, Hi: 0x11F5A, Stride: 1},
		{Lo: 0x1611E, Hi: 0x16129, Stride: 1},
		{Lo: 0x1612D, Hi: 0x1612F, Stride: 1},
		{Lo: 0x16D40, Hi: 0x16D42, Stride: 1},
		{Lo: 0x16D6B, Hi: 0x16D6C, Stride: 1},
		{Lo: 0x16FF2, Hi: 0x16FF3, Stride: 1},
		{Lo: 0x1E5EE, Hi: 0x1E5EF, Stride: 1},
		{Lo: 0x1E6E3, Hi: 0x1E6E6, Stride: 3},
		{Lo: 0x1E6EE, Hi: 0x1E6EF, Stride: 1},
		{Lo: 0x1E6F5, Hi: 0x1E6F5, Stride: 1},
		{Lo: 0x1E6FF, Hi: 0x1E6FF, Stride: 1},
	},
}

// noLongerCaseIgnorable is U+1171E AHOM CONSONANT SIGN MEDIAL RA, which
// Unicode 16.0 moved from Mn to Mc.
const noLongerCaseIgnorable = 0x1171E

// wordBreakIgnorable lists the characters whose Word_Break property is
// MidLetter, MidNumLet or Single_Quote (WordBreakProperty.txt). With the
// categories Mn, Me, Cf, Lm and Sk they make up Case_Ignorable
// (DerivedCoreProperties.txt); the standard library has no Word_Break
// table.
var wordBreakIgnorable = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x0027, Hi: 0x0027, Stride: 1}, // '
		{Lo: 0x002E, Hi: 0x002E, Stride: 1}, // .
		{Lo: 0x003A, Hi: 0x003A, Stride: 1}, // :
		{Lo: 0x00B7, Hi: 0x00B7, Stride: 1},
		{Lo: 0x0387, Hi: 0x0387, Stride: 1},
		{Lo: 0x055F, Hi: 0x055F, Stride: 1},
		{Lo: 0x05F4, Hi: 0x05F4, Stride: 1},
		{Lo: 0x2018, Hi: 0x2019, Stride: 1},
		{Lo: 0x2024, Hi: 0x2024, Stride: 1},
		{Lo: 0x2027, Hi: 0x2027, Stride: 1},
		{Lo: 0xFE13, Hi: 0xFE13, Stride: 1},
		{Lo: 0xFE52, Hi: 0xFE52, Stride: 1},
		{Lo: 0xFE55, Hi: 0xFE55, Stride: 1},
		{Lo: 0xFF07, Hi: 0xFF07, Stride: 1},
		{Lo: 0xFF0E, Hi: 0xFF0E, Stride: 1},
		{Lo: 0xFF1A, Hi: 0xFF1A, Stride: 1},
	},
	LatinOffset: 4,
}

// lowerRune is the simple lowercase mapping of r (UnicodeData.txt) as of
// Unicode 17.0.
func lowerRune(r rune) rune {
	if r >= newerLower[0].lo {
		for _, d := range newerLower {
			if r < d.lo {
				break
			}
			if r <= d.hi {
				return r + d.delta
			}
		}
	}
	return unicode.ToLower(r)
}

// isCased reports the Unicode property Cased (Lowercase, Uppercase or
// Lt), as of Unicode 17.0.
func isCased(r rune) bool {
	if r == noLongerCased {
		return false
	}
	return unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt, unicode.Other_Lowercase, unicode.Other_Uppercase) ||
		unicode.Is(newerCased, r)
}

// isCaseIgnorable reports the Unicode property Case_Ignorable, as of
// Unicode 17.0.
func isCaseIgnorable(r rune) bool {
	if r == noLongerCaseIgnorable {
		return false
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk) ||
		unicode.Is(wordBreakIgnorable, r) || unicode.Is(newerCaseIgnorable, r)
}
