// Package chunk cuts file content into the pieces that Self-hosted
// LiveSync stores as chunk ("leaf") documents, with exactly the
// boundaries of the plug-in's three content splitters (engine/FORMAT.md §3.1–3.4;
// commonlib src/ContentSplitter/* and src/string_and_binary/chunks.ts):
//
//   - V3RabinKarp, the default of new vaults: content-defined boundaries
//     from a 48-byte Rabin–Karp rolling hash over the UTF-8 bytes;
//   - V2 (and V2Segmenter, which is the same): text split after newlines,
//     binary at NUL (',' for .json, '/' for .pdf) or newline bytes;
//   - V1 (also the empty setting): line- and code-block-aware text
//     splitting and windowed binary splitting.
//
// A piece is a byte range of the content. Its chunk data string is the
// text itself for files stored as text ("plain" documents) and the
// standard padded base64 of the bytes otherwise. Concatenating the text
// pieces, or the decoded base64 pieces, gives back the content (§3.6).
// Chunk ids are computed from the piece strings by package chunkid.
//
// Usage:
//
//	s := chunk.Settings{Splitter: chunk.V3RabinKarp} // from the vault settings
//	isText := chunk.IsPlainText(path)
//	pieces, err := chunk.Split(path, content, isText, s)
//
// SplitFunc streams the pieces without building the slice, and
// SplitRanges reports byte ranges only (no strings are built).
//
// # Compatibility notes
//
// V1 and V2 count text in UTF-16 code units (JavaScript string lengths)
// and never cut a surrogate pair in two: a cut that would fall inside
// one moves one unit later, as upstream does everywhere except in V1
// for text files that are not .md/.txt/.canvas, where upstream would
// produce lone surrogates that a Go string cannot hold; the cut moves
// there too (a different piece, hence chunk id, only in that rare case).
//
// Upstream V1 and V2 read text with Blob.text(), which drops a leading
// byte order mark of the file. This package never drops content: a
// U+FEFF is kept wherever it is (engine/FORMAT.md §3.7), which matches V3
// exactly and differs from upstream V1/V2 only in the first piece of a
// file that starts with a BOM.
//
// Text is expected to be valid UTF-8 (it is, whenever it came from a
// JavaScript string). Invalid bytes are passed through unchanged, each
// counted as one UTF-16 unit where V1/V2 count units.
package chunk
