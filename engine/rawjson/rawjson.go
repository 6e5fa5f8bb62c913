// Package rawjson walks the members of a JSON object and the elements of
// a JSON array without decoding them: each value is handed over as the
// raw bytes it spans. It is for input already known to be valid JSON
// (json.Valid, or what a store wrote): values are not checked, only
// followed far enough to find where they end, so that reading a few
// members of a large document costs one pass over it and no allocation
// for the values.
//
// For fast paths that must give encoding/json's exact results, Scan
// checks a value (and whether Marshal would rewrite it), AppendCanonical
// rewrites it as Marshal would, AppendString encodes a string and Unquote
// decodes one byte for byte as encoding/json does; a fast path falls
// back to encoding/json whenever Scan cannot decide.
package rawjson

// Members calls fn with the key and the raw value of each member of the
// JSON object b, in order, until fn returns false. A key is unescaped
// (its bytes are b's own when it has no escape). It reports false when b
// is not an object as far as the walk can tell (a truncated or
// malformed one).
func Members(b []byte, fn func(key, val []byte) bool) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		end, esc, ok := stringEnd(b, i)
		if !ok {
			return false
		}
		key := b[i+1 : end-1]
		if esc {
			s, ok := Unquote(b[i:end])
			if !ok {
				return false
			}
			key = []byte(s)
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		vs := skipSpace(b, i+1)
		ve, ok := valueEnd(b, vs)
		if !ok {
			return false
		}
		if !fn(key, b[vs:ve]) {
			return true
		}
		i = skipSpace(b, ve)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// Elements calls fn with each element of the JSON array b, in order,
// until fn returns false. It reports false when b is not an array as far
// as the walk can tell.
func Elements(b []byte, fn func(val []byte) bool) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return skipSpace(b, i+1) == len(b)
	}
	for {
		ve, ok := valueEnd(b, i)
		if !ok {
			return false
		}
		if !fn(b[i:ve]) {
			return true
		}
		i = skipSpace(b, ve)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == ']':
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// String returns the string a raw JSON string value holds, and false if
// raw is not a string. One with an escape is decoded as Unquote (and
// encoding/json) decodes it; one without is returned as it is.
func String(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	end, esc, ok := stringEnd(raw, 0)
	if !ok || end != len(raw) {
		return "", false
	}
	if !esc {
		return string(raw[1 : end-1]), true
	}
	return Unquote(raw)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index after the string starting at b[i] (a
// quote), and whether it holds an escape.
func stringEnd(b []byte, i int) (end int, escaped, ok bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped, true
		}
	}
	return 0, false, false
}

// valueEnd returns the index after the value starting at b[i].
func valueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		end, _, ok := stringEnd(b, i)
		return end, ok
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _, ok := stringEnd(b, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	case ',', ':', '}', ']':
		return 0, false
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return j, true
		}
		j++
	}
	return j, true
}
