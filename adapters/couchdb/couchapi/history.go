package couchapi

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"

	"github.com/livesync-go/livesync-go/engine/store"
)

// Revision history, as CouchDB keeps it: the bodies of earlier revisions
// stay until the database is compacted (GET /{db}/{doc}?revs_info=true
// lists them, ?rev= and open_revs read them), POST /{db}/_compact drops
// them, and /{db}/_revs_limit is the number of revisions each branch
// keeps. LiveSync's file-history view reads a note's history this way.

// DefaultRevsLimit is CouchDB's default _revs_limit, that of a database
// opened with StoreOptions.
const DefaultRevsLimit = 1000

// StoreOptions are the store.Options of a database that keeps history as
// CouchDB does: _revs_limit 1000, and the bodies of earlier revisions
// until POST /{db}/_compact; keepBodies > 0 keeps only that many per
// document (the newest), 0 keeps all. NewMemoryDatabases uses
// StoreOptions(0); pass it to boltdir.Open for the same on disk.
func StoreOptions(keepBodies int) store.Options {
	o := store.Options{RevsLimit: DefaultRevsLimit, KeepBodies: store.KeepAllBodies}
	if keepBodies > 0 {
		o.KeepBodies = keepBodies
	}
	return o
}

// compact answers POST /{db}/_compact: the bodies of every revision that
// is not a leaf are dropped and documents are stemmed to _revs_limit.
// CouchDB answers 202 at once and compacts in the background; here the
// answer (202 {"ok":true}, the same) comes when compaction is done, so
// compact_running in GET /{db} is always false. A body, if any, must be
// JSON, as CouchDB requires.
func (s *Server) compact(q *request) *apiError {
	if ct := q.r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return errorf(http.StatusUnsupportedMediaType, "bad_content_type", "Content-Type must be application/json")
		}
	}
	if err := q.st.Compact(q.r.Context()); err != nil {
		return asAPIError(err)
	}
	s.log.Info("database compacted", "db", q.db)
	writeJSON(q.w, http.StatusAccepted, map[string]bool{"ok": true})
	return nil
}

// getRevsLimit answers GET /{db}/_revs_limit with the limit, a bare JSON
// number.
func (s *Server) getRevsLimit(q *request) *apiError {
	n, err := q.st.RevsLimit(q.r.Context())
	if err != nil {
		return asAPIError(err)
	}
	writeRawJSON(q.w, http.StatusOK, strconv.AppendInt(nil, int64(n), 10))
	return nil
}

// errRevsLimit answers a PUT /{db}/_revs_limit whose body is not a
// positive integer.
var errRevsLimit = badRequest("The revs limit must be a positive integer, e.g. 1000.")

// putRevsLimit answers PUT /{db}/_revs_limit, whose body is a JSON
// integer ≥ 1. As in CouchDB, documents are stemmed to it at their next
// write and by _compact.
func (s *Server) putRevsLimit(q *request) *apiError {
	b, ae := readBody(q.r)
	if ae != nil {
		return ae
	}
	b = bytes.TrimSpace(b)
	if !json.Valid(b) {
		return invalidJSON(b)
	}
	n, err := strconv.ParseInt(string(b), 10, 32)
	if err != nil || n < 1 {
		return errRevsLimit
	}
	if err := q.st.SetRevsLimit(q.r.Context(), int(n)); err != nil {
		return asAPIError(err)
	}
	writeJSON(q.w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}
