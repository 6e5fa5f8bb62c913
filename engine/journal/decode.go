package journal

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/livesync-go/livesync-go/engine"
)

// ParseError reports a record of a pack payload that cannot be read. Line
// is the 1-based number of the record (records are lines); Reason says
// what is wrong without quoting the record. It unwraps to
// engine.ErrMalformed.
type ParseError struct {
	Line   int
	Reason string
}

// Error returns "journal: parse: line N: reason".
func (e *ParseError) Error() string {
	return fmt.Sprintf("journal: parse: line %d: %s", e.Line, e.Reason)
}

// Unwrap returns engine.ErrMalformed.
func (e *ParseError) Unwrap() error { return engine.ErrMalformed }

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// DecodeFunc parses a plain pack payload and calls fn for each record in
// order, without materialising the whole pack. It mirrors the receive
// transform of commonlib src/replication/journal/JournalSyncCore.ts:
// records end at each line feed; a leading UTF-8 BOM of a record is
// dropped (TextDecoder does that per record upstream); a record starting
// with "~" is a chunk whose id runs to the first U+001F and whose data is
// the rest of the line, unescaped with unescapeNewLineFromString
// (src/common/utils.ts) when it starts with `\f`; any other record is a
// JSON document. An empty payload has no records.
//
// A record that is empty, not terminated by a line feed, not valid
// UTF-8, a chunk without U+001F or with an empty id, or a document that is
// not a JSON object with a non-empty string "_id" stops decoding with an
// *engine.Error (Stage engine.StageDecode) wrapping a *ParseError. An
// error returned by fn stops decoding and is returned unchanged. The Doc
// of each record points into payload; ChunkData is a copy.
func DecodeFunc(payload []byte, fn func(Record) error) error {
	return decodeFunc("decode pack", "", payload, fn)
}

// DecodePack parses a whole plain pack payload; see DecodeFunc for the
// rules and errors. The Doc of each record points into payload.
func DecodePack(payload []byte) ([]Record, error) {
	recs := make([]Record, 0, bytes.Count(payload, []byte{recordSep}))
	err := decodeFunc("decode pack", "", payload, func(r Record) error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// decodeFunc implements DecodeFunc; op and key name the operation and the
// object in parse errors.
func decodeFunc(op, key string, payload []byte, fn func(Record) error) error {
	for line := 1; len(payload) > 0; line++ {
		i := bytes.IndexByte(payload, recordSep)
		if i < 0 {
			return decodeErr(op, key, line, "record not terminated by a line feed")
		}
		r, reason := parseRecord(payload[:i])
		if reason != "" {
			return decodeErr(op, key, line, reason)
		}
		if err := fn(r); err != nil {
			return err
		}
		payload = payload[i+1:]
	}
	return nil
}

func decodeErr(op, key string, line int, reason string) error {
	return &engine.Error{Op: op, DocID: key, Stage: engine.StageDecode,
		Err: &ParseError{Line: line, Reason: reason}}
}

// parseRecord parses one line without its line feed. It returns a
// non-empty reason when the line is malformed.
func parseRecord(b []byte) (Record, string) {
	b = bytes.TrimPrefix(b, utf8BOM)
	if len(b) == 0 {
		return Record{}, "empty record"
	}
	if !utf8.Valid(b) {
		return Record{}, "record is not valid UTF-8"
	}
	if b[0] == chunkMark {
		sep := bytes.IndexByte(b, unitSep)
		switch {
		case sep < 0:
			return Record{}, "chunk record without U+001F separator"
		case sep == 1:
			return Record{}, "chunk record with an empty id"
		}
		return Record{ID: string(b[1:sep]), ChunkData: unescape(b[sep+1:])}, ""
	}
	id, err := docID(b)
	if err != nil {
		return Record{}, err.Error()
	}
	return Record{ID: id, Doc: b}, ""
}

// unescape mirrors unescapeNewLineFromString (commonlib
// src/common/utils.ts): data starting with `\f` loses that marker and has
// `\n`, `\r` and `\\` replaced left to right by LF, CR and `\`; any other
// backslash is kept. Data without the marker is returned as is.
func unescape(b []byte) string {
	if !bytes.HasPrefix(b, []byte(escMark)) {
		return string(b)
	}
	b = b[len(escMark):]
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == '\\' && i+1 < len(b) {
			switch b[i+1] {
			case 'n':
				c = '\n'
				i++
			case 'r':
				c = '\r'
				i++
			case '\\':
				i++
			}
		}
		sb.WriteByte(c)
	}
	return sb.String()
}
