package chunk

import "bytes"

// The V1 splitter mirrors commonlib src/string_and_binary/chunks.ts
// splitPieces2 with splitPiecesTextV1 and pickPiece (engine/FORMAT.md §3.4).
// Every piece upstream builds from lines is a run of consecutive lines
// with the newlines between them, so the port works on byte ranges of
// the input.

// v1CodeBlockLimit is the length in UTF-16 units above which a fenced
// code block is kept in one piece instead of being split at ; , : <.
const v1CodeBlockLimit = 2048

// splitV1 emits the V1 ranges of data (len(data) > 0). Empty ranges are
// possible and dropped by emit.
func splitV1(data []byte, p params, emit func(start, end int) bool) {
	switch {
	case !p.isText:
		splitBinaryV1(data, p, emit)
	case p.plainSplit:
		pickPieces(data, p.minimum, func(start, end int) bool {
			return cutUnits(data, start, end, p.pieceSize, emit)
		})
	default:
		// Upstream slices the string every pieceSize units and may split
		// a surrogate pair into two lone surrogates, which a Go string
		// (UTF-8) cannot hold; the cut moves one unit later instead, as
		// everywhere else in V1/V2.
		cutUnits(data, 0, len(data), p.pieceSize, emit)
	}
}

// lineReader walks the lines of data as JavaScript's text.split("\n")
// does: n newlines give n+1 lines, the last possibly empty.
type lineReader struct {
	data []byte
	pos  int  // start of the next line
	more bool // a next line exists (upstream: leftData.length != 0)
}

// next returns the next line [start, end) and where the range including
// its newline (if any) ends. It must only be called while r.more.
func (r *lineReader) next() (start, end, withNL int) {
	start = r.pos
	if i := bytes.IndexByte(r.data[start:], '\n'); i >= 0 {
		end = start + i
		r.pos = end + 1
		return start, end, end + 1
	}
	end = len(r.data)
	r.pos = end
	r.more = false
	return start, end, end
}

// nextIsFence reports whether the next line opens or closes a code block:
// it starts with ``` after at most three spaces.
func (r *lineReader) nextIsFence() bool {
	rest := r.data[r.pos:]
	for i := 0; i <= 3 && i < len(rest); i++ {
		if bytes.HasPrefix(rest[i:], []byte("```")) {
			return true
		}
		if rest[i] != ' ' {
			return false
		}
	}
	return false
}

// nextIsHash reports whether the next line is exactly "#".
func (r *lineReader) nextIsHash() bool {
	rest := r.data[r.pos:]
	return len(rest) > 0 && rest[0] == '#' && (len(rest) == 1 || rest[1] == '\n')
}

// pickPieces is upstream pickPiece on byte ranges. Lines are gathered
// into a buffer that is emitted once it has minimum units, at the end,
// when the next line is exactly "#" or when the buffer starts with "#". A
// fenced code block (from its opening fence line to its closing fence
// line) is emitted on its own, split at ; , : < unless it looks like
// base64 or is long.
func pickPieces(data []byte, minimum int, emit func(start, end int) bool) {
	r := lineReader{data: data, more: true}
	bufStart, bufEnd, bufUnits := 0, 0, 0
	for r.more {
		if r.nextIsFence() {
			if !emit(bufStart, bufEnd) {
				return
			}
			_, _, blockEnd := r.next()
			// The line after the opening fence always joins the block,
			// even when it is a fence itself; further lines join up to
			// the next fence.
			for r.more {
				_, _, blockEnd = r.next()
				if !r.more || r.nextIsFence() {
					break
				}
			}
			body := data[bufEnd:blockEnd]
			looksLikeBase64 := len(body) > 0 && body[len(body)-1] == '='
			long := utf16Len(body) > v1CodeBlockLimit
			if r.more { // the closing fence line
				_, _, blockEnd = r.next()
			}
			if !looksLikeBase64 && !long {
				if !splitAtPunctuation(data, bufEnd, blockEnd, emit) {
					return
				}
			} else if !emit(bufEnd, blockEnd) {
				return
			}
			bufStart, bufEnd, bufUnits = blockEnd, blockEnd, 0
			continue
		}
		start, end, withNL := r.next()
		bufEnd = withNL
		bufUnits += utf16Len(data[start:end]) + (withNL - end)
		if bufUnits >= minimum || !r.more || r.nextIsHash() || data[bufStart] == '#' {
			if !emit(bufStart, bufEnd) {
				return
			}
			bufStart, bufUnits = bufEnd, 0
		}
	}
}

// splitAtPunctuation emits the non-empty strings of JavaScript's
// text.split(/(.*?[;,:<])/g) for text = data[start:end]. A match runs
// from its start to the first ; , : or < without crossing a line
// terminator (\n, \r, U+2028, U+2029); the split keeps both the text
// between matches and the matches (the capturing group). A match can
// start only where the rest of the line holds a delimiter, so the next
// match starts at the search position or just after the next line
// terminator.
func splitAtPunctuation(data []byte, start, end int, emit func(start, end int) bool) bool {
	last, q := start, start // last: end of the previous match; q: search position
	for i := q; i < end; {
		switch c := data[i]; {
		case c == ';' || c == ',' || c == ':' || c == '<':
			if !emit(last, q) || !emit(q, i+1) {
				return false
			}
			i++
			last, q = i, i
		case c == '\n' || c == '\r':
			i++
			q = i
		case c == 0xE2 && i+2 < end && data[i+1] == 0x80 && (data[i+2] == 0xA8 || data[i+2] == 0xA9):
			i += 3
			q = i
		default:
			i++
		}
	}
	return emit(last, end)
}

// splitBinaryV1 takes windows of pieceSize bytes and cuts each at the
// first delimiter at least minimum bytes into it, else at its end; the
// delimiter starts the next piece. (Upstream also looks for a newline
// but never uses the result.)
func splitBinaryV1(data []byte, p params, emit func(start, end int) bool) {
	delim, canBeSmall := binaryDelimiter(p.path)
	n := len(data)
	minimum := binaryMinimum(n, canBeSmall)
	for i := 0; i < n; {
		end := n
		if p.pieceSize < n-i {
			end = i + p.pieceSize
		}
		if minimum < end-i {
			if j := bytes.IndexByte(data[i+minimum:end], delim); j >= 0 {
				end = i + minimum + j
			}
		}
		if !emit(i, end) {
			return
		}
		i = end
	}
}
