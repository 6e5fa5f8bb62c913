package couchdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// _local documents: the server keeps each with its own "_id" and "0-N"
// "_rev", which the Store uses for compare-and-swap and hands out
// without. A caller's body is kept as written, keys in their order: its
// own "_id" and "_rev" (couchapi keeps the revision it serves in the
// body) travel as keepID and keepRev, which the server does not
// interpret, and come back under their names. So a Store reads what was
// written, as the other Stores do, and UpdateLocal's "the same bytes
// write nothing" holds.
const (
	keepID  = "livesync-go:_id"
	keepRev = "livesync-go:_rev"
)

func checkLocal(id string) error {
	if id == "" {
		return fmt.Errorf("%w: an empty _local id", store.ErrInvalid)
	}
	if len(id) > store.MaxLocalIDLength {
		return fmt.Errorf("%w: _local id is %d bytes, over the limit of %d: use a shorter id", store.ErrInvalid, len(id), store.MaxLocalIDLength)
	}
	return nil
}

// rekey copies the JSON object raw into b (after its "{"), compact, keys
// in order, each key renamed by name (dropped when it returns ""). It
// returns the value of the key "_rev" as it was in raw.
func rekey(b *bytes.Buffer, raw []byte, name func(string) string) (rev string, err error) {
	bad := func(err error) error { return fmt.Errorf("not a JSON object: %v: %w", err, engine.ErrMalformed) }
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", fmt.Errorf("not a JSON object: %w", engine.ErrMalformed)
	}
	first := true
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", bad(err)
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", bad(err)
		}
		if key == "_rev" {
			_ = json.Unmarshal(v, &rev)
		}
		if key = name(key); key == "" {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		if err := json.Compact(b, v); err != nil {
			return "", bad(err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return "", bad(err)
	}
	return rev, nil
}

// splitLocal parses a _local document as the server sent it into the
// server's _rev and the body as the caller wrote it.
func splitLocal(raw []byte) (rev string, body json.RawMessage, err error) {
	var b bytes.Buffer
	b.WriteByte('{')
	rev, err = rekey(&b, raw, func(k string) string {
		switch k {
		case "_id", "_rev":
			return ""
		case keepID:
			return "_id"
		case keepRev:
			return "_rev"
		}
		return k
	})
	if err != nil {
		return "", nil, fmt.Errorf("couchdb: a _local document is %w", err)
	}
	b.WriteByte('}')
	return rev, b.Bytes(), nil
}

// withLocalMeta returns the caller's body (a JSON object) as the server
// keeps it: the server's _id and _rev (if any) first, then its fields,
// with its own _id and _rev renamed.
func withLocalMeta(id, rev string, body json.RawMessage) (json.RawMessage, error) {
	var b bytes.Buffer
	k, _ := json.Marshal(localPrefix + id)
	b.WriteString(`{"_id":`)
	b.Write(k)
	if rev != "" {
		r, _ := json.Marshal(rev)
		b.WriteString(`,"_rev":`)
		b.Write(r)
	}
	b.WriteByte(',')
	n := b.Len()
	_, err := rekey(&b, body, func(k string) string {
		switch k {
		case "_id":
			return keepID
		case "_rev":
			return keepRev
		}
		return k
	})
	if err != nil {
		return nil, fmt.Errorf("%w: a _local document must be a JSON object", store.ErrInvalid)
	}
	if b.Len() == n {
		b.Truncate(n - 1)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// getLocal reads _local/id: its _rev and body; found false when absent.
func (s *Store) getLocal(c context.Context, id string) (rev string, body json.RawMessage, found bool, err error) {
	var raw json.RawMessage
	err = s.db.do(c, "get local", localPrefix+id, http.MethodGet, localURL(s.db, id), nil, &raw)
	if errors.Is(err, engine.ErrNotFound) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, err
	}
	rev, body, err = splitLocal(raw)
	if err != nil {
		return "", nil, false, &engine.Error{Op: "get local", DocID: localPrefix + id, Stage: engine.StageProtocol, Err: err}
	}
	return rev, body, true, nil
}

// GetLocal reads _local/id without its _id and _rev; engine.ErrNotFound if
// absent.
func (s *Store) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	var body json.RawMessage
	err := s.call(ctx, "get local", func(c context.Context) error {
		if checkLocal(id) != nil {
			return notFound("get local", localPrefix+id)
		}
		_, b, found, err := s.getLocal(c, id)
		if err != nil {
			return err
		}
		if !found {
			return notFound("get local", localPrefix+id)
		}
		body = b
		return nil
	})
	return body, err
}

// PutLocal writes _local/id, last write wins: UpdateLocal with the new
// document, so that the caller's own _id and _rev are kept (see
// withLocalMeta). The document must be a JSON object.
func (s *Store) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	if err := checkLocal(id); err != nil {
		return err
	}
	if _, err := withLocalMeta(id, "", doc); err != nil {
		return fmt.Errorf("local document %q: %w", id, err)
	}
	if len(localURL(s.db, id)) > maxPathInURL+len(s.db.dbURL("", nil)) {
		return s.call(ctx, "put local", func(c context.Context) error { return s.putLongLocal(c, id, doc) })
	}
	return s.UpdateLocal(ctx, id, func(json.RawMessage) (json.RawMessage, error) { return doc, nil })
}

// putLongLocal writes a _local document whose id is too long for a URL
// through _bulk_docs. Its _rev cannot be read that way, so only a first
// write succeeds; rewriting one is a conflict.
func (s *Store) putLongLocal(c context.Context, id string, doc json.RawMessage) error {
	full, err := withLocalMeta(id, "", doc)
	if err != nil {
		return err
	}
	rows, err := s.postBulk(c, "put local", []json.RawMessage{full}, true)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.Error != "" {
			return fmt.Errorf("couchdb: _local id of %d bytes (too long for a URL: it can be written once, not rewritten): %s: %w",
				len(id), r.Reason, store.ErrConflict)
		}
	}
	return nil
}

// GetLocals reads several _local documents, a few requests at a time.
func (s *Store) GetLocals(ctx context.Context, ids []string) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(ids))
	err := s.call(ctx, "get locals", func(c context.Context) error {
		var mu sync.Mutex
		var first error
		sem := make(chan struct{}, 8)
		var wg sync.WaitGroup
		for _, id := range ids {
			if checkLocal(id) != nil {
				continue
			}
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				_, body, found, err := s.getLocal(c, id)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil && first == nil:
					first = err
				case found:
					out[id] = body
				}
			})
		}
		wg.Wait()
		return first
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// maxLocalAttempts bounds UpdateLocal's compare-and-swap retries.
const maxLocalAttempts = 200

// UpdateLocal changes _local/id by compare-and-swap on its _rev: it reads
// the document, calls fn, and writes the result naming the _rev it read
// (a new document with no _rev, a deletion with DELETE ?rev=). When
// another writer came first the server answers 409 and it starts again
// with a fresh read, after a short random pause.
func (s *Store) UpdateLocal(ctx context.Context, id string, fn func(old json.RawMessage) (json.RawMessage, error)) error {
	if err := checkLocal(id); err != nil {
		return err
	}
	c, end, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	for attempt := 0; ; attempt++ {
		done, err := s.updateLocalOnce(c, id, fn)
		if ce, ok := errors.AsType[callerError](err); ok {
			return ce.err
		}
		if done {
			return s.fail(ctx, "update local", err)
		}
		if attempt >= maxLocalAttempts {
			return fmt.Errorf("couchdb store: update local %q: still conflicting after %d attempts: %w", id, attempt+1, store.ErrConflict)
		}
		pause := time.Duration(1+rand.IntN(5*min(attempt+1, 10))) * time.Millisecond
		select {
		case <-c.Done():
			return s.fail(ctx, "update local", c.Err())
		case <-time.After(pause):
		}
	}
}

// callerError carries an error of fn, returned as is.
type callerError struct{ err error }

func (e callerError) Error() string { return e.err.Error() }

// updateLocalOnce is one read-modify-write; done false means another
// writer came first (retry).
func (s *Store) updateLocalOnce(c context.Context, id string, fn func(old json.RawMessage) (json.RawMessage, error)) (bool, error) {
	rev, old, found, err := s.getLocal(c, id)
	if err != nil {
		return true, err
	}
	if !found {
		old = nil
	}
	v, err := fn(bytes.Clone(old))
	switch {
	case err != nil:
		return true, callerError{err}
	case v == nil && !found:
		return true, nil
	case v == nil:
		q := url.Values{"rev": {rev}}
		err = s.db.do(c, "delete local", localPrefix+id, http.MethodDelete, s.db.dbURL("/"+localPrefix+url.PathEscape(id), q), nil, nil)
		if errors.Is(err, engine.ErrNotFound) {
			return true, nil
		}
	case found && bytes.Equal(v, old):
		return true, nil
	case !json.Valid(v):
		return true, callerError{fmt.Errorf("%w: local document %q: the update is not JSON", store.ErrInvalid, id)}
	default:
		doc, merr := withLocalMeta(id, rev, v)
		if merr != nil {
			return true, callerError{merr}
		}
		err = s.db.do(c, "update local", localPrefix+id, http.MethodPut, localURL(s.db, id), doc, nil)
	}
	if isConflict(err) || (errors.Is(err, engine.ErrNotFound) && found) {
		return false, nil
	}
	return true, err
}
