package holdback

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/lease"
	"github.com/livesync-go/livesync-go/engine/store"
)

// LocalPrefix starts the ids of the inner store's _local documents that
// the Store keeps for itself: the holding area, its index and the
// purgatory's state. Clients can neither read nor write them through the
// Store.
const LocalPrefix = "livesync-go/holdback/"

// The _local documents of the holding area.
const (
	localDocPrefix = LocalPrefix + "doc/"      // + document id: its held bodies
	localIndex     = LocalPrefix + "index"     // the ids that have held bodies
	localState     = LocalPrefix + "purgatory" // purgatory.Snapshot
)

// holdingDoc is the _local document that keeps the held revisions of one
// document, exactly as the client sent them. A document whose revisions
// all left keeps an empty holdingDoc: the Store port has no deletion of
// _local documents.
type holdingDoc struct {
	// Owner is the user the document counts against
	// (Config.MaxHeldPerOwner); "" for none.
	Owner string              `json:"owner,omitempty"`
	Revs  map[string]heldBody `json:"revs"`
}

// heldBody is one held revision: the source it came from ("" = a client
// push) and the document as received (with _revisions).
type heldBody struct {
	Source string          `json:"source"`
	Body   json.RawMessage `json:"body"`
}

// indexDoc lists the documents that may have held bodies, so that a
// restart finds them all (the Store port cannot list _local documents).
type indexDoc struct {
	Docs []string `json:"docs"`
	// Gen counts the changes of a shared area (see area.shared), so that
	// a process sees that the area changed by reading the index alone.
	Gen uint64 `json:"gen,omitempty"`
}

// area is the holding area: held bodies in the inner store's _local
// documents, which are never in the changes feed, never in _all_docs and
// persisted with the store.
//
// When the inner store is a store.LocalUpdater, other processes may
// share it (a Worker's isolates over one D1 database), so the area is
// changed only by atomic deltas: a holding document gains or loses
// revisions in one UpdateLocal, and is deleted when none is left; the
// index gains the documents a hold wrote (after writing them) and loses
// a document whose last revision this process removed (after removing
// it). Whoever removes a document from the index reads its holding
// document again afterwards and puts it back if revisions came
// meanwhile: a hold that wrote before that read is seen by it, and one
// that wrote after it adds to the index after the removal. So a document
// with held revisions is always indexed, once its holder's index write
// returned, whatever the processes interleave.
//
// Otherwise the inner store belongs to this Store alone: mu serialises
// the read-modify-write of the holding documents and the index is
// written whole from memory (Store.writeIndex); a document whose
// revisions all left keeps an empty holding document, the Store port
// having no deletion of _local documents.
type area struct {
	inner store.Store        // never closed by the area
	upd   store.LocalUpdater // nil: the inner store is this Store's alone
	// shared: other processes serve the same database from the inner
	// store (relays in front of one CouchDB) and look for each other's
	// holds (Served.Refresh). Every change of a holding document then
	// also counts in the index's Gen, written after the holding
	// document: a process that reads the index, then the holding
	// documents, sees every change counted in what it read. Requires
	// upd.
	shared bool
	mu     sync.Mutex // a leaf lock
	imu    sync.Mutex // serialises index writes; a leaf lock
}

// areaStore is the store the area reads and writes: inner, seen through
// the wrapper that keeps a Served's hold-back from closing it, so that
// its optional interfaces (store.LocalUpdater, store.LocalsReader) show.
func areaStore(inner store.Store) (store.Store, store.LocalUpdater) {
	if n, ok := inner.(noClose); ok {
		inner = n.Store
	}
	u, _ := inner.(store.LocalUpdater)
	return inner, u
}

func decodeHolding(b []byte) (holdingDoc, error) {
	var h holdingDoc
	if err := json.Unmarshal(b, &h); err != nil {
		return holdingDoc{}, fmt.Errorf("holdback: holding document: %w: %v", engine.ErrMalformed, err)
	}
	for rev, hb := range h.Revs {
		if _, _, ok := splitRev(rev); !ok || !json.Valid(hb.Body) {
			return holdingDoc{}, fmt.Errorf("holdback: holding document: revision %q: %w", rev, engine.ErrMalformed)
		}
	}
	if h.Revs == nil {
		h.Revs = map[string]heldBody{}
	}
	return h, nil
}

func decodeIndex(b []byte) (indexDoc, error) {
	var ix indexDoc
	if err := json.Unmarshal(b, &ix); err != nil {
		return indexDoc{}, fmt.Errorf("holdback: holding index: %w: %v", engine.ErrMalformed, err)
	}
	return ix, nil
}

// get reads the held revisions of doc; none is not an error.
func (a *area) get(ctx context.Context, doc string) (holdingDoc, error) {
	b, err := a.inner.GetLocal(ctx, localDocPrefix+doc)
	if errors.Is(err, engine.ErrNotFound) {
		return holdingDoc{Revs: map[string]heldBody{}}, nil
	}
	if err != nil {
		return holdingDoc{}, err
	}
	return decodeHolding(b)
}

// update applies fn to the held revisions of doc and writes the result
// if fn reports a change; emptied reports that fn changed them and none
// is left.
func (a *area) update(ctx context.Context, doc string, fn func(h *holdingDoc) bool) (emptied bool, err error) {
	if a.upd != nil {
		err := a.upd.UpdateLocal(ctx, localDocPrefix+doc, func(old json.RawMessage) (json.RawMessage, error) {
			emptied = false // set afresh: the store may run this again
			h := holdingDoc{Revs: map[string]heldBody{}}
			if old != nil {
				var err error
				if h, err = decodeHolding(old); err != nil {
					return nil, err
				}
			}
			if !fn(&h) {
				return old, nil
			}
			if len(h.Revs) == 0 {
				emptied = true
				return nil, nil // deleted
			}
			return json.Marshal(h)
		})
		return emptied, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	h, err := a.get(ctx, doc)
	if err != nil {
		return false, err
	}
	if !fn(&h) {
		return false, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return false, err
	}
	return len(h.Revs) == 0, a.inner.PutLocal(ctx, localDocPrefix+doc, b)
}

// add keeps revs of doc, held for owner, in the holding area. The caller
// then indexes doc (Store.writeIndex).
func (a *area) add(ctx context.Context, doc, owner string, revs map[string]heldBody) error {
	_, err := a.update(ctx, doc, func(h *holdingDoc) bool {
		h.Owner = owner
		maps.Copy(h.Revs, revs)
		return true
	})
	return err
}

// remove drops the revisions of doc for which drop is true. With a
// LocalUpdater, a document this leaves with none also leaves the index.
func (a *area) remove(ctx context.Context, doc string, drop func(rev string) bool) error {
	changed := false
	emptied, err := a.update(ctx, doc, func(h *holdingDoc) bool {
		n := len(h.Revs)
		maps.DeleteFunc(h.Revs, func(rev string, _ heldBody) bool { return drop(rev) })
		if len(h.Revs) == 0 {
			h.Owner = ""
		}
		changed = len(h.Revs) != n // set afresh: the store may run this again
		return changed
	})
	switch {
	case err != nil || a.upd == nil:
		return err
	case emptied:
		return a.unindex(ctx, []string{doc})
	case changed && a.shared:
		return a.changeIndex(ctx, func(map[string]struct{}) bool { return true })
	}
	return nil
}

// changeIndex applies fn to the indexed documents in one UpdateLocal
// (an unreadable index is replaced); a change of a shared area's index
// counts in its Gen.
func (a *area) changeIndex(ctx context.Context, fn func(docs map[string]struct{}) bool) error {
	return a.upd.UpdateLocal(ctx, localIndex, func(old json.RawMessage) (json.RawMessage, error) {
		set := map[string]struct{}{}
		var gen uint64
		if old != nil {
			if ix, err := decodeIndex(old); err == nil {
				for _, d := range ix.Docs {
					set[d] = struct{}{}
				}
				gen = ix.Gen
			}
		}
		if !fn(set) {
			return old, nil
		}
		ix := indexDoc{Docs: slices.Sorted(maps.Keys(set))}
		if a.shared {
			ix.Gen = gen + 1
		}
		return json.Marshal(ix)
	})
}

// indexAdd puts docs in the index (LocalUpdater only); in a shared area
// it counts a change even when they were indexed already (a hold wrote
// their holding documents).
func (a *area) indexAdd(ctx context.Context, docs []string) error {
	if len(docs) == 0 {
		return nil
	}
	return a.changeIndex(ctx, func(set map[string]struct{}) bool {
		n := len(set)
		for _, d := range docs {
			set[d] = struct{}{}
		}
		return len(set) != n || a.shared
	})
}

// unindex takes docs, whose holding documents were seen with no
// revision, out of the index, then puts back those that gained
// revisions meanwhile (LocalUpdater only; see area).
func (a *area) unindex(ctx context.Context, docs []string) error {
	err := a.changeIndex(ctx, func(set map[string]struct{}) bool {
		n := len(set)
		for _, d := range docs {
			delete(set, d)
		}
		return len(set) != n
	})
	if err != nil {
		return err
	}
	got, err := a.getMany(ctx, docs)
	if err != nil {
		return err
	}
	var back []string
	for _, d := range docs {
		if h, ok := got[d]; ok && (h.err != nil || len(h.doc.Revs) > 0) {
			back = append(back, d) // unreadable: left for resume to report
		}
	}
	return a.indexAdd(ctx, back)
}

// held is a holding document as read, or why it cannot be.
type held struct {
	doc holdingDoc
	err error // engine.ErrMalformed
}

// getMany reads the holding documents of docs in one read where the
// store allows it; an absent one is not in the map.
func (a *area) getMany(ctx context.Context, docs []string) (map[string]held, error) {
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = localDocPrefix + d
	}
	raw, err := store.GetLocals(ctx, a.inner, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]held, len(raw))
	for _, d := range docs {
		if b, ok := raw[localDocPrefix+d]; ok {
			h, err := decodeHolding(b)
			out[d] = held{h, err}
		}
	}
	return out, nil
}

// writeIndex stores docs (any order) as the index.
func (a *area) writeIndex(ctx context.Context, docs func() []string) error {
	a.imu.Lock()
	defer a.imu.Unlock()
	list := docs() // read under imu: the last write holds the latest set
	slices.Sort(list)
	b, err := json.Marshal(indexDoc{Docs: list})
	if err != nil {
		return err
	}
	return a.inner.PutLocal(ctx, localIndex, b)
}

// readIndex returns the indexed documents (none when there is no index)
// and the purgatory's state (nil when none was saved), read together.
func (a *area) readIndex(ctx context.Context) ([]string, json.RawMessage, error) {
	got, err := store.GetLocals(ctx, a.inner, []string{localIndex, localState})
	if err != nil {
		return nil, nil, err
	}
	b, ok := got[localIndex]
	if !ok {
		return nil, got[localState], nil
	}
	ix, err := decodeIndex(b)
	return ix.Docs, got[localState], err
}

// reserved reports a _local id the Store keeps for itself.
// Leases (lease.Prefix) are reserved too: a client could otherwise take
// or forge the hunt's lease of a shared database.
func reserved(id string) bool {
	return strings.HasPrefix(id, LocalPrefix) || strings.HasPrefix(id, lease.Prefix)
}
