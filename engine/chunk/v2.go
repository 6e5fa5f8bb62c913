package chunk

import (
	"bytes"
	"math"
	"strings"
)

// The V2 splitter mirrors commonlib src/string_and_binary/chunks.ts
// splitPieces2V2 (engine/FORMAT.md §3.3).

// v2MaxItems is upstream MAX_ITEMS: line-aware V2 grows its minimum
// length until the text has at most about 100 pieces.
const v2MaxItems = 100

// splitV2 emits the V2 ranges of data (len(data) > 0). Empty ranges are
// possible and dropped by emit.
func splitV2(data []byte, p params, emit func(start, end int) bool) {
	if !p.isText {
		splitBinaryV2(data, p, emit)
		return
	}
	if !p.plainSplit {
		cutUnits(data, 0, len(data), p.pieceSize, emit)
		return
	}
	// Newline-terminated segments are gathered until the gathered text is
	// longer than minLen units (splitByDelimiterWithMinLength); the text
	// after the last newline forms the last piece. Every piece is then
	// cut to pieceSize units.
	minLen := v2MinLength(utf16Len(data), p.minimum)
	n := len(data)
	bufStart, bufUnits, pos := 0, 0, 0
	for pos < n {
		i := bytes.IndexByte(data[pos:], '\n')
		if i < 0 {
			break
		}
		end := pos + i + 1
		bufUnits += utf16Len(data[pos:end])
		if bufUnits > minLen {
			if !cutUnits(data, bufStart, end, p.pieceSize, emit) {
				return
			}
			bufStart, bufUnits = end, 0
		}
		pos = end
	}
	cutUnits(data, bufStart, n, p.pieceSize, emit)
}

// v2MinLength returns the smallest multiple m of minimum (m ≥ minimum)
// with textLen / m ≤ v2MaxItems, as upstream's loop that adds minimum
// until it holds.
func v2MinLength(textLen, minimum int) int {
	per := int64(v2MaxItems) * int64(minimum)
	k := (int64(textLen) + per - 1) / per
	if k < 1 {
		k = 1
	}
	return int(k * int64(minimum))
}

// binaryDelimiter returns the V1/V2 binary delimiter byte for a path and
// whether the file may have small pieces: '/' for .pdf, ',' for .json
// (small), NUL otherwise.
func binaryDelimiter(path string) (delim byte, canBeSmall bool) {
	switch {
	case strings.HasSuffix(path, ".pdf"):
		return '/', false
	case strings.HasSuffix(path, ".json"):
		return ',', true
	}
	return 0, false
}

// binaryMinimum returns the V1/V2 binary minimum piece length for a blob
// of size bytes: 10^(step−1) where step counts the divisions by 12.5
// that bring the clamped size to 10 or less. It uses float64 as the
// JavaScript original does.
func binaryMinimum(size int, canBeSmall bool) int {
	clampMin := 100000.0
	if canBeSmall {
		clampMin = 100
	}
	w := math.Max(clampMin, math.Min(100000000, float64(size)))
	step := 1
	for w > 10 {
		w /= 12.5
		step++
	}
	return int(math.Floor(math.Pow(10, float64(step-1))))
}

// splitBinaryV2 cuts at the first delimiter (else newline) found at least
// minimum bytes into the piece, or at pieceSize bytes; the delimiter
// starts the next piece.
func splitBinaryV2(data []byte, p params, emit func(start, end int) bool) {
	delim, canBeSmall := binaryDelimiter(p.path)
	n := len(data)
	minimum := binaryMinimum(n, canBeSmall)
	// Upstream searches the whole rest of the buffer each time; the
	// position found stays valid while it lies at or after the search
	// start, and "not found" stays valid for good, because the search
	// start only grows.
	const unknown = -2
	nextDelim, nextNL := unknown, unknown
	find := func(cached int, c byte, from int) int {
		if cached == -1 || cached >= from {
			return cached
		}
		if from >= n {
			return -1
		}
		if i := bytes.IndexByte(data[from:], c); i >= 0 {
			return from + i
		}
		return -1
	}
	for i := 0; i < n; {
		from := i + minimum
		if minimum >= n-i {
			from = n
		}
		nextDelim = find(nextDelim, delim, from)
		cut := nextDelim
		if cut < 0 {
			nextNL = find(nextNL, '\n', from)
			cut = nextNL
		}
		end := n
		if p.pieceSize < n-i {
			end = i + p.pieceSize
		}
		if cut >= 0 && cut < end {
			end = cut
		}
		if !emit(i, end) {
			return
		}
		i = end
	}
}
