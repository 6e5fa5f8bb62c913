package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
)

// selector is a parsed Mango selector: a conjunction of conditions on
// top-level fields. See Store for what is supported.
type selector []cond

type cond struct {
	field string
	op    string // $eq $ne $in $nin $exists
	val   any
	vals  []any
	exist bool
}

func unsupported(format string, a ...any) error {
	return fmt.Errorf("store: selector: %w: "+format, append([]any{engine.ErrUnsupported}, a...)...)
}

func parseSelector(raw json.RawMessage) (selector, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var s selector
	if err := s.add(raw); err != nil {
		return nil, err
	}
	if s == nil {
		s = selector{} // {} matches everything
	}
	return s, nil
}

func (s *selector) add(raw json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return fmt.Errorf("store: selector: %w: not a JSON object", engine.ErrMalformed)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := m[k]
		switch {
		case k == "$and":
			var list []json.RawMessage
			if err := json.Unmarshal(v, &list); err != nil {
				return fmt.Errorf("store: selector: %w: $and needs a list", engine.ErrMalformed)
			}
			for _, sub := range list {
				if err := s.add(sub); err != nil {
					return err
				}
			}
		case strings.HasPrefix(k, "$"):
			return unsupported("operator %s", k)
		case strings.Contains(k, "."):
			return unsupported("nested field %q", k)
		default:
			if err := s.addField(k, v); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *selector) addField(field string, raw json.RawMessage) error {
	var ops map[string]json.RawMessage
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		if err := json.Unmarshal(raw, &ops); err != nil {
			return fmt.Errorf("store: selector: %w: %v", engine.ErrMalformed, err)
		}
		isOps := len(ops) > 0
		for k := range ops {
			if !strings.HasPrefix(k, "$") {
				isOps = false
			}
		}
		if !isOps {
			return unsupported("object value for %q (nested fields)", field)
		}
	} else {
		ops = map[string]json.RawMessage{"$eq": raw}
	}
	opNames := make([]string, 0, len(ops))
	for k := range ops {
		opNames = append(opNames, k)
	}
	sort.Strings(opNames)
	for _, op := range opNames {
		c := cond{field: field, op: op}
		var err error
		switch op {
		case "$eq", "$ne":
			err = json.Unmarshal(ops[op], &c.val)
		case "$in", "$nin":
			err = json.Unmarshal(ops[op], &c.vals)
			if err == nil && c.vals == nil {
				err = fmt.Errorf("%s needs a list", op)
			}
		case "$exists":
			err = json.Unmarshal(ops[op], &c.exist)
		default:
			return unsupported("operator %s", op)
		}
		if err != nil {
			return fmt.Errorf("store: selector: %w: %s on %q: %v", engine.ErrMalformed, op, field, err)
		}
		*s = append(*s, c)
	}
	return nil
}

// match evaluates the selector on a document's top-level fields.
func (s selector) match(fields map[string]json.RawMessage) bool {
	for _, c := range s {
		raw, ok := fields[c.field]
		if c.op == "$exists" {
			if ok != c.exist {
				return false
			}
			continue
		}
		if !ok {
			return false // CouchDB: a missing field fails every other operator
		}
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return false
		}
		switch c.op {
		case "$eq":
			if !reflect.DeepEqual(v, c.val) {
				return false
			}
		case "$ne":
			if reflect.DeepEqual(v, c.val) {
				return false
			}
		case "$in", "$nin":
			in := false
			for _, x := range c.vals {
				if reflect.DeepEqual(v, x) {
					in = true
					break
				}
			}
			if in != (c.op == "$in") {
				return false
			}
		}
	}
	return true
}
