package holdback

import (
	"context"
	"encoding/json"
	"maps"
	"slices"

	"github.com/livesync-go/livesync-go/engine/store"
)

// The holding area changed for many documents at once: a pushed batch
// holds many notes, and one batch of chunks releases many. With a
// LocalUpdater the holding documents change in one store.UpdateLocals
// (one transaction where the store allows it) and the index in one
// more, instead of two or three writes per document.

// updateMany applies fn to the held revisions of each of docs (sorted,
// distinct) and writes those fn reports changed; emptied lists the
// documents fn changed and left with none.
func (a *area) updateMany(ctx context.Context, docs []string, fn func(doc string, h *holdingDoc) bool) (emptied, changed []string, err error) {
	if a.upd == nil {
		for _, doc := range docs {
			e, err := a.update(ctx, doc, func(h *holdingDoc) bool { return fn(doc, h) })
			if err != nil {
				return nil, nil, err
			}
			if e {
				emptied = append(emptied, doc)
			}
		}
		return emptied, nil, nil
	}
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = localDocPrefix + d
	}
	err = store.UpdateLocals(ctx, a.upd, ids, func(id string, old json.RawMessage) (json.RawMessage, error) {
		doc := id[len(localDocPrefix):]
		if id == ids[0] { // set afresh: the store may run this again
			emptied, changed = emptied[:0], changed[:0]
		}
		h := holdingDoc{Revs: map[string]heldBody{}}
		if old != nil {
			var err error
			if h, err = decodeHolding(old); err != nil {
				return nil, err
			}
		}
		if !fn(doc, &h) {
			return old, nil
		}
		changed = append(changed, doc)
		if len(h.Revs) == 0 {
			emptied = append(emptied, doc)
			return nil, nil // deleted
		}
		return json.Marshal(h)
	})
	return emptied, changed, err
}

// addMany keeps the revisions of each document of bodies, held for its
// owner, in the holding area. The caller then indexes the documents
// (Store.writeIndex).
func (a *area) addMany(ctx context.Context, bodies map[string]map[string]heldBody, owners map[string]string) error {
	_, _, err := a.updateMany(ctx, slices.Sorted(maps.Keys(bodies)), func(doc string, h *holdingDoc) bool {
		h.Owner = owners[doc]
		maps.Copy(h.Revs, bodies[doc])
		return true
	})
	return err
}

// removeMany drops, for each document of upTo, its revisions not newer
// than the one named (late binding: a released revision takes the older
// ones with it). With a LocalUpdater, a document this leaves with none
// also leaves the index.
func (a *area) removeMany(ctx context.Context, upTo map[string]string, older func(r, rev string) bool) error {
	emptied, changed, err := a.updateMany(ctx, slices.Sorted(maps.Keys(upTo)), func(doc string, h *holdingDoc) bool {
		n := len(h.Revs)
		maps.DeleteFunc(h.Revs, func(r string, _ heldBody) bool { return older(r, upTo[doc]) })
		if len(h.Revs) == 0 {
			h.Owner = ""
		}
		return len(h.Revs) != n
	})
	switch {
	case err != nil || a.upd == nil:
		return err
	case len(emptied) > 0: // unindex changes the index, counted in a shared area's Gen
		return a.unindex(ctx, emptied)
	case len(changed) > 0 && a.shared:
		return a.changeIndex(ctx, func(map[string]struct{}) bool { return true })
	}
	return nil
}
