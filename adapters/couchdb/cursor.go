package couchdb

import (
	"bytes"

	"github.com/livesync-go/livesync-go/engine/rawjson"
)

// cursor reads a JSON value already checked to be valid (rawAnswer) in
// one pass, descending into the objects and arrays a caller walks and
// stepping over the rest, so that each byte of an answer is looked at
// once (walking nested values with engine/rawjson, each level would scan
// its values again to find their ends). On input that is not what it
// expects it sets bad and stops; it never reads past the input.
type cursor struct {
	b   []byte
	i   int
	bad bool
}

// peek returns the next byte after white space (0 at the end).
func (c *cursor) peek() byte {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\r', '\n':
			c.i++
		default:
			return c.b[c.i]
		}
	}
	return 0
}

// fail marks the input as not what was expected.
func (c *cursor) fail() bool {
	c.bad = true
	return false
}

// str consumes a string and returns it with its quotes.
func (c *cursor) str() []byte {
	if c.peek() != '"' {
		c.fail()
		return nil
	}
	start := c.i
	j := c.i + 1
	for {
		k := bytes.IndexByte(c.b[j:], '"')
		if k < 0 {
			c.fail()
			return nil
		}
		j += k
		// The quote ends the string unless an odd number of
		// backslashes escapes it.
		n := 0
		for p := j - 1; p > start && c.b[p] == '\\'; p-- {
			n++
		}
		j++
		if n%2 == 0 {
			c.i = j
			return c.b[start:j]
		}
	}
}

// skip consumes any value and returns it.
func (c *cursor) skip() []byte {
	switch c.peek() {
	case '"':
		return c.str()
	case '{', '[':
		start, depth := c.i, 0
		for c.i < len(c.b) {
			switch c.b[c.i] {
			case '"':
				if c.str() == nil {
					return nil
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					c.i++
					return c.b[start:c.i]
				}
			}
			c.i++
		}
		c.fail()
		return nil
	case 0, ',', ':', '}', ']':
		c.fail()
		return nil
	}
	start := c.i
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return c.b[start:c.i]
		}
		c.i++
	}
	return c.b[start:c.i]
}

// null consumes a null if one is next.
func (c *cursor) null() bool {
	if c.peek() == 'n' && bytes.HasPrefix(c.b[c.i:], []byte("null")) {
		c.i += 4
		return true
	}
	return false
}

// object walks an object (null is an empty one): fn gets each key
// (unescaped) and must consume its value; it returns false to stop.
// object reports false if fn stopped or the input is not an object.
func (c *cursor) object(fn func(key []byte) bool) bool {
	if c.null() {
		return true
	}
	if c.peek() != '{' {
		return c.fail()
	}
	c.i++
	if c.peek() == '}' {
		c.i++
		return true
	}
	for {
		raw := c.str()
		if raw == nil {
			return false
		}
		key := raw[1 : len(raw)-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			s, ok := rawjson.String(raw)
			if !ok {
				return c.fail()
			}
			key = []byte(s)
		}
		if c.peek() != ':' {
			return c.fail()
		}
		c.i++
		if !fn(key) || c.bad {
			return false
		}
		switch c.peek() {
		case ',':
			c.i++
		case '}':
			c.i++
			return true
		default:
			return c.fail()
		}
	}
}

// array walks an array (null is an empty one): fn must consume each
// element; it returns false to stop.
func (c *cursor) array(fn func() bool) bool {
	if c.null() {
		return true
	}
	if c.peek() != '[' {
		return c.fail()
	}
	c.i++
	if c.peek() == ']' {
		c.i++
		return true
	}
	for {
		if !fn() || c.bad {
			return false
		}
		switch c.peek() {
		case ',':
			c.i++
		case ']':
			c.i++
			return true
		default:
			return c.fail()
		}
	}
}
