package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
)

// LocalsUpdater is a LocalUpdater that changes several _local documents
// in one atomic read-modify-write: one transaction (and, for a
// persistent store, one sync to disk) instead of one per document.
type LocalsUpdater interface {
	LocalUpdater
	// UpdateLocals calls fn for each id, in ids order, with the _local
	// document as stored, and writes what fn returns, as UpdateLocal
	// does for one; every write is committed together or none is. An
	// error from fn is returned as is and nothing is written. fn may be
	// called again for every id (the transaction ran again).
	UpdateLocals(ctx context.Context, ids []string, fn func(id string, old json.RawMessage) (json.RawMessage, error)) error
}

var _ LocalsUpdater = (*kvStore)(nil)

// UpdateLocals changes the _local documents ids of u with fn, as
// LocalsUpdater.UpdateLocals: in one transaction when u is a
// LocalsUpdater, else one UpdateLocal each (each atomic, not all
// together).
func UpdateLocals(ctx context.Context, u LocalUpdater, ids []string, fn func(id string, old json.RawMessage) (json.RawMessage, error)) error {
	if m, ok := u.(LocalsUpdater); ok {
		return m.UpdateLocals(ctx, ids, fn)
	}
	for _, id := range ids {
		err := u.UpdateLocal(ctx, id, func(old json.RawMessage) (json.RawMessage, error) { return fn(id, old) })
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *kvStore) UpdateLocals(ctx context.Context, ids []string, fn func(id string, old json.RawMessage) (json.RawMessage, error)) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	for _, id := range ids {
		if err := checkLocalID(id); err != nil {
			return err
		}
	}
	if len(ids) == 0 {
		return nil
	}
	err := s.b.Update(func(tx Tx) error {
		for _, id := range ids {
			if err := updateLocalTx(tx, id, fn); err != nil {
				return err
			}
		}
		return nil
	})
	if ce, ok := errors.AsType[callerErr](err); ok {
		return ce.err
	}
	if err != nil {
		return storageErr("update locals", err)
	}
	return nil
}

// updateLocalTx is one document's part of UpdateLocals.
func updateLocalTx(tx Tx, id string, fn func(id string, old json.RawMessage) (json.RawMessage, error)) error {
	key := []byte(id)
	var old json.RawMessage
	if v := tx.Get(BucketLocal, key); v != nil {
		old = bytes.Clone(v)
	}
	v, err := fn(id, bytes.Clone(old))
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
}
