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
