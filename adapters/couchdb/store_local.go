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

// _local documents: the server keeps each with an "_id" and a "0-N"
// "_rev"; the Store hands them out without those two fields (the body as
// written, keys in their order), as the other Stores keep them, so that
// UpdateLocal's "the same bytes write nothing" holds.

func checkLocal(id string) error {
	if id == "" {
		return fmt.Errorf("%w: an empty _local id", store.ErrInvalid)
	}
	if len(id) > store.MaxLocalIDLength {
		return fmt.Errorf("%w: _local id is %d bytes, over the limit of %d: use a shorter id", store.ErrInvalid, len(id), store.MaxLocalIDLength)
	}
	return nil
}

// splitLocal parses a _local document as the server sent it into its
// _rev and its body without _id and _rev (compact, keys in order).
func splitLocal(raw []byte) (rev string, body json.RawMessage, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", nil, fmt.Errorf("couchdb: a _local document is not a JSON object: %w", engine.ErrMalformed)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", nil, fmt.Errorf("couchdb: bad _local document: %v: %w", err, engine.ErrMalformed)
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", nil, fmt.Errorf("couchdb: bad _local document: %v: %w", err, engine.ErrMalformed)
		}
		switch key {
		case "_rev":
			_ = json.Unmarshal(v, &rev)
			continue
		case "_id":
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		if err := json.Compact(&b, v); err != nil {
			return "", nil, fmt.Errorf("couchdb: bad _local document: %v: %w", err, engine.ErrMalformed)
		}
	}
	if _, err := dec.Token(); err != nil {
		return "", nil, fmt.Errorf("couchdb: bad _local document: %v: %w", err, engine.ErrMalformed)
	}
	b.WriteByte('}')
	return rev, b.Bytes(), nil
}

// withLocalMeta returns body (a JSON object) with _id and _rev (if any)
// set first and any of its own _id/_rev dropped.
func withLocalMeta(id, rev string, body json.RawMessage) (json.RawMessage, error) {
	_, clean, err := splitLocal(body)
	if err != nil {
		return nil, fmt.Errorf("%w: a _local document must be a JSON object", store.ErrInvalid)
	}
	var b bytes.Buffer
	k, _ := json.Marshal(localPrefix + id)
	b.WriteString(`{"_id":`)
	b.Write(k)
	if rev != "" {
		r, _ := json.Marshal(rev)
		b.WriteString(`,"_rev":`)
		b.Write(r)
	}
	if len(clean) > 2 {
		b.WriteByte(',')
		b.Write(clean[1:])
	} else {
		b.WriteByte('}')
	}
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

// PutLocal writes _local/id, last write wins (DB.PutLocal). The document
// must be a JSON object.
func (s *Store) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	if err := checkLocal(id); err != nil {
		return err
	}
	if _, _, err := splitLocal(doc); err != nil {
		return fmt.Errorf("%w: local document %q: a JSON object is required", store.ErrInvalid, id)
	}
	return s.call(ctx, "put local", func(c context.Context) error {
		if len(localURL(s.db, id)) > maxPathInURL+len(s.db.dbURL("", nil)) {
			return s.putLongLocal(c, id, doc)
		}
		return s.db.PutLocal(c, id, doc)
	})
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
		if err == nil {
			s.db.setLocalRev(id, "") // PutLocal reads the _rev afresh
		}
	}
	if isConflict(err) || (errors.Is(err, engine.ErrNotFound) && found) {
		return false, nil
	}
	return true, err
}
