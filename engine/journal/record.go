package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/livesync-go/livesync-go/engine"
)

// Record is one entry of a journal pack: either a chunk or a document.
//
// A chunk record has Doc == nil; ID is the chunk id (written by upstream
// always with the "h:" prefix) and ChunkData is the chunk's local
// plaintext data (text, or base64 for binary chunks), never encrypted.
//
// A document record has Doc != nil; Doc is the document's JSON object as
// written in the pack (for upstream: JSON.stringify of the local
// document, with _rev and _revisions), ID equals its "_id" member and
// ChunkData is empty. Records returned by the decoders have Doc pointing
// into the payload they were decoded from.
type Record struct {
	ID        string
	ChunkData string
	Doc       json.RawMessage
}

// IsChunk reports whether r is a chunk record (Doc == nil).
func (r Record) IsChunk() bool { return r.Doc == nil }

// Key returns the identity upstream uses to avoid sending a received
// record back (knownIDs and sentIDs in commonlib
// src/replication/journal/JournalSyncCore.ts getDocKey): the id for a
// chunk, and id + "-" + _rev for a document. As in JavaScript string
// interpolation, a document without a _rev yields id + "-undefined"; a
// non-string _rev contributes its JSON text.
func (r Record) Key() string {
	if r.IsChunk() {
		return r.ID
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.Doc, &m); err != nil {
		return r.ID + "-undefined"
	}
	raw, ok := m["_rev"]
	if !ok {
		return r.ID + "-undefined"
	}
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return r.ID + "-" + s
	}
	return r.ID + "-" + string(raw)
}

const (
	recordSep     = '\n'   // RECORD_SPLIT in JournalSyncCore.ts
	unitSep       = '\x1f' // UNIT_SPLIT (U+001F) in JournalSyncCore.ts
	chunkMark     = '~'
	chunkIDPrefix = "h:"
	escMark       = `\f` // backslash + "f", the escaped-data marker of utils.ts
)

// AppendRecord appends the pack encoding of r, including its terminating
// line feed, to dst and returns the extended slice. It follows commonlib
// serializeDoc (src/replication/journal/JournalSyncCore.ts):
//
//   - a chunk becomes "~" + ID + U+001F + esc(ChunkData) + "\n", where esc
//     is escapeNewLineFromString (src/common/utils.ts): data containing
//     "\n" or "\r" is written as `\f` followed by the data with `\` → `\\`,
//     LF → `\n`, CR → `\r`; other data is written as is — except data
//     starting with `\f`, which is also escaped (see the package
//     documentation);
//   - a document becomes its JSON with insignificant white space removed
//     (JSON.stringify output is already compact and is kept byte for byte)
//   - "\n".
//
// AppendRecord refuses, with an error wrapping engine.ErrMalformed and dst
// unchanged, records that a reader could not read back as written: a
// chunk id that is empty, lacks the "h:" prefix or contains a line feed or
// U+001F; invalid UTF-8; a document that is not a JSON object with a
// string "_id" equal to ID, whose ID has the chunk prefix "h:" (upstream
// would write it as a chunk), or that also sets ChunkData.
func AppendRecord(dst []byte, r Record) ([]byte, error) {
	if r.IsChunk() {
		return appendChunk(dst, r)
	}
	return appendDoc(dst, r)
}

func appendChunk(dst []byte, r Record) ([]byte, error) {
	switch {
	case !strings.HasPrefix(r.ID, chunkIDPrefix):
		return dst, encodeErr("chunk id lacks the \"h:\" prefix")
	case strings.IndexByte(r.ID, recordSep) >= 0 || strings.IndexByte(r.ID, unitSep) >= 0:
		return dst, encodeErr("chunk id contains a line feed or U+001F")
	case !utf8.ValidString(r.ID):
		return dst, encodeErr("chunk id is not valid UTF-8")
	case !utf8.ValidString(r.ChunkData):
		return dst, encodeErr("chunk data is not valid UTF-8")
	}
	dst = append(dst, chunkMark)
	dst = append(dst, r.ID...)
	dst = append(dst, unitSep)
	dst = appendEscaped(dst, r.ChunkData)
	return append(dst, recordSep), nil
}

// appendEscaped mirrors escapeNewLineFromString (commonlib
// src/common/utils.ts), additionally escaping data that starts with the
// marker itself so that it survives unescapeNewLineFromString.
func appendEscaped(dst []byte, s string) []byte {
	if strings.IndexAny(s, "\n\r") < 0 && !strings.HasPrefix(s, escMark) {
		return append(dst, s...)
	}
	dst = append(dst, escMark...)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\\':
			dst = append(dst, '\\', '\\')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

func appendDoc(dst []byte, r Record) ([]byte, error) {
	if r.ChunkData != "" {
		return dst, encodeErr("document record also has chunk data")
	}
	if strings.HasPrefix(r.ID, chunkIDPrefix) {
		return dst, encodeErr("document record has a chunk id")
	}
	if !utf8.Valid(r.Doc) {
		return dst, encodeErr("document is not valid UTF-8")
	}
	id, err := docID(r.Doc)
	if err != nil {
		return dst, encodeErr(err.Error())
	}
	if id != r.ID {
		return dst, encodeErr("document _id differs from the record id")
	}
	n := len(dst)
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, r.Doc); err != nil {
		return dst[:n], encodeErr("document is not valid JSON")
	}
	return append(buf.Bytes(), recordSep), nil
}

// EncodePack returns the plain (uncompressed, unencrypted) payload of a
// pack holding records in order: the concatenation of AppendRecord for
// each. An empty slice gives an empty payload. On a rejected record it
// returns an *engine.Error with Stage engine.StageEncode, the record's id
// as DocID and an error wrapping engine.ErrMalformed naming the index.
func EncodePack(records []Record) ([]byte, error) {
	size := 0
	for i := range records {
		size += len(records[i].ID) + len(records[i].ChunkData) + len(records[i].Doc) + 8
	}
	out := make([]byte, 0, size)
	for i, r := range records {
		var err error
		out, err = AppendRecord(out, r)
		if err != nil {
			return nil, &engine.Error{Op: "encode pack", DocID: r.ID, Stage: engine.StageEncode,
				Err: fmt.Errorf("record %d: %w", i, err)}
		}
	}
	return out, nil
}

func encodeErr(reason string) error {
	return fmt.Errorf("journal: encode: %s: %w", reason, engine.ErrMalformed)
}

var (
	errNotObject = errors.New("not a JSON object")
	errNoID      = errors.New("document without a non-empty string _id")
)

// docID returns the "_id" member of a JSON object. Member names are
// matched exactly and the last duplicate wins, as with JSON.parse.
func docID(doc []byte) (string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return "", errNotObject
		}
		return "", errors.New("invalid JSON")
	}
	if m == nil {
		return "", errNotObject
	}
	raw, ok := m["_id"]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", errNoID
	}
	var id string
	if err := json.Unmarshal(raw, &id); err != nil || id == "" {
		return "", errNoID
	}
	return id, nil
}
