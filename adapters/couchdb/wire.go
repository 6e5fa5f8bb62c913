package couchdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/rawjson"
)

// The replication requests that carry documents (_changes, _bulk_get,
// _bulk_docs) are read and written as raw JSON: an answer is read whole,
// checked to be JSON once, and then only walked (engine/rawjson) for the
// members the client reads, so that a pulled document is handed on as a
// slice of the answer without being decoded or copied; a request body is
// assembled from the documents as they are. Answers of the wrong shape
// are protocol errors wrapping engine.ErrMalformed, as when they were
// decoded into structs.

// rawBody is a request body sent as it is (DB.do does not encode it).
type rawBody []byte

// encodeBody returns the bytes of a request body.
func encodeBody(body any) ([]byte, error) {
	if b, ok := body.(rawBody); ok {
		return b, nil
	}
	return json.Marshal(body)
}

// rawAnswer receives a whole answer (DB.do reads it instead of decoding
// it): B holds one JSON value, checked.
type rawAnswer struct{ B []byte }

// read reads resp's body into a. Its errors are those of decoding the
// answer: a body cut short is a transport failure (retryable), anything
// that is not JSON a protocol error. As with a decoder, text after a
// complete JSON value is ignored.
func (a *rawAnswer) read(ctx context.Context, op, docID string, resp *http.Response) error {
	var buf bytes.Buffer
	if n := resp.ContentLength; n > 0 && n < 1<<30 {
		buf.Grow(int(n) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return answerErr(ctx, op, docID, err)
	}
	// A value as a member's would be, without white space around it.
	b := bytes.TrimSpace(buf.Bytes())
	// rawjson.Scan checks it, about three times as fast as json.Valid;
	// what it cannot vouch for (invalid UTF-8 in a string, deep nesting,
	// text after the value) goes to encoding/json.
	if end, valid, _ := rawjson.Scan(b, 0); !valid || end != len(b) {
		if !json.Valid(b) {
			// Let a decoder judge it, for the same verdict as before (an
			// answer cut short mid-value is io.ErrUnexpectedEOF).
			var v json.RawMessage
			if err := json.NewDecoder(bytes.NewReader(b)).Decode(&v); err != nil {
				return answerErr(ctx, op, docID, err)
			}
			b = v
		}
	}
	a.B = b
	return nil
}

// answerErr classifies an error reading or decoding an answer.
func answerErr(ctx context.Context, op, docID string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &engine.Error{Op: op, DocID: docID, Stage: engine.StageTransport, Err: redact(err)}
	}
	return &engine.Error{Op: op, DocID: docID, Stage: engine.StageProtocol,
		Err: fmt.Errorf("couchdb: bad JSON answer: %v: %w", err, engine.ErrMalformed)}
}

// shapeErr is the error of a JSON answer whose shape is not the
// protocol's (a member of the wrong type).
func shapeErr(op, docID, what string) error {
	return &engine.Error{Op: op, DocID: docID, Stage: engine.StageProtocol,
		Err: fmt.Errorf("couchdb: bad JSON answer: %s: %w", what, engine.ErrMalformed)}
}

// isNull reports a JSON null.
func isNull(raw []byte) bool { return string(raw) == "null" }

// fieldIs reports whether a member's key names field, as encoding/json
// matches a struct field: exactly or case-insensitively.
func fieldIs(key []byte, field string) bool {
	return string(key) == field || strings.EqualFold(string(key), field)
}

// optString reads a member that must be a string or null ("" for null).
func optString(raw []byte) (string, bool) {
	if isNull(raw) {
		return "", true
	}
	return rawjson.String(raw)
}

// object walks the object raw with fn, which returns false to reject a
// member; null is an empty object. It reports false for any other value
// or a rejected member.
func object(raw []byte, fn func(key, val []byte) bool) bool {
	if isNull(raw) {
		return true
	}
	ok := true
	walked := rawjson.Members(raw, func(k, v []byte) bool {
		ok = fn(k, v)
		return ok
	})
	return walked && ok
}

// array walks the array raw with fn, which returns false to reject an
// element; null is an empty array.
func array(raw []byte, fn func(val []byte) bool) bool {
	if isNull(raw) {
		return true
	}
	ok := true
	walked := rawjson.Elements(raw, func(v []byte) bool {
		ok = fn(v)
		return ok
	})
	return walked && ok
}

// parseChanges reads a _changes answer: its rows, last_seq and pending
// (-1 when absent).
func parseChanges(b []byte) (engine.ChangesPage, error) {
	page := engine.ChangesPage{Pending: -1}
	ok := object(b, func(k, v []byte) bool {
		switch {
		case fieldIs(k, "results"):
			page.Results = page.Results[:0]
			return array(v, func(row []byte) bool {
				c, ok := parseChange(row)
				page.Results = append(page.Results, c)
				return ok
			})
		case fieldIs(k, "last_seq"):
			page.LastSeq = seqString(v)
		case fieldIs(k, "pending"):
			if isNull(v) {
				page.Pending = -1
				return true
			}
			n, err := strconv.Atoi(string(v))
			page.Pending = n
			return err == nil
		}
		return true
	})
	if !ok {
		return engine.ChangesPage{}, shapeErr("changes", "", "not a changes feed")
	}
	return page, nil
}

// parseChange reads one row of the changes feed (null is an empty row).
func parseChange(row []byte) (engine.Change, bool) {
	var c engine.Change
	ok := object(row, func(k, v []byte) bool {
		switch {
		case fieldIs(k, "seq"):
			c.Seq = seqString(v)
		case fieldIs(k, "id"):
			if isNull(v) {
				return true // null leaves a field as it is, as in encoding/json
			}
			var ok bool
			c.ID, ok = rawjson.String(v)
			return ok
		case fieldIs(k, "deleted"):
			switch string(v) {
			case "true":
				c.Deleted = true
			case "false":
				c.Deleted = false
			case "null":
			default:
				return false
			}
		case fieldIs(k, "changes"):
			c.Revs = c.Revs[:0]
			return array(v, func(ch []byte) bool {
				rev := ""
				ok := object(ch, func(k, v []byte) bool {
					if fieldIs(k, "rev") {
						var ok bool
						rev, ok = optString(v)
						return ok
					}
					return true
				})
				c.Revs = append(c.Revs, rev)
				return ok
			})
		}
		return true
	})
	if len(c.Revs) == 0 {
		c.Revs = nil
	}
	return c, ok
}

// bulkGetResult is one document of a _bulk_get answer: the id of its
// row, the document ({"ok": …}) and its _id and _rev.
type bulkGetResult struct {
	rowID   string
	doc     []byte
	id, rev string
}

// parseBulkGet reads a _bulk_get answer in one pass (cursor): the found
// documents, each a slice of b, with their _id and _rev. Missing
// revisions ({"error": …}, {} or "ok": null) are left out. A document
// that is not a JSON object, or whose _id or _rev is not a string, is an
// error naming its row.
func parseBulkGet(b []byte) ([]bulkGetResult, error) {
	c := &cursor{b: b}
	var out []bulkGetResult
	var bad error
	ok := c.object(func(k []byte) bool {
		if !fieldIs(k, "results") {
			return c.skip() != nil
		}
		out = out[:0]
		return c.array(func() bool {
			id, docs, badDoc, ok := bulkGetRow(c)
			for i := range docs {
				docs[i].rowID = id
			}
			if badDoc && bad == nil {
				bad = &engine.Error{Op: "bulk get", DocID: id, Stage: engine.StageProtocol,
					Err: fmt.Errorf("couchdb: document is not a JSON object: %w", engine.ErrMalformed)}
			}
			out = append(out, docs...)
			return ok
		})
	})
	if !ok {
		return nil, shapeErr("bulk get", "", "not a bulk get answer")
	}
	if bad != nil {
		return nil, bad
	}
	return out, nil
}

// bulkGetRow reads one row {"id": …, "docs": [{"ok": doc}, …]} of a
// _bulk_get answer (null is an empty row): its id, its found documents,
// and whether one of them is not an object with string _id and _rev.
func bulkGetRow(c *cursor) (id string, docs []bulkGetResult, badDoc, ok bool) {
	ok = c.object(func(k []byte) bool {
		switch {
		case fieldIs(k, "id"):
			if c.null() {
				return true // null leaves a field as it is, as in encoding/json
			}
			var ok bool
			id, ok = rawjson.String(c.str())
			return ok
		case fieldIs(k, "docs"):
			docs = docs[:0]
			return c.array(func() bool {
				var d bulkGetResult
				found := c.object(func(k []byte) bool {
					if !fieldIs(k, "ok") {
						return c.skip() != nil
					}
					d = bulkGetResult{}
					if c.null() {
						return true
					}
					var fine bool
					d, fine = bulkGetDoc(c)
					badDoc = badDoc || !fine
					return !c.bad
				})
				if d.doc != nil {
					docs = append(docs, d)
				}
				return found
			})
		}
		return c.skip() != nil
	})
	return id, docs, badDoc, ok
}

// bulkGetDoc consumes a document and reads its _id and _rev; fine is
// false if it is not an object or either is not a string (or null).
func bulkGetDoc(c *cursor) (d bulkGetResult, fine bool) {
	if c.peek() != '{' {
		d.doc = c.skip()
		return d, false
	}
	start := c.i
	fine = true
	c.object(func(k []byte) bool {
		var dst *string
		switch {
		case fieldIs(k, "_id"):
			dst = &d.id
		case fieldIs(k, "_rev"):
			dst = &d.rev
		default:
			return c.skip() != nil
		}
		raw := c.skip()
		s, ok := optString(raw)
		*dst, fine = s, fine && ok
		return raw != nil
	})
	if !c.bad {
		d.doc = c.b[start:c.i:c.i]
	}
	return d, fine
}

// bulkDocsBody assembles {"docs":[…],"new_edits":false} from the
// documents as they are, each checked to be JSON.
func bulkDocsBody(docs []json.RawMessage) (rawBody, error) {
	n := len(`{"docs":[],"new_edits":false}`) + len(docs)
	for _, d := range docs {
		n += len(d)
	}
	b := make([]byte, 0, n)
	b = append(b, `{"docs":[`...)
	for i, d := range docs {
		if !isJSON(d) {
			return nil, &engine.Error{Op: "bulk docs", DocID: headID(d), Stage: engine.StageEncode,
				Err: fmt.Errorf("couchdb: document %d of %d is not valid JSON: %w", i+1, len(docs), engine.ErrMalformed)}
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, d...)
	}
	b = append(b, `],"new_edits":false}`...)
	return b, nil
}

// isJSON reports whether d is one JSON value: rawjson.Scan decides, and
// encoding/json what Scan cannot vouch for.
func isJSON(d []byte) bool {
	if end, valid, _ := rawjson.Scan(d, 0); valid && end == len(d) {
		return true
	}
	return json.Valid(d)
}

// headID is the _id of a document that failed a check, if it can be
// read.
func headID(doc []byte) string {
	var h struct {
		ID string `json:"_id"`
	}
	_ = json.Unmarshal(doc, &h)
	return h.ID
}
