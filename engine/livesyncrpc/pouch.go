package livesyncrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/jsstring"
	"github.com/livesync-go/livesync-go/engine/rpcroom"
)

// LocalPrefix starts the id of a _local document.
const LocalPrefix = "_local/"

// pouchError is a PouchDB error (pouchdb-errors PouchError): the served
// database's failures cross as REMOTE_ERROR whose message is the
// PouchDB message ("missing" for an absent document), as LiveSync's
// hosting database (commonlib src/replication/trystero/ProxiedDB.ts)
// lets them through commonlib's asRpcErrorShape (src/rpc/errors.ts),
// which keeps only an Error's message: no details. status and name
// only document the PouchDB error meant.
func pouchError(status int, name, message string) error {
	_, _ = status, name
	return &rpcroom.Error{Code: rpcroom.CodeRemoteError, Message: message}
}

var (
	errMissing  = func() error { return pouchError(404, "not_found", "missing") }
	errConflict = func() error { return pouchError(409, "conflict", "Document update conflict") }
)

func badRequest(format string, a ...any) error {
	return pouchError(400, "bad_request", fmt.Sprintf(format, a...))
}

// IsNotFound reports whether err is a peer's answer that a document does
// not exist, as ReplicatorShim's upsert recognises it (commonlib
// src/pouchdb/ReplicatorShim.ts): a REMOTE_ERROR whose message, or
// details' name or reason, is "missing" or "not_found".
func IsNotFound(err error) bool {
	var re *rpcroom.Error
	if !errors.As(err, &re) || re.Code != rpcroom.CodeRemoteError {
		return false
	}
	if re.Message == "missing" || re.Message == "not_found" {
		return true
	}
	var d struct{ Name, Reason string }
	if json.Unmarshal(re.Details, &d) == nil {
		return d.Name == "not_found" || d.Reason == "missing"
	}
	return false
}

// seqJSON renders an opaque engine sequence as PouchDB does: a number
// when it is a decimal integer (the store's sequences), else a string.
func seqJSON(s string) json.RawMessage {
	if s != "" && len(s) <= 15 && strings.Trim(s, "0123456789") == "" && (s == "0" || s[0] != '0') {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// seqString turns a since value a peer sent (number, string, null or
// absent) back into an engine sequence.
func seqString(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		if v == "0" {
			return "", nil // the start, as the number 0
		}
		return v, nil
	case float64:
		if v < 0 || v != float64(int64(v)) {
			return "", fmt.Errorf("since %s is not a sequence", raw)
		}
		if v == 0 {
			return "", nil
		}
		return strconv.FormatInt(int64(v), 10), nil
	}
	return "", fmt.Errorf("since %s is not a sequence", raw)
}

// parseSeq is ReplicatorShim's parseSeq, parseInt(String(seq).split("-")[0], 10):
// the integer that starts the text of a sequence before its first "-",
// after leading white space and an optional "+"; a number is written as
// JavaScript's String writes it (1e21 and up, and below 1e-6, with an
// exponent, so only their first digit counts). Where JavaScript gets NaN
// this returns 0; values beyond int64 are clamped.
func parseSeq(raw json.RawMessage) int64 {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return 0
	}
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case float64:
		switch {
		case v < 0:
			return 0
		case v >= 1e21 || (v > 0 && v < 1e-6):
			s = strconv.FormatFloat(v, 'e', -1, 64)
		default:
			s = strconv.FormatFloat(math.Trunc(v), 'f', -1, 64)
		}
	default:
		return 0
	}
	s, _, _ = strings.Cut(s, "-")
	s = strings.TrimLeftFunc(s, jsstring.IsSpace)
	s = strings.TrimPrefix(s, "+")
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	if end == 0 {
		return 0
	}
	n, err := strconv.ParseInt(s[:end], 10, 64)
	if err != nil {
		return math.MaxInt64
	}
	return n
}

// localDocs keeps _local documents on an engine.Endpoint in PouchDB's
// shape: the body carries its _id ("_local/…") and a revision "0-N" that
// every write increments, and a write must name the current revision
// (none for a new document) or fails with a conflict, as PouchDB's
// local documents do.
type localDocs struct {
	mu sync.Mutex
	db engine.Endpoint
}

// get returns the live _local document id (without the prefix) with
// _id and _rev, or errMissing.
func (l *localDocs) get(ctx context.Context, id string) (map[string]json.RawMessage, error) {
	raw, err := l.db.GetLocal(ctx, id)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, errMissing()
	}
	if err != nil {
		return nil, err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil || doc == nil {
		return nil, errMissing()
	}
	if del, ok := doc["_deleted"]; ok && string(del) == "true" {
		return nil, errMissing()
	}
	doc["_id"], _ = json.Marshal(LocalPrefix + id)
	if _, ok := doc["_rev"]; !ok {
		doc["_rev"] = json.RawMessage(`"0-1"`)
	}
	return doc, nil
}

// put writes doc, whose _id starts with "_local/", and returns its new
// revision.
func (l *localDocs) put(ctx context.Context, doc map[string]json.RawMessage) (string, error) {
	var id, rev string
	if err := json.Unmarshal(doc["_id"], &id); err != nil || !strings.HasPrefix(id, LocalPrefix) || id == LocalPrefix {
		return "", badRequest("not a _local document id")
	}
	if r, ok := doc["_rev"]; ok && json.Unmarshal(r, &rev) != nil {
		return "", badRequest("invalid _rev")
	}
	key := strings.TrimPrefix(id, LocalPrefix)
	l.mu.Lock()
	defer l.mu.Unlock()
	old, err := l.get(ctx, key)
	oldRev := ""
	switch {
	case err == nil:
		_ = json.Unmarshal(old["_rev"], &oldRev)
	case !IsNotFound(err):
		return "", err
	}
	if rev != oldRev {
		return "", errConflict()
	}
	if del, ok := doc["_deleted"]; ok && string(del) == "true" {
		return "0-0", l.db.PutLocal(ctx, key, json.RawMessage(`{"_deleted":true}`))
	}
	n, _ := strconv.Atoi(strings.TrimPrefix(oldRev, "0-"))
	newRev := "0-" + strconv.Itoa(n+1)
	out := make(map[string]json.RawMessage, len(doc))
	for k, v := range doc {
		out[k] = v
	}
	out["_rev"], _ = json.Marshal(newRev)
	body, err := json.Marshal(out)
	if err != nil {
		return "", badRequest("unencodable document")
	}
	return newRev, l.db.PutLocal(ctx, key, body)
}
