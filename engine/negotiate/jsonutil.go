package negotiate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/livesync-go/livesync-go/engine"
)

// decodeObject splits a JSON object into its members. It rejects anything
// that is not an object (including null). Duplicate keys keep the last
// value, as JSON.parse does.
func decodeObject(what string, data []byte) (map[string]json.RawMessage, error) {
	t := bytes.TrimLeft(data, " \t\r\n")
	if len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("negotiate: %s: not a JSON object: %w", what, engine.ErrMalformed)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("negotiate: %s: %v: %w", what, err, engine.ErrMalformed)
	}
	return m, nil
}

// isNull reports whether raw is the JSON literal null or absent (empty).
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// decodeString decodes a JSON string member; null or absent is "".
func decodeString(what, key string, raw json.RawMessage) (string, error) {
	var s string
	if isNull(raw) {
		return "", nil
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("negotiate: %s: %s is not a string: %w", what, key, engine.ErrMalformed)
	}
	return s, nil
}

// decodeBool decodes a JSON boolean member; null or absent is false.
func decodeBool(what, key string, raw json.RawMessage) (bool, error) {
	var b bool
	if isNull(raw) {
		return false, nil
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, fmt.Errorf("negotiate: %s: %s is not a boolean: %w", what, key, engine.ErrMalformed)
	}
	return b, nil
}

// decodeInt decodes a JSON number with an integral value (JavaScript has
// one number type, so 2.0 and 2e0 are the integer 2); null or absent is 0.
func decodeInt(what, key string, raw json.RawMessage) (int64, error) {
	if isNull(raw) {
		return 0, nil
	}
	var n json.Number
	if t := bytes.TrimSpace(raw); t[0] == '"' || json.Unmarshal(t, &n) != nil {
		return 0, fmt.Errorf("negotiate: %s: %s is not a number: %w", what, key, engine.ErrMalformed)
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i, nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("negotiate: %s: %s is not an integer: %w", what, key, engine.ErrMalformed)
	}
	return int64(f), nil
}

// objWriter writes a JSON object with members in the order they are added.
type objWriter struct {
	buf bytes.Buffer
	err error
}

func (w *objWriter) field(key string, v any) {
	if w.err != nil {
		return
	}
	raw, err := json.Marshal(v)
	if err != nil {
		w.err = err
		return
	}
	w.raw(key, raw)
}

func (w *objWriter) raw(key string, raw json.RawMessage) {
	if w.err != nil {
		return
	}
	if w.buf.Len() == 0 {
		w.buf.WriteByte('{')
	} else {
		w.buf.WriteByte(',')
	}
	k, _ := json.Marshal(key) // a string always marshals
	w.buf.Write(k)
	w.buf.WriteByte(':')
	if err := json.Compact(&w.buf, raw); err != nil {
		w.err = err
	}
}

// extras writes the members of m in sorted key order, skipping known keys.
func (w *objWriter) extras(m map[string]json.RawMessage) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w.raw(k, m[k])
	}
}

func (w *objWriter) bytes(what string) ([]byte, error) {
	if w.err != nil {
		return nil, fmt.Errorf("negotiate: encode %s: %v: %w", what, w.err, engine.ErrMalformed)
	}
	if w.buf.Len() == 0 {
		return []byte("{}"), nil
	}
	w.buf.WriteByte('}')
	return w.buf.Bytes(), nil
}

// cloneRaw copies a map of raw members (nil stays nil).
func cloneRaw(m map[string]json.RawMessage) map[string]json.RawMessage {
	if m == nil {
		return nil
	}
	c := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		c[k] = append(json.RawMessage(nil), v...)
	}
	return c
}
