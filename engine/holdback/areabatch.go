package holdback

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/livesync-go/livesync-go/engine/rawjson"
	"github.com/livesync-go/livesync-go/engine/store"
)

// The holding area changed for many documents at once: a pushed batch
// holds many notes, and one batch of chunks releases many. With a
// LocalUpdater the holding documents change in one store.UpdateLocals
// instead of one write each; when that is one transaction (a
// store.LocalsUpdater), the index changes in it too, so a batch costs
// one write where it cost two or three per document.

// atomicMany reports whether updateMany changes the holding documents
// and the index in one transaction.
func (a *area) atomicMany() bool {
	_, ok := a.upd.(store.LocalsUpdater)
	return ok
}

// exclusive reports a holding area that is this Store's alone, over a
// store that changes many documents in one transaction: a
// store.LocalsUpdater is the engine's own store, which is not shared
// unless the area is marked shared (stores that other processes share,
// such as a Worker's D1 database, are seen as a store.LocalUpdater
// only). Released revisions then leave the area in gathered writes and
// held bodies are kept in memory too (see removals).
func (a *area) exclusive() bool { return a.atomicMany() && !a.shared }

// updateMany applies fn to the held revisions of each of docs (sorted,
// distinct) and writes those fn reports changed; emptied lists the
// documents fn changed and left with none, changed those it changed.
// With index set (atomicMany only), the index is then changed by index
// in the same transaction, given emptied and changed. empties, if set,
// reports from a holding document as stored that fn would leave it with
// no revision: it is then deleted without being decoded.
func (a *area) updateMany(ctx context.Context, docs []string, fn func(doc string, h *holdingDoc) bool,
	index func(emptied, changed []string) (add []string, remove map[string]bool, bump bool),
	empties func(doc string, old json.RawMessage) bool) (emptied, changed []string, err error) {
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
	ids := make([]string, 0, len(docs)+1)
	for _, d := range docs {
		ids = append(ids, localDocPrefix+d)
	}
	if index != nil {
		ids = append(ids, localIndex)
	}
	err = store.UpdateLocals(ctx, a.upd, ids, func(id string, old json.RawMessage) (json.RawMessage, error) {
		if id == ids[0] { // set afresh: the store may run this again
			emptied, changed = emptied[:0], changed[:0]
		}
		if id == localIndex {
			add, remove, bump := index(emptied, changed)
			if out, ok := a.editIndex(old, add, remove, bump); ok {
				return out, nil
			}
			return a.indexUpdate(old, func(set map[string]struct{}) bool {
				n := len(set)
				for _, d := range add {
					set[d] = struct{}{}
				}
				for d := range remove {
					delete(set, d)
				}
				return len(set) != n || (a.shared && bump)
			})
		}
		doc := id[len(localDocPrefix):]
		if old != nil && empties != nil && empties(doc, old) {
			changed, emptied = append(changed, doc), append(emptied, doc)
			return nil, nil // deleted
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

// indexUpdate is changeIndex's change of the index old by fn.
func (a *area) indexUpdate(old json.RawMessage, fn func(docs map[string]struct{}) bool) (json.RawMessage, error) {
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
}

// addMany keeps the revisions of each document of bodies, held for its
// owner, in the holding area, after taking out of each document of drop
// its revisions not newer than the one named there (removals of
// released revisions that waited: see removals); indexed reports that
// they were indexed in the same transaction (else the caller indexes
// them: Store.writeIndex).
func (a *area) addMany(ctx context.Context, bodies map[string]map[string]heldBody, owners, drop map[string]string) (indexed bool, err error) {
	docs := slices.Sorted(maps.Keys(bodies))
	all := docs
	if len(drop) > 0 {
		all = slices.Sorted(maps.Keys(drop))
		all = slices.Compact(slices.Sorted(slices.Values(append(all, docs...))))
	}
	var index func(emptied, _ []string) ([]string, map[string]bool, bool)
	if a.atomicMany() {
		index = func(emptied, _ []string) ([]string, map[string]bool, bool) {
			return docs, setOf(emptied), true
		}
	}
	emptied, _, err := a.updateMany(ctx, all, func(doc string, h *holdingDoc) bool {
		changed := false
		if rev, ok := drop[doc]; ok {
			n := len(h.Revs)
			maps.DeleteFunc(h.Revs, func(r string, _ heldBody) bool { return older(r, rev) })
			changed = len(h.Revs) != n
		}
		if revs, ok := bodies[doc]; ok {
			h.Owner = owners[doc]
			maps.Copy(h.Revs, revs)
			changed = true
		}
		if len(h.Revs) == 0 {
			h.Owner = ""
		}
		return changed
	}, index, func(doc string, old json.RawMessage) bool {
		rev, ok := drop[doc]
		if _, add := bodies[doc]; !ok || add {
			return false
		}
		return heldRevs(old, func(r string) bool { return older(r, rev) })
	})
	if err == nil && index == nil && a.upd != nil && len(emptied) > 0 {
		err = a.unindex(ctx, emptied)
	}
	return index != nil, err
}

// setOf returns the set of docs.
func setOf(docs []string) map[string]bool {
	set := make(map[string]bool, len(docs))
	for _, d := range docs {
		set[d] = true
	}
	return set
}

// removeMany drops, for each document of upTo, its revisions not newer
// than the one named (late binding: a released revision takes the older
// ones with it). With a LocalUpdater, a document this leaves with none
// also leaves the index.
func (a *area) removeMany(ctx context.Context, upTo map[string]string, older func(r, rev string) bool) error {
	return a.removeWhere(ctx, slices.Sorted(maps.Keys(upTo)), func(doc, r string) bool { return older(r, upTo[doc]) })
}

// removeWhere drops the revisions of docs (sorted, distinct) for which
// drop is true. With a LocalUpdater, a document this leaves with none
// also leaves the index.
func (a *area) removeWhere(ctx context.Context, docs []string, drop func(doc, rev string) bool) error {
	var index func(emptied, changed []string) ([]string, map[string]bool, bool)
	if a.atomicMany() {
		index = func(emptied, changed []string) ([]string, map[string]bool, bool) {
			return nil, setOf(emptied), len(changed) > 0
		}
	}
	emptied, changed, err := a.updateMany(ctx, docs, func(doc string, h *holdingDoc) bool {
		n := len(h.Revs)
		maps.DeleteFunc(h.Revs, func(r string, _ heldBody) bool { return drop(doc, r) })
		if len(h.Revs) == 0 {
			h.Owner = ""
		}
		return len(h.Revs) != n
	}, index, func(doc string, old json.RawMessage) bool {
		return heldRevs(old, func(r string) bool { return drop(doc, r) })
	})
	switch {
	case err != nil || a.upd == nil || index != nil:
		return err
	case len(emptied) > 0: // unindex changes the index, counted in a shared area's Gen
		return a.unindex(ctx, emptied)
	case len(changed) > 0 && a.shared:
		return a.changeIndex(ctx, func(map[string]struct{}) bool { return true })
	}
	return nil
}

// heldRevs reports that the holding document b (as stored) has
// revisions and drop is true for every one of them; false when not, or
// when it cannot tell without decoding b.
func heldRevs(b json.RawMessage, drop func(rev string) bool) bool {
	var revs []byte
	if !rawjson.Members(b, func(k, v []byte) bool {
		if string(k) == "revs" {
			revs = v
		}
		return true
	}) || len(revs) == 0 {
		return false
	}
	n, all := 0, true
	ok := rawjson.Members(revs, func(k, _ []byte) bool {
		n++
		all = drop(string(k))
		return all
	})
	return ok && all && n > 0
}

// editIndex is indexUpdate for a batch that adds the documents add
// (sorted) to the index b and takes out those of remove, without
// decoding the index: its ids are kept as the raw JSON strings they are
// (sorted, as indexUpdate writes them) and merged. ok is false when b is
// not an index this can edit so (absent, an id with an escape, out of
// order); indexUpdate does it then.
func (a *area) editIndex(b json.RawMessage, add []string, remove map[string]bool, bump bool) (out json.RawMessage, ok bool) {
	var docs, gen []byte
	if b == nil || !rawjson.Members(b, func(k, v []byte) bool {
		switch string(k) {
		case "docs":
			docs = v
		case "gen":
			gen = v
		}
		return true
	}) || len(docs) == 0 {
		return nil, false
	}
	var buf bytes.Buffer
	buf.Grow(len(b) + 64*len(add))
	buf.WriteString(`{"docs":[`)
	n, changed, prev, first := 0, false, "", true
	put := func(raw []byte) {
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(raw)
		n++
	}
	putDoc := func(doc string) bool {
		q, err := json.Marshal(doc)
		if err != nil || bytes.IndexByte(q, '\\') >= 0 {
			return false
		}
		put(q)
		changed = true
		return true
	}
	bad := false // an element this cannot edit: fn stops the walk
	fine := rawjson.Elements(docs, func(e []byte) bool {
		if len(e) < 2 || e[0] != '"' || bytes.IndexByte(e, '\\') >= 0 {
			bad = true
			return false
		}
		id := string(e[1 : len(e)-1])
		if id <= prev && !first {
			bad = true // out of order
			return false
		}
		prev, first = id, false
		for len(add) > 0 && add[0] <= id {
			if add[0] != id && !putDoc(add[0]) {
				bad = true
				return false
			}
			add = add[1:]
		}
		if remove[id] {
			changed = true
			return true
		}
		put(e)
		return true
	})
	if !fine || bad {
		return nil, false
	}
	for _, doc := range add {
		if !putDoc(doc) {
			return nil, false
		}
	}
	if !changed && !(a.shared && bump) {
		return b, true
	}
	buf.WriteByte(']')
	if a.shared {
		var g uint64
		if len(gen) > 0 {
			if json.Unmarshal(gen, &g) != nil {
				return nil, false
			}
		}
		fmt.Fprintf(&buf, `,"gen":%d`, g+1)
	}
	buf.WriteByte('}')
	return buf.Bytes(), true
}
