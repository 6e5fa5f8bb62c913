package store

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/jsstring"
	"github.com/livesync-go/livesync-go/engine/rawjson"
)

// metaFields are the CouchDB fields the store derives itself; they are
// removed from stored bodies and regenerated on read.
var metaFields = []string{"_id", "_rev", "_revisions", "_deleted", "_conflicts",
	"_deleted_conflicts", "_local_seq", "_revs_info"}

// inDoc is a parsed input document.
type inDoc struct {
	ID      string
	Rev     string
	Deleted bool
	// Path is the revision and its known ancestors, newest first, from
	// _rev and _revisions.
	Path []string
	Body json.RawMessage // the object without the meta fields, keys sorted
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...)
}

// parseDoc reads a document to write. Its result is that of decoding raw
// into a map[string]json.RawMessage and json.Marshal'ing the map without
// the meta fields (Body: keys sorted, compact, with '<', '>', '&', U+2028
// and U+2029 escaped); parseDocFast gives it in one pass for the
// documents it is sure of.
func parseDoc(raw json.RawMessage) (inDoc, error) {
	if d, ok := parseDocFast(raw); ok {
		return d, nil
	}
	return parseDocJSON(raw)
}

// parseDocJSON is parseDoc by encoding/json.
func parseDocJSON(raw json.RawMessage) (inDoc, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return inDoc{}, invalid("not a JSON object")
	}
	var d inDoc
	if v, ok := m["_id"]; ok {
		if err := json.Unmarshal(v, &d.ID); err != nil {
			return d, invalid("_id is not a string")
		}
	}
	if v, ok := m["_rev"]; ok {
		if err := json.Unmarshal(v, &d.Rev); err != nil || !validRev(d.Rev) {
			return d, invalid("malformed _rev (\"N-hash\", at most %d bytes)", MaxRevLength)
		}
	}
	if v, ok := m["_deleted"]; ok {
		if err := json.Unmarshal(v, &d.Deleted); err != nil {
			return d, invalid("_deleted is not a boolean")
		}
	}
	if d.Rev != "" {
		d.Path = []string{d.Rev}
		if v, ok := m["_revisions"]; ok {
			var rv struct {
				Start int      `json:"start"`
				IDs   []string `json:"ids"`
			}
			if err := json.Unmarshal(v, &rv); err != nil {
				return d, invalid("malformed _revisions")
			}
			path, err := revPath(d.Rev, rv.Start, rv.IDs)
			if err != nil {
				return d, err
			}
			d.Path = path
		}
	}
	for _, f := range metaFields {
		delete(m, f)
	}
	body, err := json.Marshal(m)
	if err != nil {
		return d, invalid("%v", err)
	}
	d.Body = body
	return d, nil
}

// revPath returns the path of revision rev from its _revisions (start
// and ids): the full revisions, newest first.
func revPath(rev string, start int, ids []string) ([]string, error) {
	gen, h := revGen(rev)
	if len(ids) == 0 || start != gen || ids[0] != h || start < len(ids) {
		return nil, invalid("_revisions does not match _rev %q", rev)
	}
	// Ancestors past MaxRevisions are ignored (see MaxRevisions): the
	// work below, and merging, stay bounded whatever was sent.
	if len(ids) > MaxRevisions {
		ids = ids[:MaxRevisions]
	}
	path := make([]string, 0, len(ids))
	for i, id := range ids {
		r := strconv.Itoa(start-i) + "-" + id
		if id == "" || len(r) > MaxRevLength {
			return nil, invalid("_revisions holds an empty id or one over %d bytes", MaxRevLength)
		}
		path = append(path, r)
	}
	return path, nil
}

// checkID rejects ids CouchDB reserves (_design/ documents are allowed)
// and ids over MaxIDLength.
func checkID(id string) error {
	if id == "" {
		return invalid("missing _id")
	}
	if len(id) > MaxIDLength {
		return invalid("document id is %d bytes, over the limit of %d: use a shorter id", len(id), MaxIDLength)
	}
	if strings.HasPrefix(id, "_") && !strings.HasPrefix(id, "_design/") {
		return invalid("reserved id %q", id)
	}
	return nil
}

// newRevHash is the hash of a new edit (new_edits=true) of document id.
// The first revision of a chunk whose body is exactly {data, type:"leaf"}
// gets the plug-in's hash (chunkRevHash), so a chunk this store creates
// and the same chunk created by a LiveSync device are one revision, not
// two conflicting leaves. Any other first, non-deleted revision hashes
// its body (keys sorted); later and deleted revisions hash the parent
// revision, the deleted flag and the body.
//
// data, when not nil, is what chunkData reads of body, known to the
// caller.
func newRevHash(id, parent string, deleted bool, body []byte, data *string) string {
	if parent == "" && !deleted && docid.IsChunkID(id) {
		if data != nil {
			return chunkRevHash(id, *data)
		}
		if data, ok := chunkData(body); ok {
			return chunkRevHash(id, data)
		}
	}
	h := md5.New()
	if parent != "" || deleted {
		h.Write([]byte(parent))
		if deleted {
			h.Write([]byte("\x00deleted\x00"))
		} else {
			h.Write([]byte("\x00\x00"))
		}
	}
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// ChunkRev returns the first revision LiveSync gives the chunk document
// {_id: id, data, type: "leaf"}: "1-" + md5 hex of the UTF-8 bytes of
// JSON.stringify of that document, keys in that order. The plug-in
// writes a new chunk to its local PouchDB with new_edits=true, and
// PouchDB's deterministic revisions (pouchdb-utils rev) hash exactly
// that string; the chunk keeps the revision on its way to the remote,
// encrypted or not. data is the plaintext (the local form), never the
// "%=…" ciphertext. See engine/FORMAT.md §1.4.
//
// This is the hash of the plug-in's browser build (Obsidian desktop and
// mobile, spark-md5 over UTF-8). Its Node build hashes each UTF-16 code
// unit truncated to a byte instead, which gives the same revision for
// ASCII content only.
func ChunkRev(id, data string) string {
	return "1-" + chunkRevHash(id, data)
}

func chunkRevHash(id, data string) string {
	b := make([]byte, 0, len(id)+len(data)+40)
	b = append(b, `{"_id":`...)
	b = jsstring.AppendJSONString(b, id)
	b = append(b, `,"data":`...)
	b = jsstring.AppendJSONString(b, data)
	b = append(b, `,"type":"leaf"}`...)
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// chunkData returns the data of a body that is exactly the plug-in's
// local chunk, {"data": <string>, "type": "leaf"}. A body with any other
// field (such as the remote form's "e_") is not what the plug-in hashed.
// Its result is that of decoding body into a map; the body the store
// writes for a chunk, {"data":"…","type":"leaf"} as json.Marshal writes
// it, is read in one pass.
func chunkData(body []byte) (string, bool) {
	if data, ok := chunkDataFast(body); ok {
		return data, true
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || len(m) != 2 || string(m["type"]) != `"leaf"` {
		return "", false
	}
	var data string
	if raw, ok := m["data"]; !ok || json.Unmarshal(raw, &data) != nil {
		return "", false
	}
	return data, true
}

// chunkBody is the body the store writes for a chunk: json.Marshal of
// struct{Data string `json:"data"`; Type string `json:"type"`}{data, "leaf"}.
func chunkBody(data string) []byte {
	b := make([]byte, 0, len(data)+32)
	b = append(b, `{"data":`...)
	b = rawjson.AppendString(b, data)
	return append(b, `,"type":"leaf"}`...)
}

// chunkField reads a stored chunk's data as json.Unmarshal into
// struct{Data *string `json:"data"`} does; false when it has none (or
// it is null) or the body does not decode.
func chunkField(body []byte) (string, bool) {
	if data, ok := chunkDataFast(body); ok {
		return data, true
	}
	var v struct {
		Data *string `json:"data"`
	}
	if json.Unmarshal(body, &v) != nil || v.Data == nil {
		return "", false
	}
	return *v.Data, true
}

// chunkDataFast reads a body of exactly the form chunkBody writes,
// {"data":"…","type":"leaf"}; false for any other.
func chunkDataFast(body []byte) (string, bool) {
	const head, tail = `{"data":`, `,"type":"leaf"}`
	if len(body) <= len(head)+len(tail) || string(body[:len(head)]) != head || string(body[len(body)-len(tail):]) != tail {
		return "", false
	}
	v := body[len(head) : len(body)-len(tail)]
	if end, valid, _ := rawjson.Scan(v, 0); !valid || end != len(v) || v[0] != '"' {
		return "", false
	}
	return rawjson.Unquote(v)
}

func appendJSONString(b []byte, s string) []byte {
	return rawjson.AppendString(b, s)
}

// buildDoc assembles a document for output: meta fields first, then the
// body's fields.
func buildDoc(id, rev string, deleted bool, body []byte, revs []string, revStart int, conflicts []string) json.RawMessage {
	b := make([]byte, 0, len(body)+len(id)+64+len(revs)*36)
	b = append(b, `{"_id":`...)
	b = appendJSONString(b, id)
	b = append(b, `,"_rev":`...)
	b = appendJSONString(b, rev)
	if deleted {
		b = append(b, `,"_deleted":true`...)
	}
	if revs != nil {
		b = append(b, `,"_revisions":{"start":`...)
		b = strconv.AppendInt(b, int64(revStart), 10)
		b = append(b, `,"ids":[`...)
		for i, r := range revs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, r)
		}
		b = append(b, "]}"...)
	}
	if len(conflicts) > 0 {
		b = append(b, `,"_conflicts":[`...)
		for i, r := range conflicts {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, r)
		}
		b = append(b, ']')
	}
	body = bytes.TrimSpace(body)
	if len(body) > 2 {
		b = append(b, ',')
		b = append(b, body[1:]...)
	} else {
		b = append(b, '}')
	}
	return b
}

// WithoutRevisions returns doc without its _revisions field; doc itself
// when it has none or is not a JSON object. The result is that of
// json.Marshal of the document's map[string]json.RawMessage (keys sorted,
// values compacted and escaped as Marshal does), which the fast path
// writes directly when it can be sure of it.
func WithoutRevisions(doc json.RawMessage) json.RawMessage {
	var buf [16]member
	if ms, ok := objectMembers(doc, buf[:0]); ok && sortMembers(ms) {
		for i, m := range ms {
			if string(m.key) == "_revisions" {
				ms = append(ms[:i], ms[i+1:]...)
				return appendObject(make([]byte, 0, len(doc)), ms)
			}
		}
		return doc
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(doc, &m) != nil {
		return doc
	}
	if _, ok := m["_revisions"]; !ok {
		return doc
	}
	delete(m, "_revisions")
	out, err := json.Marshal(m)
	if err != nil {
		return doc
	}
	return out
}
