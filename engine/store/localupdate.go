package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/livesync-go/livesync-go/engine"
)

// LocalUpdater is a Store that changes a _local document by an atomic
// read-modify-write: no other write of the document, by this process or
// another sharing the storage, comes between the read fn is given and
// the write of what it returns. The Stores Open builds over a Backend
// are LocalUpdaters (one Backend Update each).
type LocalUpdater interface {
	// UpdateLocal calls fn with the _local document id as stored (nil
	// when it is absent; fn may keep it) and writes what fn returns:
	// nil deletes the document, the same bytes as old write nothing, and
	// anything else must be JSON (ErrInvalid otherwise). An error from fn
	// is returned as is and nothing is written. fn may be called more
	// than once (the backend ran the transaction again because another
	// writer committed first); only the last call's result is written,
	// so fn must set what it reports outside afresh on each call.
	UpdateLocal(ctx context.Context, id string, fn func(old json.RawMessage) (json.RawMessage, error)) error
}

// LocalsReader is a Store that reads several _local documents at once,
// in fewer round trips than one GetLocal each.
type LocalsReader interface {
	// GetLocals returns the _local documents named by ids that exist,
	// by id; an absent one is not in the map. Each is as stored when it
	// was read; the reads need not be one snapshot.
	GetLocals(ctx context.Context, ids []string) (map[string]json.RawMessage, error)
}

var (
	_ LocalUpdater = (*kvStore)(nil)
	_ LocalsReader = (*kvStore)(nil)
)

// checkLocalID refuses a _local id the store cannot keep.
func checkLocalID(id string) error {
	if id == "" {
		return invalid("an empty _local id")
	}
	if len(id) > MaxLocalIDLength {
		return invalid("_local id is %d bytes, over the limit of %d: use a shorter id", len(id), MaxLocalIDLength)
	}
	return nil
}

// callerErr carries an error of UpdateLocal's fn (or its result's) out
// of the Backend's transaction, so that it is returned as is rather than
// as a storage error.
type callerErr struct{ err error }

func (e callerErr) Error() string { return e.err.Error() }

func (s *kvStore) UpdateLocal(ctx context.Context, id string, fn func(old json.RawMessage) (json.RawMessage, error)) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := checkLocalID(id); err != nil {
		return err
	}
	key := []byte(id)
	err := s.b.Update(func(tx Tx) error {
		var old json.RawMessage
		if v := tx.Get(BucketLocal, key); v != nil {
			old = bytes.Clone(v)
		}
		v, err := fn(bytes.Clone(old))
		switch {
		case err != nil:
			return callerErr{err}
		case v == nil && old == nil:
			return nil
		case v == nil:
			return tx.Delete(BucketLocal, key)
		case old != nil && bytes.Equal(v, old):
			return nil
		case !json.Valid(v):
			return callerErr{invalid("local document %q: the update is not JSON", id)}
		}
		return tx.Put(BucketLocal, key, bytes.Clone(v))
	})
	if ce, ok := errors.AsType[callerErr](err); ok {
		return ce.err
	}
	if err != nil {
		return storageErr("update local", err)
	}
	return nil
}

func (s *kvStore) GetLocals(ctx context.Context, ids []string) (map[string]json.RawMessage, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if p, ok := s.b.(Prefetcher); ok && len(ids) > 1 {
		keys := make([][]byte, len(ids))
		for i, id := range ids {
			keys[i] = []byte(id)
		}
		_ = p.Prefetch(BucketLocal, keys) // a hint: the View's Gets read what it did not
	}
	out := make(map[string]json.RawMessage, len(ids))
	err := s.view("get locals", func(tx Tx) error {
		for _, id := range ids {
			if v := tx.Get(BucketLocal, []byte(id)); v != nil {
				out[id] = bytes.Clone(v)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetLocals reads the _local documents ids of st: in one call when st is
// a LocalsReader, else one GetLocal each. An absent one is not in the
// map.
func GetLocals(ctx context.Context, st Store, ids []string) (map[string]json.RawMessage, error) {
	if r, ok := st.(LocalsReader); ok {
		return r.GetLocals(ctx, ids)
	}
	out := make(map[string]json.RawMessage, len(ids))
	for _, id := range ids {
		v, err := st.GetLocal(ctx, id)
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get local %q: %w", id, err)
		}
		out[id] = v
	}
	return out, nil
}
