package store

import (
	"encoding/json"

	"github.com/livesync-go/livesync-go/engine/docid"
)

// CheckedDoc is what CheckDoc read of a document.
type CheckedDoc struct {
	ID      string
	Rev     string // "" for a new document (a local edit without _rev)
	Deleted bool
	// Path is the revision and the ancestors its _revisions names, newest
	// first, at most MaxRevisions of them.
	Path []string
	// Chunk is set, with Data, when the document is a new chunk exactly as
	// the plug-in makes it: no _rev, not deleted, a chunk id and the body
	// {data, type:"leaf"}. Its first revision is then ChunkRev(ID, Data).
	Chunk bool
	Data  string
}

// CheckDoc checks a document as a Store does before writing it: a JSON
// object with a usable _id (not reserved, at most MaxIDLength bytes), a
// well-formed _rev (required when replicated, new_edits=false) and a
// _revisions that matches it. The error wraps ErrInvalid. A Store over a
// server uses it to refuse, per document, what the Stores Open builds
// refuse, before anything is sent.
func CheckDoc(raw json.RawMessage, replicated bool) (CheckedDoc, error) {
	d, err := parseDoc(raw)
	if err == nil {
		err = checkID(d.ID)
	}
	if err == nil && replicated && d.Rev == "" {
		err = invalid("new_edits=false needs _rev")
	}
	out := CheckedDoc{ID: d.ID, Rev: d.Rev, Deleted: d.Deleted, Path: d.Path}
	if err != nil {
		return out, err
	}
	if d.Rev == "" && !d.Deleted && docid.IsChunkID(d.ID) {
		out.Data, out.Chunk = chunkData(d.Body)
	}
	return out, nil
}

// CheckSelector parses a Mango selector as the Stores Open builds do: an
// error wraps engine.ErrUnsupported for what they do not evaluate, or
// engine.ErrMalformed for what is no selector. A Store that hands
// selectors to a server that supports more checks them with it first, so
// that every Store accepts the same selectors.
func CheckSelector(raw json.RawMessage) error {
	_, err := parseSelector(raw)
	return err
}
