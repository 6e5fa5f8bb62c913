package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/holdback"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/wasm/workers/d1kv"
)

// The hold-back keeps its holding area in the inner store's _local
// documents (engine/holdback/area.go): one document per held note with
// its held bodies by revision, and an index that lists those notes, each
// written as a whole after a read. In a process that owns its store one
// hold-back writes them; in a Worker every request runs its own, and two
// requests (two isolates) may hold or release at the same moment. Their
// blind writes would lose each other's revisions: the index written by
// one would drop the note the other just held, and a holding document
// rewritten from an older read would drop a revision the other added.
// So the scope's inner store writes these documents by merging, in one
// D1 transaction each (d1kv's Update, serialisable across isolates):
//
//   - a holding document: the revisions this hold-back added since it
//     last read the document are added to what D1 has now, those it
//     removed are removed, and any other revision stays; when revisions
//     remain, the note is added to the index in the same transaction;
//   - the index: the notes it lists now and those this hold-back lists,
//     less those whose holding document has no revision left.
//
// The purgatory's state stays last-write-wins: a hold-back resuming it
// holds again every body of the holding area that the state lacks.
const (
	holdingPrefix = holdback.LocalPrefix + "doc/"
	holdingIndex  = holdback.LocalPrefix + "index"
)

// areaDatabases are a scope's d1kv databases whose stores merge the
// holding area's writes.
type areaDatabases struct {
	dbs *d1kv.Databases
	x   d1kv.Exec
}

var _ couchapi.Databases = areaDatabases{}

func (a areaDatabases) Open(ctx context.Context, name string) (store.Store, error) {
	st, err := a.dbs.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return &areaStore{Store: st, x: a.x, db: name, base: map[string]json.RawMessage{}}, nil
}

func (a areaDatabases) Create(ctx context.Context, name string) error { return a.dbs.Create(ctx, name) }
func (a areaDatabases) Delete(ctx context.Context, name string) error { return a.dbs.Delete(ctx, name) }
func (a areaDatabases) List(ctx context.Context) ([]string, error)    { return a.dbs.List(ctx) }

// Close closes the d1kv databases (couchapi.HeldDatabases closes its
// inner Databases when it is an io.Closer).
func (a areaDatabases) Close() error { return a.dbs.Close() }

// areaStore is one database's d1kv store, as the hold-back sees it.
type areaStore struct {
	store.Store
	x  d1kv.Exec
	db string

	mu   sync.Mutex
	be   *d1kv.Backend              // for the merging writes; opened at the first
	base map[string]json.RawMessage // holding document id → as last read or written (nil: absent)
	read bool                       // the hold-back's documents were read ahead
	pre  map[string][]byte          // read ahead, each served once (nil: absent)
	// listed are the notes the index listed when it was read ahead.
	listed []string
}

// GetLocal reads a _local document and remembers a holding document as
// read, the base of its next write. The first read of the index reads
// ahead what the hold-back reads next as it resumes (see readAhead).
func (s *areaStore) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	if id == holdingIndex {
		s.readAhead(ctx)
	}
	s.mu.Lock()
	v, ahead := s.pre[id]
	delete(s.pre, id)
	s.mu.Unlock()
	var b json.RawMessage
	var err error
	switch {
	case !ahead:
		b, err = s.Store.GetLocal(ctx, id)
	case v == nil:
		err = fmt.Errorf("get local %q: %w", id, engine.ErrNotFound)
	default:
		b = v
	}
	if strings.HasPrefix(id, holdingPrefix) && (err == nil || errors.Is(err, engine.ErrNotFound)) {
		s.mu.Lock()
		s.base[id] = bytes.Clone(b)
		s.mu.Unlock()
	}
	return b, err
}

// PutLocal writes a _local document; the holding area's are merged with
// what D1 has (see above).
func (s *areaStore) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	s.mu.Lock()
	delete(s.pre, id)
	s.mu.Unlock()
	switch {
	case id == holdingIndex:
		return s.mergeIndex(ctx, doc)
	case strings.HasPrefix(id, holdingPrefix):
		return s.mergeHolding(ctx, id, doc)
	}
	return s.Store.PutLocal(ctx, id, doc)
}

// Close closes the store and the merging backend.
func (s *areaStore) Close() error {
	s.mu.Lock()
	be := s.be
	s.mu.Unlock()
	if be != nil {
		be.Close()
	}
	return s.Store.Close()
}

// update runs fn in a D1 transaction of the database, the _local
// documents named by keys read ahead in one query per 98.
func (s *areaStore) update(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.be == nil {
		be, err := d1kv.New(s.x, s.db)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		s.be = be
	}
	be := s.be
	s.mu.Unlock()
	ks := make([][]byte, len(keys))
	for i, k := range keys {
		ks[i] = []byte(k)
	}
	if err := be.Prefetch(store.BucketLocal, ks); err != nil {
		return err
	}
	return be.Update(fn)
}

// holding is a holding document: its revisions are kept as raw JSON,
// and fields this code does not know are kept as written.
type holding struct {
	fields map[string]json.RawMessage
	revs   map[string]json.RawMessage
}

// parseHolding reads a holding document; nil or absent is empty.
func parseHolding(b []byte) (holding, error) {
	h := holding{fields: map[string]json.RawMessage{}, revs: map[string]json.RawMessage{}}
	if len(b) == 0 {
		return h, nil
	}
	if err := json.Unmarshal(b, &h.fields); err != nil {
		return h, err
	}
	if r, ok := h.fields["revs"]; ok && string(r) != "null" {
		if err := json.Unmarshal(r, &h.revs); err != nil {
			return h, err
		}
	}
	if h.revs == nil {
		h.revs = map[string]json.RawMessage{}
	}
	return h, nil
}

func (h holding) marshal() ([]byte, error) {
	out := maps.Clone(h.fields)
	r, err := json.Marshal(h.revs)
	if err != nil {
		return nil, err
	}
	out["revs"] = r
	return json.Marshal(out)
}

// mergeHolding writes the holding document id: what D1 has now, with the
// revisions added and removed since base (the last read) applied, and
// the fields (the owner) of doc unless only others' revisions remain
// (their owner stays). A document
// that keeps revisions is put in the index in the same transaction.
func (s *areaStore) mergeHolding(ctx context.Context, id string, doc json.RawMessage) error {
	mine, err := parseHolding(doc)
	if err != nil {
		return s.Store.PutLocal(ctx, id, doc) // not the shape this code knows: as written
	}
	s.mu.Lock()
	base, _ := parseHolding(s.base[id])
	s.mu.Unlock()
	note := strings.TrimPrefix(id, holdingPrefix)
	var wrote []byte
	err = s.update(ctx, []string{id, holdingIndex}, func(tx store.Tx) error {
		now, err := parseHolding(tx.Get(store.BucketLocal, []byte(id)))
		if err != nil {
			now, _ = parseHolding(nil) // unreadable: this write replaces it
		}
		for rev := range base.revs {
			if _, kept := mine.revs[rev]; !kept {
				delete(now.revs, rev)
			}
		}
		maps.Copy(now.revs, mine.revs)
		if len(mine.revs) > 0 || len(now.revs) == 0 {
			now.fields = mine.fields
		}
		b, err := now.marshal()
		if err != nil {
			return err
		}
		if err := tx.Put(store.BucketLocal, []byte(id), b); err != nil {
			return err
		}
		wrote = b
		if len(now.revs) == 0 {
			return nil
		}
		return indexAdd(tx, note)
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.base[id] = wrote
	s.mu.Unlock()
	return nil
}

// index is the holding index's shape (engine/holdback/area.go).
type index struct {
	Docs []string `json:"docs"`
}

func readIndex(tx store.Tx) []string {
	var ix index
	if b := tx.Get(store.BucketLocal, []byte(holdingIndex)); b != nil {
		_ = json.Unmarshal(b, &ix) // unreadable: rebuilt from the notes named since
	}
	return ix.Docs
}

func writeIndex(tx store.Tx, docs []string) error {
	slices.Sort(docs)
	b, err := json.Marshal(index{Docs: slices.Compact(docs)})
	if err != nil {
		return err
	}
	return tx.Put(store.BucketLocal, []byte(holdingIndex), b)
}

// indexAdd puts note in the index, if it is not there.
func indexAdd(tx store.Tx, note string) error {
	docs := readIndex(tx)
	if slices.Contains(docs, note) {
		return nil
	}
	return writeIndex(tx, append(docs, note))
}

// mergeIndex writes the index: the notes D1's lists and those doc lists,
// less those whose holding document has no revision.
func (s *areaStore) mergeIndex(ctx context.Context, doc json.RawMessage) error {
	var mine index
	if err := json.Unmarshal(doc, &mine); err != nil {
		return s.Store.PutLocal(ctx, holdingIndex, doc) // not the shape this code knows: as written
	}
	keys := []string{holdingIndex}
	s.mu.Lock()
	for _, note := range append(s.listed, mine.Docs...) {
		keys = append(keys, holdingPrefix+note)
	}
	s.mu.Unlock()
	return s.update(ctx, keys, func(tx store.Tx) error {
		var keep []string
		for _, note := range slices.Compact(slices.Sorted(slices.Values(append(readIndex(tx), mine.Docs...)))) {
			h, err := parseHolding(tx.Get(store.BucketLocal, []byte(holdingPrefix+note)))
			if err != nil || len(h.revs) > 0 {
				keep = append(keep, note) // unreadable: the hold-back reports it when it resumes
			}
		}
		return writeIndex(tx, keep)
	})
}

// readAhead reads, once, the documents a hold-back reads as it opens:
// the index, the purgatory's state and every holding document the index
// lists. A d1kv read of a _local document costs two queries (the
// counters, then the row), one each for these would cost every request
// four queries and two more for each held note; read ahead they cost one
// query per 98 documents. Each is served once, to the read that follows
// (a read later in the request goes to D1 again); as a d1kv read, it
// sees what was committed before it. A failure leaves the reads to D1.
func (s *areaStore) readAhead(ctx context.Context) {
	s.mu.Lock()
	done := s.read
	s.read = true
	s.mu.Unlock()
	if done {
		return
	}
	got, err := s.readLocals(ctx, []string{holdingIndex, holdback.LocalPrefix + "purgatory"})
	if err != nil {
		return
	}
	var ix index
	if b := got[holdingIndex]; b != nil && json.Unmarshal(b, &ix) == nil && len(ix.Docs) > 0 {
		ids := make([]string, len(ix.Docs))
		for i, d := range ix.Docs {
			ids[i] = holdingPrefix + d
		}
		docs, err := s.readLocals(ctx, ids)
		if err != nil {
			return
		}
		maps.Copy(got, docs)
	}
	s.mu.Lock()
	s.pre, s.listed = got, ix.Docs
	s.mu.Unlock()
}

// readBatch is the most keys one read-ahead statement names (D1 binds
// at most 100 parameters).
const readBatch = 98

// readLocals reads _local documents of the database straight from
// d1kv's table (its schema: d1kv.Schema): id → value, nil if absent.
func (s *areaStore) readLocals(ctx context.Context, ids []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), readBatch)
		var q strings.Builder
		q.WriteString(`SELECT k, v FROM livesync_kv WHERE db = ?1 AND b = ?2 AND k IN (`)
		args := []any{s.db, int64(store.BucketLocal)}
		for i, id := range ids[:n] {
			if i > 0 {
				q.WriteString(", ")
			}
			fmt.Fprintf(&q, "?%d", i+3)
			args = append(args, []byte(id))
			out[id] = nil
		}
		q.WriteString(")")
		rows, err := s.x.Query(ctx, q.String(), args...)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if len(r) != 2 {
				return nil, errors.New("workers: a row of the wrong shape")
			}
			k, err := blob(r[0])
			if err != nil {
				return nil, err
			}
			v, err := blob(r[1])
			if err != nil {
				return nil, err
			}
			if _, asked := out[string(k)]; asked {
				out[string(k)] = v
			}
		}
		ids = ids[n:]
	}
	return out, nil
}

// blob is a BLOB column as an Exec returns it (d1kv.Exec: []byte, a
// string or an array of numbers).
func blob(v any) ([]byte, error) {
	switch v := v.(type) {
	case []byte:
		return bytes.Clone(v), nil
	case string:
		return []byte(v), nil
	case []any:
		out := make([]byte, len(v))
		for i, e := range v {
			f, ok := e.(float64)
			n, isInt := e.(int64)
			if isInt {
				f, ok = float64(n), true
			}
			if !ok || f < 0 || f > 255 || f != float64(byte(f)) {
				return nil, fmt.Errorf("workers: a BLOB element %v is not a byte", e)
			}
			out[i] = byte(f)
		}
		return out, nil
	}
	return nil, fmt.Errorf("workers: a value of type %T where a BLOB was expected", v)
}
