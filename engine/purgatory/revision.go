package purgatory

import (
	"slices"
	"strconv"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/hold"
)

// ClientPush is the source of a revision a client pushed to us (the
// Hunter's origin "").
const ClientPush = ""

// uniqueChunks returns the sorted, deduplicated chunk ids of r.
func uniqueChunks(r hold.Revision) []engine.ChunkID {
	ids := slices.Clone(r.Chunks)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// CompareRevs orders CouchDB revisions "N-hash" as CouchDB picks a
// winner: by generation N, then by the hash as a string (CouchDB and
// PouchDB compare the revision ids of equal generation lexically). It
// returns -1 if a is older than b, 0 if equal, +1 if a is newer. A
// revision without a numeric generation sorts before every well-formed
// one (generation -1, the whole string as its id).
func CompareRevs(a, b string) int {
	ga, ia := splitRev(a)
	gb, ib := splitRev(b)
	switch {
	case ga < gb:
		return -1
	case ga > gb:
		return 1
	}
	return strings.Compare(ia, ib)
}

func splitRev(r string) (int, string) {
	i := strings.IndexByte(r, '-')
	if i <= 0 {
		return -1, r
	}
	g, err := strconv.Atoi(r[:i])
	if err != nil || g < 0 {
		return -1, r
	}
	return g, r[i+1:]
}
