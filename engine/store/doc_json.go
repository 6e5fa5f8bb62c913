package store

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
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

func parseDoc(raw json.RawMessage) (inDoc, error) {
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
			return d, invalid("malformed _rev")
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
			gen, h := revGen(d.Rev)
			if len(rv.IDs) == 0 || rv.Start != gen || rv.IDs[0] != h || rv.Start < len(rv.IDs) {
				return d, invalid("_revisions does not match _rev %q", d.Rev)
			}
			d.Path = d.Path[:0]
			for i, id := range rv.IDs {
				if id == "" {
					return d, invalid("empty id in _revisions")
				}
				d.Path = append(d.Path, strconv.Itoa(rv.Start-i)+"-"+id)
			}
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

// checkID rejects ids CouchDB reserves; _design/ documents are allowed.
func checkID(id string) error {
	if id == "" {
		return invalid("missing _id")
	}
	if strings.HasPrefix(id, "_") && !strings.HasPrefix(id, "_design/") {
		return invalid("reserved id %q", id)
	}
	return nil
}

// newRevHash is the hash of a new edit: md5 of the body for a first,
// non-deleted revision (so a chunk's revision is "1-" + md5 of its
// content), else md5 of the parent revision, the deleted flag and the body.
func newRevHash(parent string, deleted bool, body []byte) string {
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

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
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
