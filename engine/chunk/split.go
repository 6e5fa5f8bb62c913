package chunk

import (
	"encoding/base64"
	"unsafe"
)

// SplitRanges splits a file's content into LiveSync pieces and calls
// yield with the byte range [start, end) of every piece, in order, until
// yield returns false. The ranges are non-empty, adjacent and together
// cover data exactly; an empty data yields nothing.
//
// path is the vault path (it selects line-aware splitting, see
// ShouldSplitAsPlainText, and the V1/V2 binary delimiter for .pdf and
// .json files). isText says the file is stored as a "plain" document
// (its content is a text blob, normally IsPlainText(path)); the piece of a
// range is then the text data[start:end], otherwise the base64 of those
// bytes (see Piece).
//
// The error, which wraps engine.ErrUnsupported, comes only from
// s.Validate and is returned before yield is called.
func SplitRanges(path string, data []byte, isText bool, s Settings, yield func(start, end int) bool) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if len(data) == 0 {
		return nil
	}
	// Any piece size beyond both the data length and V3's 4 MiB cap
	// behaves like an infinite one; clamping keeps index arithmetic far
	// from overflow on 32-bit platforms.
	pieceSize := s.PieceSize()
	if limit := int64(max(len(data), 4<<20)) + 1; pieceSize > limit {
		pieceSize = limit
	}
	p := params{
		pieceSize:  int(pieceSize),
		minimum:    s.minimumChunkSize(),
		plainSplit: ShouldSplitAsPlainText(path),
		isText:     isText,
		path:       path,
	}
	emit := func(start, end int) bool {
		if start >= end { // upstream drops empty pieces (EntryManagerImpls.ts createChunks)
			return true
		}
		return yield(start, end)
	}
	switch s.Splitter {
	case V3RabinKarp:
		splitV3(data, p, yield) // never produces empty ranges
	case V2, V2Segmenter:
		splitV2(data, p, emit)
	default:
		splitV1(data, p, emit)
	}
	return nil
}

// SplitFunc is SplitRanges delivering every piece as the string stored in
// the chunk document's data field: the text itself when isText, else the
// standard padded base64 of the piece's bytes. It stops when yield
// returns false.
func SplitFunc(path string, data []byte, isText bool, s Settings, yield func(piece string) bool) error {
	return SplitRanges(path, data, isText, s, func(start, end int) bool {
		return yield(Piece(data[start:end], isText))
	})
}

// Split returns the ordered, non-empty pieces of a file's content exactly
// as LiveSync stores them in chunk documents (see SplitFunc). An empty
// data has no pieces (a nil slice).
func Split(path string, data []byte, isText bool, s Settings) ([]string, error) {
	var pieces []string
	err := SplitFunc(path, data, isText, s, func(piece string) bool {
		pieces = append(pieces, piece)
		return true
	})
	if err != nil {
		return nil, err
	}
	return pieces, nil
}

// Piece returns the chunk data string of the bytes b: a copy of b as text
// when isText (bytes that are not valid UTF-8 are kept as they are; they
// never occur in text that LiveSync read from a JavaScript string), or its
// standard padded base64 encoding (ow src/binary/base64.ts
// arrayBufferToBase64Single) otherwise.
func Piece(b []byte, isText bool) string {
	if isText {
		return string(b)
	}
	if len(b) == 0 {
		return ""
	}
	buf := make([]byte, base64.StdEncoding.EncodedLen(len(b)))
	encodeBase64(buf, b)
	// buf is never written again, so sharing it with the string is safe
	// and saves a copy of every binary piece.
	return unsafe.String(&buf[0], len(buf))
}

// params are the per-file inputs every splitter receives, resolved from
// Settings as commonlib src/ContentSplitter/ContentSplitterBase.ts
// getParamsFor does.
type params struct {
	pieceSize  int  // pieceSize, clamped (see SplitRanges); ≥ PieceUnit
	minimum    int  // minimumChunkSize, ≥ 1
	plainSplit bool // shouldSplitAsPlainText(path)
	isText     bool // the blob is text/plain
	path       string
}
