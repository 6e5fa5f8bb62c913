package store

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
)

// LocalReader reads _local documents by id without the "_local/" prefix,
// answering engine.ErrNotFound for an absent one (a Store, an
// engine.Endpoint).
type LocalReader interface {
	GetLocal(ctx context.Context, id string) (json.RawMessage, error)
}

// LiveLocal reads the _local document id from db: nil, nil when it is
// absent or deleted (a {"_deleted":true} body, the marker a
// CouchDB-protocol server keeps when a client deletes it).
func LiveLocal(ctx context.Context, db LocalReader, id string) (json.RawMessage, error) {
	raw, err := db.GetLocal(ctx, id)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m struct {
		Deleted bool `json:"_deleted"`
	}
	if json.Unmarshal(raw, &m) == nil && m.Deleted {
		return nil, nil
	}
	return raw, nil
}

// _local documents as a CouchDB-protocol server serves them. A Store keeps
// them last-write-wins; CouchDB gives each a "0-N" revision that a write
// must name, and deletes one by keeping a {"_deleted":true} marker.

// LocalRev is the "0-N" revision of a _local document's Nth write.
func LocalRev(n int64) string { return "0-" + strconv.FormatInt(n, 10) }

// ParseLocalRev parses a _local document revision "0-N" (N ≥ 0, at most
// 18 digits).
func ParseLocalRev(rev string) (int64, bool) {
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

// ServedLocal is a stored _local document as a CouchDB server serves it:
// with _id docID (including the "_local/" prefix) and its "0-N" revision,
// N being 1 for a document written without a valid one (by the server
// itself). A {"_deleted":true} marker is deleted, with no document.
func ServedLocal(docID string, raw []byte) (doc []byte, n int64, deleted bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	var del bool
	_ = json.Unmarshal(m["_deleted"], &del)
	if del {
		return nil, 0, true
	}
	n = 1
	var rev string
	if json.Unmarshal(m["_rev"], &rev) == nil {
		if k, ok := ParseLocalRev(rev); ok {
			n = k
		}
	}
	m["_id"], _ = json.Marshal(docID)
	m["_rev"], _ = json.Marshal(LocalRev(n))
	doc, _ = json.Marshal(m)
	return doc, n, false
}
