// Package jsstring reproduces the few JavaScript string semantics that
// LiveSync's document ids and hashes depend on, for Go strings holding
// UTF-8.
//
// LiveSync is written in TypeScript, so every id it derives from a path
// goes through JavaScript strings: String.prototype.toLowerCase() folds
// case when the vault is case-insensitive (commonlib
// src/string_and_binary/path.ts path2id_base), and hash inputs and
// splitters count and cut in UTF-16 code units (String.prototype.length,
// substring). Go's strings.ToLower and len disagree with both, so this
// package offers exact replacements:
//
//   - ToLower is String.prototype.toLowerCase() with the root locale:
//     simple lowercase mappings, U+0130 to "i\u0307", and the Final_Sigma
//     rule for U+03A3.
//   - UTF16Len is String.prototype.length.
//   - UTF16Units and UTF16Prefix give the code units of a string and the
//     units of s.substring(0, n), which may end in a lone high surrogate.
//   - Number is Number(s) for a string, IsSpace the white space it trims,
//     and Atob the forgiving base64 decode of atob: the lenient parsing
//     that settings documents and Trystero's sealed messages rely on.
//
// Invalid UTF-8 has no JavaScript counterpart. Every function here treats
// each invalid byte as one U+FFFD (one UTF-16 unit, neither cased nor
// case-ignorable); ToLower copies such bytes through unchanged.
//
// The case tables are those of the Go standard library (Unicode 15.0.0)
// extended by the lowercase mappings, cased letters and case-ignorable
// characters that Unicode 16.0 and 17.0 added, so results match current
// JavaScript engines (checked against Node 20 with ICU 78, Unicode 17.0).
package jsstring
