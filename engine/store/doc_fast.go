package store

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/livesync-go/livesync-go/engine/rawjson"
)

// The fast paths of this file give, for the documents they accept, the
// exact results of the encoding/json code they stand in for (parseDoc's
// decode into a map and json.Marshal of it, WithoutRevisions): one
// validating pass over a document and one copy of its body instead of
// several decodes. Whatever they cannot be sure of (an escape or a
// character Marshal escapes in a key, a repeated key, invalid UTF-8, a
// value nested deeper than rawjson.MaxDepth, a field encoding/json would
// reject) sends the document to the encoding/json path, which gives the
// result or the error it always gave.

// member is one member of a JSON object read by objectMembers.
type member struct {
	key, val []byte
	canon    bool // val is as json.Marshal writes a json.RawMessage
}

// objectMembers appends the members of the JSON object raw to ms, in
// order. It reports false when raw is not provably an object encoding/json
// reads to the same map: not one valid object (surrounding whitespace
// aside), or a key that is not written as Marshal writes it.
func objectMembers(raw []byte, ms []member) ([]member, bool) {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	i = skipWS(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return ms, skipWS(raw, i+1) == len(raw)
	}
	for {
		kend, ok := plainKey(raw, i)
		if !ok {
			return nil, false
		}
		key := raw[i+1 : kend-1]
		i = skipWS(raw, kend)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		i = skipWS(raw, i+1)
		vend, valid, canon := rawjson.Scan(raw, i)
		if !valid {
			return nil, false
		}
		ms = append(ms, member{key: key, val: raw[i:vend], canon: canon})
		i = skipWS(raw, vend)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipWS(raw, i+1)
		case '}':
			return ms, skipWS(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// plainKey returns the index after the key starting at b[i] when it is a
// string that decodes to its own bytes and that json.Marshal writes back
// as they are: no escape, no control character, '<', '>' or '&', valid
// UTF-8 without U+2028 or U+2029.
func plainKey(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	for j := i + 1; j < len(b); {
		c := b[j]
		switch {
		case c == '"':
			return j + 1, true
		case c == '\\' || c < 0x20 || c == '<' || c == '>' || c == '&':
			return 0, false
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				return 0, false
			}
			j += size
		}
	}
	return 0, false
}

// sortMembers sorts ms by key, as json.Marshal orders a map's keys, and
// reports false when a key repeats (encoding/json would keep the last
// value; the fast paths leave that to it).
func sortMembers(ms []member) bool {
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0; j-- {
			c := bytes.Compare(ms[j-1].key, ms[j].key)
			if c == 0 {
				return false
			}
			if c < 0 {
				break
			}
			ms[j-1], ms[j] = ms[j], ms[j-1]
		}
	}
	return true
}

// appendObject appends the object of the sorted members ms as json.Marshal
// writes a map[string]json.RawMessage holding them.
func appendObject(b []byte, ms []member) []byte {
	b = append(b, '{')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, m.key...)
		b = append(b, '"', ':')
		if m.canon {
			b = append(b, m.val...)
		} else {
			b = rawjson.AppendCanonical(b, m.val)
		}
	}
	return append(b, '}')
}

// metaIndex returns the index of key in metaFields, or -1.
func metaIndex(key []byte) int {
	if len(key) == 0 || key[0] != '_' {
		return -1
	}
	switch string(key) {
	case "_id":
		return 0
	case "_rev":
		return 1
	case "_revisions":
		return 2
	case "_deleted":
		return 3
	case "_conflicts":
		return 4
	case "_deleted_conflicts":
		return 5
	case "_local_seq":
		return 6
	case "_revs_info":
		return 7
	}
	return -1
}

// parseDocFast is parseDoc for the documents it can be sure of; ok false
// sends the document to the encoding/json path, errors included.
func parseDocFast(raw []byte) (d inDoc, ok bool) {
	var buf [16]member
	ms, ok := objectMembers(raw, buf[:0])
	if !ok {
		return d, false
	}
	var meta [8][]byte // by metaIndex
	body := ms[:0]
	for _, m := range ms {
		k := metaIndex(m.key)
		if k < 0 {
			body = append(body, m)
			continue
		}
		if meta[k] != nil {
			return d, false
		}
		meta[k] = m.val
	}
	if !sortMembers(body) {
		return d, false
	}
	if d.ID, ok = fastString(meta[0]); !ok {
		return d, false
	}
	if d.Rev, ok = fastString(meta[1]); !ok || meta[1] != nil && !validRev(d.Rev) {
		return d, false
	}
	switch string(meta[3]) {
	case "", "null", "false":
	case "true":
		d.Deleted = true
	default:
		return d, false
	}
	if d.Rev != "" {
		d.Path = []string{d.Rev}
		if meta[2] != nil {
			start, ids, ok := fastRevisions(meta[2])
			if !ok {
				return d, false
			}
			var err error
			if d.Path, err = revPath(d.Rev, start, ids); err != nil {
				return d, false
			}
		}
	}
	d.Body = appendObject(make([]byte, 0, len(raw)), body)
	return d, true
}

// fastString decodes a field json.Unmarshal would decode into a string:
// absent or null leaves it "", as Unmarshal does. ok is false where
// Unmarshal fails.
func fastString(v []byte) (string, bool) {
	if v == nil || string(v) == "null" {
		return "", true
	}
	return rawjson.Unquote(v)
}

// fastRevisions decodes a valid _revisions value as parseDoc's
// json.Unmarshal does: from the usual {"start": N, "ids": [...]} directly,
// from anything else with json.Unmarshal. ok is false where Unmarshal
// fails.
func fastRevisions(v []byte) (start int, ids []string, ok bool) {
	var haveStart, haveIDs bool
	fine := rawjson.Members(v, func(key, val []byte) bool {
		switch {
		case string(key) == "start" && !haveStart:
			haveStart = true
			start, ok = smallInt(val)
		case string(key) == "ids" && !haveIDs:
			haveIDs = true
			strs := true
			ids = []string{}
			ok = rawjson.Elements(val, func(e []byte) bool {
				s, isStr := rawjson.Unquote(e)
				ids = append(ids, s)
				strs = strs && isStr
				return isStr
			}) && strs
		default:
			ok = false
		}
		return ok
	})
	if fine && ok {
		return start, ids, true
	}
	var rv struct {
		Start int      `json:"start"`
		IDs   []string `json:"ids"`
	}
	if json.Unmarshal(v, &rv) != nil {
		return 0, nil, false
	}
	return rv.Start, rv.IDs, true
}

// smallInt decodes an integer of at most 18 digits (no fraction or
// exponent), which json.Unmarshal decodes into an int the same way.
func smallInt(v []byte) (int, bool) {
	digits := v
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(string(v))
	return n, err == nil
}
