package couchapi

import (
	"strconv"
	"strings"
)

// parseRev parses a document revision "N-hash": N a decimal integer ≥ 1
// without sign, hash non-empty. CouchDB answers anything else with 400
// "Invalid rev format".
func parseRev(rev string) (gen int, hash string, ok bool) {
	i := strings.IndexByte(rev, '-')
	if i <= 0 || i > 9 || i == len(rev)-1 {
		return 0, "", false
	}
	for _, c := range rev[:i] {
		if c < '0' || c > '9' {
			return 0, "", false
		}
	}
	n, err := strconv.Atoi(rev[:i])
	if err != nil || n < 1 {
		return 0, "", false
	}
	return n, rev[i+1:], true
}

func validRev(rev string) bool {
	_, _, ok := parseRev(rev)
	return ok
}

// parseLocalRev parses a _local document revision "0-N" (N ≥ 0).
func parseLocalRev(rev string) (int64, bool) {
	s, ok := strings.CutPrefix(rev, "0-")
	if !ok || s == "" || len(s) > 18 {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
