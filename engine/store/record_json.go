package store

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/livesync-go/livesync-go/engine/rawjson"
)

// A record is stored as json.Marshal writes it:
//
//	{"s":SEQ,"n":[{"r":REV,"p":PARENT,"d":true,"b":BODY,"k":true},…]}
//
// with p, d, b and k left out when empty. appendRecord writes those bytes
// and decodeRecord reads them without reflection; each falls back to
// encoding/json for what it cannot be sure of, so the stored bytes and
// the records read are the same as encoding/json's.

// encodeRecord returns the stored form of r.
func encodeRecord(r *record) ([]byte, error) {
	if b, ok := appendRecord(nil, r); ok {
		return b, nil
	}
	return json.Marshal(r)
}

// appendRecord appends json.Marshal's encoding of r. It reports false when
// a node's body is not known to be canonical (node.canon), since Marshal
// would compact and escape it.
func appendRecord(b []byte, r *record) ([]byte, bool) {
	size := 32
	for i := range r.Nodes {
		n := &r.Nodes[i]
		if len(n.Body) > 0 && !n.canon {
			return nil, false
		}
		size += len(n.Body) + len(n.Rev) + len(n.Parent) + 32
	}
	if b == nil {
		b = make([]byte, 0, size)
	}
	b = append(b, `{"s":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	if r.Nodes == nil {
		return append(b, `,"n":null}`...), true
	}
	b = append(b, `,"n":[`...)
	for i := range r.Nodes {
		n := &r.Nodes[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"r":`...)
		b = rawjson.AppendString(b, n.Rev)
		if n.Parent != "" {
			b = append(b, `,"p":`...)
			b = rawjson.AppendString(b, n.Parent)
		}
		if n.Deleted {
			b = append(b, `,"d":true`...)
		}
		if len(n.Body) > 0 {
			b = append(b, `,"b":`...)
			b = append(b, n.Body...)
		}
		if n.Kept {
			b = append(b, `,"k":true`...)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), true
}

// decodeRecord reads a stored record. The bodies of the nodes alias v.
// An error is json.Unmarshal's.
func decodeRecord(v []byte) (*record, error) {
	if r, ok := decodeRecordFast(v); ok {
		return r, nil
	}
	r := new(record)
	if err := json.Unmarshal(v, r); err != nil {
		return nil, err
	}
	return r, nil
}

// decodeRecordFast reads exactly the form appendRecord writes, with every
// body checked to be valid and canonical JSON; ok is false for anything
// else.
func decodeRecordFast(v []byte) (*record, bool) {
	const head = `{"s":`
	if len(v) < len(head) || string(v[:len(head)]) != head {
		return nil, false
	}
	i := len(head)
	j := i
	for j < len(v) && '0' <= v[j] && v[j] <= '9' {
		j++
	}
	if j == i || j-i > 19 || v[i] == '0' && j-i > 1 {
		return nil, false
	}
	seq, err := strconv.ParseUint(string(v[i:j]), 10, 64)
	if err != nil {
		return nil, false
	}
	r := &record{Seq: seq}
	rest := v[j:]
	if string(rest) == `,"n":null}` {
		return r, true
	}
	const nodes = `,"n":[`
	if len(rest) < len(nodes)+2 || string(rest[:len(nodes)]) != nodes || string(rest[len(rest)-2:]) != "]}" {
		return nil, false
	}
	i = j + len(nodes)
	end := len(v) - 2
	if i == end {
		r.Nodes = []node{}
		return r, true
	}
	r.Nodes = make([]node, 0, 1)
	for {
		var n node
		var ok bool
		if n, i, ok = decodeNode(v, i); !ok {
			return nil, false
		}
		r.Nodes = append(r.Nodes, n)
		switch {
		case i == end:
			return r, true
		case i < end && v[i] == ',':
			i++
		default:
			return nil, false
		}
	}
}

// decodeNode reads one node of a record at v[i].
func decodeNode(v []byte, i int) (n node, next int, ok bool) {
	field := func(name string) bool {
		if len(v)-i >= len(name) && string(v[i:i+len(name)]) == name {
			i += len(name)
			return true
		}
		return false
	}
	str := func() (string, bool) {
		end, valid, _ := rawjson.Scan(v, i)
		if !valid || v[i] != '"' {
			return "", false
		}
		s, ok := rawjson.Unquote(v[i:end])
		i = end
		return s, ok
	}
	if !field(`{"r":`) {
		return n, 0, false
	}
	if n.Rev, ok = str(); !ok {
		return n, 0, false
	}
	if field(`,"p":`) {
		if n.Parent, ok = str(); !ok || n.Parent == "" {
			return n, 0, false // "" is never written (omitempty)
		}
	}
	n.Deleted = field(`,"d":true`)
	if field(`,"b":`) {
		end, valid, canon := rawjson.Scan(v, i)
		if !valid || !canon || end == i {
			return n, 0, false
		}
		n.Body, n.canon = v[i:end:end], true
		i = end
	}
	n.Kept = field(`,"k":true`)
	if !field(`}`) {
		return n, 0, false
	}
	return n, i, true
}

// corruptRecord is the error for a stored record that does not decode.
func corruptRecord(id []byte, err error) error {
	return fmt.Errorf("document %q: corrupt record: %w", id, err)
}
