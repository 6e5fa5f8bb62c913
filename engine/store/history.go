package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"sort"
)

// Revision history: the bodies of earlier (non-leaf) revisions, kept in
// BucketBodies as Options.KeepBodies says until Compact drops them, and
// the revs limit that SetRevsLimit changes. CouchDB keeps every body until
// a database is compacted; LiveSync's file-history view reads them
// (revs_info, then each available rev).

// bodyKey is the BucketBodies key of one revision's body:
// uvarint(len(id)) ‖ id ‖ rev, unambiguous for any id.
func bodyKey(id, rev string) []byte {
	k := binary.AppendUvarint(make([]byte, 0, len(id)+len(rev)+2), uint64(len(id)))
	k = append(k, id...)
	return append(k, rev...)
}

// bodyOf returns n's body: in the record for a leaf, in BucketBodies for
// an earlier revision kept for history; nil if it is not stored. The
// slice is valid only during tx.
func bodyOf(tx Tx, id string, n *node) []byte {
	if n.Body != nil {
		return n.Body
	}
	if n.Kept {
		return tx.Get(BucketBodies, bodyKey(id, n.Rev))
	}
	return nil
}

// history applies the body policy and the revs limit to rec before it is
// stored: the body of a revision that is no longer a leaf moves to
// BucketBodies (or is dropped when no body is kept), stemmed revisions
// lose theirs, and with KeepBodies N > 0 only the N newest earlier bodies
// stay.
func (w *writer) history(id string, rec *record) error {
	ps := rec.parents()
	for i := range rec.Nodes {
		n := &rec.Nodes[i]
		if n.Body == nil {
			continue
		}
		if _, inner := ps[n.Rev]; !inner {
			continue
		}
		if w.keep != 0 {
			if err := w.tx.Put(BucketBodies, bodyKey(id, n.Rev), n.Body); err != nil {
				return err
			}
			n.Kept = true
		}
		n.Body = nil
	}
	for _, rev := range rec.stem(w.limit) {
		if err := w.tx.Delete(BucketBodies, bodyKey(id, rev)); err != nil {
			return err
		}
	}
	if w.keep <= 0 {
		return nil
	}
	var kept []int
	for i := range rec.Nodes {
		if rec.Nodes[i].Kept {
			kept = append(kept, i)
		}
	}
	if len(kept) <= w.keep {
		return nil
	}
	sort.Slice(kept, func(a, b int) bool { return newer(rec.Nodes[kept[a]].Rev, rec.Nodes[kept[b]].Rev) })
	for _, i := range kept[w.keep:] {
		if err := w.tx.Delete(BucketBodies, bodyKey(id, rec.Nodes[i].Rev)); err != nil {
			return err
		}
		rec.Nodes[i].Kept = false
	}
	return nil
}

// newer orders revisions newest first: higher generation, then the
// greater hash.
func newer(a, b string) bool {
	ga, ha := revGen(a)
	gb, hb := revGen(b)
	if ga != gb {
		return ga > gb
	}
	return ha > hb
}

// revInfo is one entry of _revs_info.
type revInfo struct {
	Rev    string `json:"rev"`
	Status string `json:"status"`
}

// revsInfo returns rev and its ancestors still in the tree, newest first,
// with CouchDB's status: "missing" without a body, else "deleted" for a
// deletion, else "available".
func (r *record) revsInfo(rev string) []revInfo {
	idx := r.index()
	var out []revInfo
	for cur := rev; cur != ""; {
		i, ok := idx[cur]
		if !ok {
			break
		}
		n := &r.Nodes[i]
		st := "available"
		switch {
		case !n.hasBody():
			st = "missing"
		case n.Deleted:
			st = "deleted"
		}
		out = append(out, revInfo{Rev: n.Rev, Status: st})
		cur = n.Parent
	}
	return out
}

// appendRevsInfo adds "_revs_info" as the last field of a built document.
func appendRevsInfo(doc []byte, info []revInfo) []byte {
	enc, _ := json.Marshal(info)
	doc = bytes.TrimSuffix(doc, []byte{'}'})
	if len(doc) > 1 {
		doc = append(doc, ',')
	}
	doc = append(doc, `"_revs_info":`...)
	doc = append(doc, enc...)
	return append(doc, '}')
}

// compactBatch is how many documents one Compact transaction looks at, so
// that writers wait for one batch, never for the whole store.
const compactBatch = 256

func (s *kvStore) Compact(ctx context.Context) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	var from []byte
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var next []byte
		done := false
		err := s.b.Update(func(tx Tx) error {
			limit := s.revsLimit(tx)
			type doc struct {
				id  string
				rec *record
			}
			var todo []doc
			var ferr error
			n := 0
			err := tx.Ascend(BucketDocs, from, func(k, v []byte) bool {
				if n == compactBatch {
					return false
				}
				n++
				next = append(bytes.Clone(k), 0) // the least key after k
				rec, err := decodeRecord(bytes.Clone(v))
				if err != nil {
					ferr = corruptRecord(k, err)
					return false
				}
				if len(rec.Nodes) > limit || rec.hasKept() {
					todo = append(todo, doc{string(k), rec})
				}
				return true
			})
			if err == nil {
				err = ferr
			}
			if err != nil {
				return err
			}
			done = n < compactBatch
			for _, d := range todo {
				before, changed := len(d.rec.Nodes), false
				for i := range d.rec.Nodes {
					nd := &d.rec.Nodes[i]
					if !nd.Kept {
						continue
					}
					if err := tx.Delete(BucketBodies, bodyKey(d.id, nd.Rev)); err != nil {
						return err
					}
					nd.Kept, changed = false, true
				}
				d.rec.stem(limit) // nothing is Kept any more
				if !changed && len(d.rec.Nodes) == before {
					continue
				}
				enc, err := encodeRecord(d.rec)
				if err != nil {
					return err
				}
				// In place: the sequence stays, the feed does not change.
				if err := tx.Put(BucketDocs, []byte(d.id), enc); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return storageErr("compact", err)
		}
		if done {
			return nil
		}
		from = next
	}
}

// hasKept reports whether any revision's body is in BucketBodies.
func (r *record) hasKept() bool {
	for i := range r.Nodes {
		if r.Nodes[i].Kept {
			return true
		}
	}
	return false
}

func (s *kvStore) RevsLimit(ctx context.Context) (int, error) {
	if err := s.begin(ctx); err != nil {
		return 0, err
	}
	var n int
	err := s.view("revs limit", func(tx Tx) error {
		n = s.revsLimit(tx)
		return nil
	})
	return n, err
}

func (s *kvStore) SetRevsLimit(ctx context.Context, n int) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if n < 1 {
		return invalid("revs limit %d: it must be at least 1", n)
	}
	err := s.b.Update(func(tx Tx) error { return tx.Put(BucketMeta, metaRevsLimit, seqKey(uint64(n))) })
	if err != nil {
		return storageErr("set revs limit", err)
	}
	return nil
}
