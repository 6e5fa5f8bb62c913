package couchapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
	"unicode/utf8"
)

// readBody reads the whole request body. The server wraps every body in
// an http.MaxBytesReader, so an oversized one (chunked included) ends in
// errTooLarge before anything is decoded or stored.
func readBody(r *http.Request) ([]byte, *apiError) {
	if r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errTooLarge
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, errBodyTimeout
		}
		return nil, badRequest("The request body could not be read.")
	}
	return b, nil
}

// errBodyTimeout answers a body that did not arrive within the body
// timeout (Config.BodyTimeout); the connection closes after it.
var errBodyTimeout = errorf(http.StatusRequestTimeout, "request_timeout", "The request body did not arrive in time.")

// maxJSONDepth is how deeply JSON may nest: encoding/json's own limit.
const maxJSONDepth = 10000

// errTooDeep answers JSON nested deeper than maxJSONDepth.
var errTooDeep = badRequest("The JSON is nested more than 10000 levels deep.")

// invalidJSON is the answer to b, which does not decode: CouchDB's
// "invalid UTF-8 JSON", or errTooDeep when that is why.
func invalidJSON(b []byte) *apiError {
	if jsonDeeper(b, maxJSONDepth) {
		return errTooDeep
	}
	return errInvalidJSON
}

// jsonDeeper reports whether the arrays and objects of b (JSON, perhaps
// invalid) nest more than limit levels deep. Brackets inside strings do
// not count.
func jsonDeeper(b []byte, limit int) bool {
	depth := 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > limit {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}

// parseObject decodes a JSON object whose values stay raw.
func parseObject(b []byte) (map[string]json.RawMessage, *apiError) {
	b = bytes.TrimSpace(b)
	if !utf8.Valid(b) {
		return nil, errInvalidJSON
	}
	if len(b) == 0 || b[0] != '{' {
		if len(b) > 0 && !json.Valid(b) {
			return nil, invalidJSON(b)
		}
		return nil, errNotObject
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, invalidJSON(b)
	}
	return m, nil
}

// readObject reads and decodes a request body that must be a JSON object.
func readObject(r *http.Request) (map[string]json.RawMessage, *apiError) {
	b, ae := readBody(r)
	if ae != nil {
		return nil, ae
	}
	return parseObject(b)
}

// isNull reports whether raw is absent or the JSON null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// jsonBool decodes an optional boolean field.
func jsonBool(raw json.RawMessage, def bool, name string) (bool, *apiError) {
	if isNull(raw) {
		return def, nil
	}
	var v bool
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, badRequest("`" + name + "` must be a boolean.")
	}
	return v, nil
}

// writeJSON answers v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"error":"internal_server_error","reason":"The answer could not be encoded."}`)
		status = http.StatusInternalServerError
	}
	writeRawJSON(w, status, b)
}

// writeRawJSON answers b, which is valid JSON.
func writeRawJSON(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(b)
	_, _ = w.Write([]byte{'\n'})
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(e.retryAfter/time.Second), 10))
	}
	writeJSON(w, e.status, map[string]string{"error": e.name, "reason": e.reason})
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// docHead returns a document's _id, _rev and _deleted. Documents from a
// store begin with _id, _rev and (when set) _deleted, so it usually reads
// only the first bytes; any other layout falls back to decoding the whole
// object.
func docHead(doc []byte) (id, rev string, deleted bool, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if t, err := dec.Token(); err == nil && t == json.Delim('{') {
		fast := true
		for n := 0; n < 2 && fast; n++ {
			t, err := dec.Token()
			switch {
			case err != nil:
				fast = false
			case t == "_id":
				fast = dec.Decode(&id) == nil
			case t == "_rev":
				fast = dec.Decode(&rev) == nil
			default:
				fast = false
			}
		}
		if fast && id != "" && rev != "" {
			if !dec.More() {
				return id, rev, false, true
			}
			t, err := dec.Token()
			if err == nil && t != "_deleted" {
				return id, rev, false, true
			}
			if err == nil && dec.Decode(&deleted) == nil {
				return id, rev, deleted, true
			}
		}
	}
	var h struct {
		ID      string `json:"_id"`
		Rev     string `json:"_rev"`
		Deleted bool   `json:"_deleted"`
	}
	if err := json.Unmarshal(doc, &h); err != nil {
		return "", "", false, false
	}
	return h.ID, h.Rev, h.Deleted, true
}
