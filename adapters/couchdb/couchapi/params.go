package couchapi

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// boolParam reads a "true"/"false" query parameter.
func boolParam(qv url.Values, name string) (bool, *apiError) {
	v, ok := qv[name]
	if !ok || len(v) == 0 {
		return false, nil
	}
	switch v[len(v)-1] {
	case "true":
		return true, nil
	case "false", "":
		return false, nil
	}
	return false, errorf(400, "query_parse_error", "Invalid boolean parameter: \""+name+"\"")
}

// intParam reads a non-negative integer query parameter; absent is def.
// Values beyond max are clamped to max.
func intParam(qv url.Values, name string, def, max int64) (int64, *apiError) {
	v := qv.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange && !strings.HasPrefix(v, "-") {
			return max, nil
		}
		return 0, badRequest("The " + name + " parameter should be a non-negative integer")
	}
	if n < 0 {
		return 0, badRequest("The " + name + " value should be a non-negative integer")
	}
	return min(n, max), nil
}

// jsonStringParam reads a query parameter holding a JSON string (startkey,
// endkey, key…). set is false when absent or null.
func jsonStringParam(qv url.Values, names ...string) (s string, set bool, ae *apiError) {
	for _, name := range names {
		v, ok := qv[name]
		if !ok || len(v) == 0 {
			continue
		}
		raw := v[len(v)-1]
		if !utf8.ValidString(raw) {
			return "", false, errInvalidJSON
		}
		var x any
		if err := json.Unmarshal([]byte(raw), &x); err != nil {
			return "", false, errorf(400, "query_parse_error", "Invalid JSON in the "+name+" parameter")
		}
		switch x := x.(type) {
		case nil:
			return "", false, nil
		case string:
			return x, true, nil
		}
		return "", false, errorf(400, "query_parse_error", "The "+name+" parameter must be a JSON string (document ids are strings)")
	}
	return "", false, nil
}

// checkDocID refuses ids CouchDB refuses: empty, not UTF-8, or starting
// with "_" other than "_design/" and "_local/".
func checkDocID(id string) *apiError {
	switch {
	case id == "":
		return errorf(400, "illegal_docid", "Document id must not be empty")
	case !utf8.ValidString(id):
		return errorf(400, "illegal_docid", "Document id must be valid UTF-8")
	case strings.HasPrefix(id, "_design/") && len(id) > len("_design/"):
		return nil
	case strings.HasPrefix(id, "_local/") && len(id) > len("_local/"):
		return nil
	case strings.HasPrefix(id, "_"):
		return errIllegalDocID
	}
	return nil
}

func isDesign(id string) bool { return strings.HasPrefix(id, "_design/") }

// headerRev returns the revision named by ?rev= or If-Match.
func headerRev(qv url.Values, ifMatch string) string {
	if r := qv.Get("rev"); r != "" {
		return r
	}
	return strings.Trim(strings.TrimSpace(ifMatch), `"`)
}
