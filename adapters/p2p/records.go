//go:build !js

package p2p

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// StoreRecords is a negotiate.Port over st's documents: the sync
// parameters and the milestone as _local documents with CouchDB's "0-N"
// revisions, the version document as a document. prefix "" keeps them at
// the ids a CouchDB-protocol server keeps them (the relay's database);
// another prefix keeps all three as _local documents under
// prefix+id (a replica that serves a group).
//
// The _local documents are stored as the relay's CouchDB-protocol server
// stores them (with _id and "_rev":"0-N"; a deleted one as a
// "_deleted":true marker), so a record written over HTTP reads back here
// and the other way round. Writes of one record through any StoreRecords
// of the same store in this process are serialised.
func StoreRecords(st store.Store, prefix string) negotiate.Port {
	return &storeRecords{st: st, prefix: prefix}
}

type storeRecords struct {
	st     store.Store
	prefix string
}

// recordLocks serialises the conditional writes of one record of one
// store, across every StoreRecords over it.
var recordLocks sync.Map // recordKey -> *sync.Mutex

type recordKey struct {
	st store.Store
	id string
}

func (p *storeRecords) lock(id string) func() {
	m, _ := recordLocks.LoadOrStore(recordKey{p.st, id}, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// localID returns the _local id record r is kept under, and false when r
// is kept as a replicated document (the version, without a prefix).
func (p *storeRecords) localID(r negotiate.Record) (string, bool) {
	id, isLocal := strings.CutPrefix(string(r), "_local/")
	if p.prefix == "" {
		return id, isLocal
	}
	return p.prefix + id, true
}

// Exists is true: the store is the database.
func (p *storeRecords) Exists(ctx context.Context) (bool, error) { return true, ctx.Err() }

// Create does nothing: the store exists.
func (p *storeRecords) Create(ctx context.Context) error { return ctx.Err() }

// Progress is the store's update sequence.
func (p *storeRecords) Progress(ctx context.Context) (string, error) {
	info, err := p.st.Info(ctx)
	return info.UpdateSeq, err
}

// Read returns record r and its revision.
func (p *storeRecords) Read(ctx context.Context, r negotiate.Record) (json.RawMessage, string, error) {
	id, isLocal := p.localID(r)
	if !isLocal {
		raw, err := p.st.Get(ctx, id, store.GetOptions{})
		if err != nil {
			return nil, "", err
		}
		var head struct {
			Rev string `json:"_rev"`
		}
		_ = json.Unmarshal(raw, &head)
		return raw, head.Rev, nil
	}
	raw, err := p.st.GetLocal(ctx, id)
	if err != nil {
		return nil, "", err
	}
	doc, n, deleted := store.ServedLocal(string(r), raw)
	if deleted {
		return nil, "", fmt.Errorf("%s: %w", r.Name(), engine.ErrNotFound)
	}
	return doc, store.LocalRev(n), nil
}

// Write stores raw as record r if it is still at version.
func (p *storeRecords) Write(ctx context.Context, r negotiate.Record, raw json.RawMessage, version string) (string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return "", &engine.Error{Op: "write " + r.Name(), DocID: string(r), Stage: engine.StageEncode,
			Err: fmt.Errorf("a record must be a JSON object: %w", engine.ErrMalformed)}
	}
	delete(m, "_id")
	delete(m, "_rev")
	delete(m, "_revisions")
	for k := range m {
		if strings.HasPrefix(k, "_") {
			// "_deleted" would delete the record (a peer could drop the
			// group's salt); no record has fields of CouchDB's own.
			return "", &engine.Error{Op: "write " + r.Name(), DocID: string(r), Stage: engine.StageEncode,
				Err: fmt.Errorf("a record may not set the field %.32q: %w", k, engine.ErrMalformed)}
		}
	}
	id, isLocal := p.localID(r)
	defer p.lock(id)()
	if !isLocal {
		m["_id"], _ = json.Marshal(id)
		if version != "" {
			m["_rev"], _ = json.Marshal(version)
		}
		b, err := json.Marshal(m)
		if err != nil {
			return "", err
		}
		rev, err := p.st.Put(ctx, b)
		if errors.Is(err, store.ErrConflict) {
			return "", fmt.Errorf("%w: %w", negotiate.ErrConflict, err)
		}
		return rev, err
	}
	n, exists, err := p.current(ctx, string(r), id)
	if err != nil {
		return "", err
	}
	if (exists && version != store.LocalRev(n)) || (!exists && version != "") {
		return "", fmt.Errorf("%s at %q, not %q: %w", r.Name(), store.LocalRev(n), version, negotiate.ErrConflict)
	}
	if !exists {
		n = 0
	}
	rev := store.LocalRev(n + 1)
	m["_id"], _ = json.Marshal(string(r))
	m["_rev"], _ = json.Marshal(rev)
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	if err := p.st.PutLocal(ctx, id, b); err != nil {
		return "", err
	}
	return rev, nil
}

// current returns the revision number of a stored _local record, exists
// false if it is absent or deleted.
func (p *storeRecords) current(ctx context.Context, docID, id string) (int64, bool, error) {
	raw, err := p.st.GetLocal(ctx, id)
	if errors.Is(err, engine.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	_, n, deleted := store.ServedLocal(docID, raw)
	return n, !deleted, nil
}
