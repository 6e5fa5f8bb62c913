package replicate

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/rawjson"
)

// Documents travel through a replication as the JSON their source sent:
// the endpoints check it (a CouchDB answer once as a whole, the store what
// it writes). Here they are only walked for their top-level members
// (engine/rawjson), never decoded whole, and a document the transform
// changes is assembled from its members' JSON as they are.

// parseDoc is livesync.ParseDoc for a document from an endpoint: its
// members' values are slices of raw, not copies. It refuses what
// ParseDoc refuses (not an object, no string _id) with the same errors.
func parseDoc(raw []byte) (livesync.Doc, error) {
	d := make(livesync.Doc, 8)
	if !rawjson.Members(raw, func(k, v []byte) bool {
		d[string(k)] = v[:len(v):len(v)]
		return true
	}) {
		return nil, fmt.Errorf("livesync: document is not a JSON object: %w", engine.ErrMalformed)
	}
	if id, ok := rawjson.String(d["_id"]); !ok || id == "" {
		return nil, fmt.Errorf("livesync: document without a string _id: %w", engine.ErrMalformed)
	}
	return d, nil
}

// encodeDoc encodes a document as livesync.Doc.MarshalJSON does (keys
// sorted), writing every value as it is held: they are JSON already (the
// source's, or the codec's), so they are not checked and compacted
// again.
func encodeDoc(d livesync.Doc) []byte {
	keys := make([]string, 0, len(d))
	n := 2
	for k, v := range d {
		keys = append(keys, k)
		n += len(k) + len(v) + 4
	}
	slices.Sort(keys)
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendKey(b, k)
		b = append(b, ':')
		if v := d[k]; len(v) > 0 {
			b = append(b, v...)
		} else {
			b = append(b, "null"...)
		}
	}
	return append(b, '}')
}

// appendKey appends k as a JSON string (as encoding/json writes it).
func appendKey(b []byte, k string) []byte {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(k)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, k...)
	return append(b, '"')
}

// docHead is what the pull hooks read of a document: its id and
// revision, whether it is deleted (_deleted or LiveSync's deleted), its
// type, whether it has a data member, and whether all its members are
// CouchDB's own (_…).
type docHead struct {
	id, rev, typ      string
	deleted, softDel  bool
	hasData, metaOnly bool
}

// readHead walks the top-level members of raw. It reports false where
// livesync.ParseDoc fails.
func readHead(raw []byte) (docHead, bool) {
	h := docHead{metaOnly: true}
	var rawID, rawRev, rawType []byte
	if !rawjson.Members(raw, func(k, v []byte) bool {
		switch string(k) {
		case "_id":
			rawID = v
		case "_rev":
			rawRev = v
		case "_deleted":
			h.deleted = string(v) == "true"
		case "deleted":
			h.softDel = string(v) == "true"
		case "type":
			rawType = v
		case "data":
			h.hasData = true
		}
		if len(k) == 0 || k[0] != '_' {
			h.metaOnly = false
		}
		return true
	}) {
		return docHead{}, false
	}
	var ok bool
	if h.id, ok = rawjson.String(rawID); !ok || h.id == "" {
		return docHead{}, false
	}
	h.rev, _ = rawjson.String(rawRev)
	h.typ, _ = rawjson.String(rawType)
	return h, true
}

// isDeleted is livesync.Doc.Deleted.
func (h docHead) isDeleted() bool { return h.deleted || h.softDel }

// isFileDoc is livesync.Doc.IsFileDoc.
func (h docHead) isFileDoc() bool {
	if docid.IsChunkID(h.id) || docid.IsSystemID(h.id) {
		return false
	}
	switch h.typ {
	case livesync.TypePlain, livesync.TypeNewNote, livesync.TypeNotes:
		return true
	case "":
		return h.hasData // a legacy note may lack a type
	}
	return false
}

// isBodylessTombstone reports a _deleted document of a file id without
// body fields (a foreign writer's deletion).
func (h docHead) isBodylessTombstone() bool {
	return h.isDeleted() && !docid.IsSystemID(h.id) && h.metaOnly
}
