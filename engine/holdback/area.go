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
}

// area is the holding area: held bodies in the inner store's _local
// documents, which are never in the changes feed, never in _all_docs and
// persisted with the store. mu serialises read-modify-write of the
// holding documents; it is a leaf lock.
type area struct {
	inner store.Store
	mu    sync.Mutex
	imu   sync.Mutex // serialises index writes; a leaf lock
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

// update applies fn to the held revisions of doc and writes the result.
func (a *area) update(ctx context.Context, doc string, fn func(h *holdingDoc) bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	h, err := a.get(ctx, doc)
	if err != nil {
		return err
	}
	if !fn(&h) {
		return nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return a.inner.PutLocal(ctx, localDocPrefix+doc, b)
}

// add keeps revs of doc, held for owner, in the holding area.
func (a *area) add(ctx context.Context, doc, owner string, revs map[string]heldBody) error {
	return a.update(ctx, doc, func(h *holdingDoc) bool {
		h.Owner = owner
		maps.Copy(h.Revs, revs)
		return true
	})
}

// remove drops the revisions of doc for which drop is true.
func (a *area) remove(ctx context.Context, doc string, drop func(rev string) bool) error {
	return a.update(ctx, doc, func(h *holdingDoc) bool {
		n := len(h.Revs)
		maps.DeleteFunc(h.Revs, func(rev string, _ heldBody) bool { return drop(rev) })
		if len(h.Revs) == 0 {
			h.Owner = ""
		}
		return len(h.Revs) != n
	})
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

// readIndex returns the indexed documents (none when there is no index).
func (a *area) readIndex(ctx context.Context) ([]string, error) {
	b, err := a.inner.GetLocal(ctx, localIndex)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ix, err := decodeIndex(b)
	if err != nil {
		return nil, err
	}
	return ix.Docs, nil
}

// reserved reports a _local id the Store keeps for itself.
func reserved(id string) bool { return strings.HasPrefix(id, LocalPrefix) }
