package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/livesync-go/livesync-go/engine"
)

// Meta keys of BucketMeta.
var (
	metaSeq       = []byte("seq")        // last sequence, 8-byte big endian
	metaCount     = []byte("docs")       // documents whose winner is not deleted
	metaRevsLimit = []byte("revs_limit") // SetRevsLimit's value; absent: Options.RevsLimit
)

// kvStore implements Store over a Backend.
type kvStore struct {
	b    Backend
	opts Options

	mu     sync.Mutex
	closed bool
	notify chan struct{} // closed and replaced after each write
}

// Open returns a Store kept in b. The Store owns b and closes it on Close.
func Open(b Backend, opts Options) (Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &kvStore{b: b, opts: opts, notify: make(chan struct{})}, nil
}

func storageErr(op string, err error) error {
	if errors.Is(err, ErrClosed) {
		return err
	}
	return &engine.Error{Op: op, Stage: engine.StageStorage, Err: err}
}

// begin checks ctx and whether the store is open.
func (s *kvStore) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

func (s *kvStore) wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		close(s.notify)
		s.notify = make(chan struct{})
	}
}

func (s *kvStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.notify)
	s.mu.Unlock()
	return s.b.Close()
}

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

func getUint(tx Tx, key []byte) uint64 {
	v := tx.Get(BucketMeta, key)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// loadRecord reads the record of id, nil if there is none. The bodies of
// its nodes are valid only during tx.
func loadRecord(tx Tx, id string) (*record, error) {
	v := tx.Get(BucketDocs, []byte(id))
	if v == nil {
		return nil, nil
	}
	r, err := decodeRecord(v)
	if err != nil {
		return nil, corruptRecord([]byte(id), err)
	}
	return r, nil
}

func (r *record) live() bool {
	if r == nil {
		return false
	}
	w := r.winner()
	return w >= 0 && !r.Nodes[w].Deleted
}

// revsLimit returns the revs limit in force in tx.
func (s *kvStore) revsLimit(tx Tx) int {
	if n := getUint(tx, metaRevsLimit); n > 0 {
		return int(n)
	}
	return s.opts.revsLimit()
}

// writer carries the counters and settings of one write transaction.
type writer struct {
	tx    Tx
	seq   uint64
	count uint64
	limit int // revs limit
	keep  int // Options.KeepBodies
	wrote bool
}

func (s *kvStore) newWriter(tx Tx) *writer {
	return &writer{tx: tx, seq: getUint(tx, metaSeq), count: getUint(tx, metaCount),
		limit: s.revsLimit(tx), keep: s.opts.KeepBodies}
}

// save stores rec under sequence seq (taken with w.seq++); wasLive is
// whether the document's winner was live before the change.
func (w *writer) save(id string, rec *record, wasLive bool, seq uint64) error {
	if err := w.history(id, rec); err != nil {
		return err
	}
	if isLive := rec.live(); isLive != wasLive {
		if isLive {
			w.count++
		} else {
			w.count--
		}
	}
	if rec.Seq != 0 {
		if err := w.tx.Delete(BucketSeqs, seqKey(rec.Seq)); err != nil {
			return err
		}
	}
	rec.Seq = seq
	enc, err := encodeRecord(rec)
	if err != nil {
		return err
	}
	if err := w.tx.Put(BucketSeqs, seqKey(rec.Seq), []byte(id)); err != nil {
		return err
	}
	w.wrote = true
	return w.tx.Put(BucketDocs, []byte(id), enc)
}

func (w *writer) finish() error {
	if !w.wrote {
		return nil
	}
	if err := w.tx.Put(BucketMeta, metaSeq, seqKey(w.seq)); err != nil {
		return err
	}
	return w.tx.Put(BucketMeta, metaCount, seqKey(w.count))
}

// update runs fn in a write transaction and wakes Changes waiters if
// anything was written.
func (s *kvStore) update(op string, fn func(w *writer) error) error {
	var wrote bool
	err := s.b.Update(func(tx Tx) error {
		w := s.newWriter(tx)
		if err := fn(w); err != nil {
			return err
		}
		wrote = w.wrote
		return w.finish()
	})
	if err != nil {
		return storageErr(op, err)
	}
	if wrote {
		s.wake()
	}
	return nil
}

// prefetch tells a Prefetcher backend the documents a transaction is
// about to read.
func (s *kvStore) prefetch(ids []string) {
	p, ok := s.b.(Prefetcher)
	if !ok || len(ids) < 2 {
		return
	}
	keys := make([][]byte, len(ids))
	for i, id := range ids {
		keys[i] = []byte(id)
	}
	_ = p.Prefetch(BucketDocs, keys) // a hint: the transaction's Gets read what it did not
}

func (s *kvStore) view(op string, fn func(tx Tx) error) error {
	if err := s.b.View(fn); err != nil {
		return storageErr(op, err)
	}
	return nil
}

func (s *kvStore) Info(ctx context.Context) (engine.EndpointInfo, error) {
	if err := s.begin(ctx); err != nil {
		return engine.EndpointInfo{}, err
	}
	info := engine.EndpointInfo{Name: s.opts.Name}
	err := s.view("info", func(tx Tx) error {
		info.UpdateSeq = strconv.FormatUint(getUint(tx, metaSeq), 10)
		info.DocCount = int64(getUint(tx, metaCount))
		return nil
	})
	return info, err
}

// batch holds the records one write transaction changes, each loaded
// once and saved once at the end however many documents of the call name
// it, so a call repeating one id is not quadratic in its length.
type batch struct {
	w     *writer
	recs  map[string]*pending
	order []string // ids in the order of their first change
}

type pending struct {
	rec     *record // never nil; no nodes for a new document
	wasLive bool
	seq     uint64 // the sequence of its last change; 0 unchanged
}

func (w *writer) batch() *batch { return &batch{w: w, recs: map[string]*pending{}} }

// load returns the pending record of id.
func (b *batch) load(id string) (*pending, error) {
	if p, ok := b.recs[id]; ok {
		return p, nil
	}
	var rec *record
	if v := b.w.tx.Get(BucketDocs, []byte(id)); v != nil {
		// A copy: the record's bodies outlive the Put that replaces it.
		var err error
		if rec, err = decodeRecord(bytes.Clone(v)); err != nil {
			return nil, corruptRecord([]byte(id), err)
		}
	}
	p := &pending{rec: rec, wasLive: rec.live()}
	if p.rec == nil {
		p.rec = &record{}
	}
	b.recs[id] = p
	return p, nil
}

// changed marks p, the record of id, to be saved. Each change takes a
// sequence, as if each were saved on its own: the record is saved once,
// under the sequence of its last change.
func (b *batch) changed(id string, p *pending) {
	if p.seq == 0 {
		b.order = append(b.order, id)
	}
	b.w.seq++
	p.seq = b.w.seq
}

// flush saves the changed records.
func (b *batch) flush() error {
	for _, id := range b.order {
		p := b.recs[id]
		if err := b.w.save(id, p.rec, p.wasLive, p.seq); err != nil {
			return err
		}
	}
	return nil
}

// parseBatch parses the documents of a batch before anything is written:
// a document that cannot be parsed, or has a reserved or too long id
// (or, with replicated, no _rev), gets a bad_request result and ok false.
// A replicated document's result carries its _rev already.
func parseBatch(docs []json.RawMessage, replicated bool) (results []engine.BulkDocResult, parsed []inDoc, ok []bool) {
	results = make([]engine.BulkDocResult, len(docs))
	parsed = make([]inDoc, len(docs))
	ok = make([]bool, len(docs))
	for i, raw := range docs {
		d, err := parseDoc(raw)
		if err == nil {
			err = checkID(d.ID)
		}
		if err == nil && replicated && d.Rev == "" {
			err = invalid("new_edits=false needs _rev")
		}
		results[i].ID = d.ID
		if err != nil {
			results[i].Error, results[i].Reason = "bad_request", err.Error()
			continue
		}
		if replicated {
			results[i].Rev = d.Rev
		}
		parsed[i], ok[i] = d, true
	}
	return results, parsed, ok
}

// BulkDocs writes replicated revisions (new_edits=false) in one
// transaction. A document that cannot be parsed gets an error result
// ("bad_request") and is not written; the others are.
func (s *kvStore) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	results, parsed, ok := parseBatch(docs, true)
	ids := make([]string, 0, len(parsed))
	for i := range parsed {
		if ok[i] {
			ids = append(ids, parsed[i].ID)
		}
	}
	s.prefetch(ids)
	err := s.update("bulk docs", func(w *writer) error {
		b := w.batch()
		for i := range parsed {
			if !ok[i] {
				continue
			}
			d := &parsed[i]
			p, err := b.load(d.ID)
			if err != nil {
				return err
			}
			if p.rec.mergePath(d.Path, d.Deleted, d.Body) {
				b.changed(d.ID, p)
			}
		}
		return b.flush()
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// edit applies a new edit (new_edits=true) to p's record and marks it
// changed. prev "" with the document live is a conflict. body is
// canonical (as json.Marshal writes a json.RawMessage); data, when not
// nil, is what chunkData reads of it.
func (s *kvStore) edit(b *batch, id string, p *pending, prev string, deleted bool, body []byte, data *string) (string, error) {
	rec := p.rec
	exists := len(rec.Nodes) > 0
	parent := ""
	gen := 0
	switch {
	case prev == "" && !exists:
	case prev == "":
		if rec.live() {
			return "", ErrConflict
		}
		parent = rec.Nodes[rec.winner()].Rev
	default:
		if !exists {
			return "", ErrConflict
		}
		isLeaf := false
		for _, l := range rec.leaves() {
			if rec.Nodes[l].Rev == prev {
				isLeaf = true
			}
		}
		if !isLeaf {
			return "", ErrConflict
		}
		parent = prev
	}
	if parent != "" {
		gen, _ = revGen(parent)
	}
	rev := strconv.Itoa(gen+1) + "-" + newRevHash(id, parent, deleted, body, data)
	if rec.find(rev) >= 0 {
		return rev, nil
	}
	rec.add(node{Rev: rev, Parent: parent, Deleted: deleted, Body: body, canon: true})
	b.changed(id, p)
	return rev, nil
}

func (s *kvStore) Put(ctx context.Context, doc json.RawMessage) (string, error) {
	if err := s.begin(ctx); err != nil {
		return "", err
	}
	d, err := parseDoc(doc)
	if err == nil {
		err = checkID(d.ID)
	}
	if err != nil {
		return "", err
	}
	var rev string
	var conflict error
	err = s.update("put", func(w *writer) error {
		conflict = nil // a backend may run fn again (Backend.Update)
		b := w.batch()
		p, err := b.load(d.ID)
		if err != nil {
			return err
		}
		rev, err = s.edit(b, d.ID, p, d.Rev, d.Deleted, d.Body, nil)
		if errors.Is(err, ErrConflict) {
			conflict = fmt.Errorf("put %q: %w", d.ID, err)
			return nil
		}
		if err != nil {
			return err
		}
		return b.flush()
	})
	if err != nil {
		return "", err
	}
	if conflict != nil {
		return "", conflict
	}
	return rev, nil
}

// PutBatch writes local edits of several documents in one transaction.
func (s *kvStore) PutBatch(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	results, parsed, ok := parseBatch(docs, false)
	err := s.update("put batch", func(w *writer) error {
		b := w.batch()
		for i := range parsed {
			if !ok[i] {
				continue
			}
			d := &parsed[i]
			// A backend may run fn again (Backend.Update): each run
			// starts this document's result afresh.
			results[i].Rev, results[i].Error, results[i].Reason = "", "", ""
			p, err := b.load(d.ID)
			if err != nil {
				return err
			}
			rev, err := s.edit(b, d.ID, p, d.Rev, d.Deleted, d.Body, nil)
			switch {
			case errors.Is(err, ErrConflict):
				results[i].Error, results[i].Reason = "conflict", "Document update conflict."
			case err != nil:
				return err
			default:
				results[i].Rev = rev
			}
		}
		return b.flush()
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

func (s *kvStore) Get(ctx context.Context, id string, opts GetOptions) (json.RawMessage, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	var out json.RawMessage
	err := s.view("get", func(tx Tx) error {
		rec, err := loadRecord(tx, id)
		if err != nil || rec == nil {
			return err
		}
		leaves := rec.leaves()
		if len(leaves) == 0 {
			return nil
		}
		i := leaves[0]
		if opts.Rev != "" {
			i = rec.find(opts.Rev)
		} else if rec.Nodes[i].Deleted {
			return nil
		}
		if i < 0 || !rec.Nodes[i].hasBody() {
			return nil
		}
		n := &rec.Nodes[i]
		body := bodyOf(tx, id, n)
		if body == nil {
			return nil
		}
		var revs []string
		var start int
		if opts.Revs {
			start, revs = rec.history(n.Rev)
		}
		var conflicts []string
		if opts.Conflicts && n.Rev == rec.Nodes[leaves[0]].Rev {
			for _, l := range leaves[1:] {
				if !rec.Nodes[l].Deleted {
					conflicts = append(conflicts, rec.Nodes[l].Rev)
				}
			}
		}
		out = buildDoc(id, n.Rev, n.Deleted, body, revs, start, conflicts)
		if opts.RevsInfo {
			out = appendRevsInfo(out, rec.revsInfo(n.Rev))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, fmt.Errorf("get %q: %w", id, engine.ErrNotFound)
	}
	return out, nil
}

func (s *kvStore) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, 0, len(revs))
	ids := make([]string, len(revs))
	for i, dr := range revs {
		ids[i] = dr.ID
	}
	s.prefetch(ids)
	err := s.view("bulk get", func(tx Tx) error {
		cache := map[string]*record{}
		for _, dr := range revs {
			rec, seen := cache[dr.ID]
			if !seen {
				var err error
				if rec, err = loadRecord(tx, dr.ID); err != nil {
					return err
				}
				cache[dr.ID] = rec
			}
			if rec == nil {
				continue
			}
			i := -1
			if dr.Rev == "" {
				i = rec.winner()
			} else {
				i = rec.find(dr.Rev)
			}
			if i < 0 || !rec.Nodes[i].hasBody() {
				continue
			}
			n := &rec.Nodes[i]
			body := bodyOf(tx, dr.ID, n)
			if body == nil {
				continue
			}
			start, ids := rec.history(n.Rev)
			out = append(out, buildDoc(dr.ID, n.Rev, n.Deleted, body, ids, start, nil))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *kvStore) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	ids := make([]string, 0, len(revs))
	for id := range revs {
		ids = append(ids, id)
	}
	s.prefetch(ids)
	err := s.view("revs diff", func(tx Tx) error {
		for id, list := range revs {
			rec, err := loadRecord(tx, id)
			if err != nil {
				return err
			}
			seen := map[string]bool{}
			for _, r := range list {
				if seen[r] {
					continue
				}
				seen[r] = true
				if rec == nil || rec.find(r) < 0 {
					out[id] = append(out[id], r)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func parseSeq(since string) (uint64, error) {
	if since == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(since, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("store: changes: since %q is not a sequence of this store: %w", since, engine.ErrMalformed)
	}
	return n, nil
}

func (s *kvStore) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	if err := s.begin(ctx); err != nil {
		return engine.ChangesPage{}, err
	}
	since, err := parseSeq(req.Since)
	if err != nil {
		return engine.ChangesPage{}, err
	}
	sel, err := parseSelector(req.Selector)
	if err != nil {
		return engine.ChangesPage{}, err
	}
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return engine.ChangesPage{}, ErrClosed
		}
		ch := s.notify
		s.mu.Unlock()
		page, last, err := s.scan(since, req.Limit, sel)
		if err != nil || len(page.Results) > 0 || !req.Wait {
			return page, err
		}
		since = last
		select {
		case <-ch:
		case <-ctx.Done():
			return engine.ChangesPage{}, ctx.Err()
		}
	}
}

func (s *kvStore) scan(since uint64, limit int, sel selector) (engine.ChangesPage, uint64, error) {
	page := engine.ChangesPage{Results: []engine.Change{}}
	last := since
	more := false
	err := s.view("changes", func(tx Tx) error {
		var ferr error
		err := tx.Ascend(BucketSeqs, seqKey(since+1), func(k, v []byte) bool {
			if limit > 0 && len(page.Results) >= limit {
				more = true
				return false
			}
			seq := binary.BigEndian.Uint64(k)
			id := string(v)
			rec, err := loadRecord(tx, id)
			if err != nil || rec == nil {
				ferr = fmt.Errorf("changes: seq %d names %q: %v", seq, id, err)
				return false
			}
			last = seq
			leaves := rec.leaves()
			w := &rec.Nodes[leaves[0]]
			if sel != nil {
				var fields map[string]json.RawMessage
				if json.Unmarshal(w.Body, &fields) != nil || fields == nil {
					fields = map[string]json.RawMessage{}
				}
				idJSON, _ := json.Marshal(id)
				revJSON, _ := json.Marshal(w.Rev)
				fields["_id"], fields["_rev"] = idJSON, revJSON
				if w.Deleted {
					fields["_deleted"] = json.RawMessage("true")
				}
				if !sel.match(fields) {
					return true
				}
			}
			c := engine.Change{Seq: strconv.FormatUint(seq, 10), ID: id, Deleted: w.Deleted,
				Revs: make([]string, len(leaves))}
			for i, l := range leaves {
				c.Revs[i] = rec.Nodes[l].Rev
			}
			page.Results = append(page.Results, c)
			return true
		})
		if err == nil {
			err = ferr
		}
		if err == nil && !more {
			// Nothing after last: the feed's end is the update seq.
			if u := getUint(tx, metaSeq); u > last {
				last = u
			}
		}
		return err
	})
	if err != nil {
		return engine.ChangesPage{}, since, err
	}
	page.LastSeq = strconv.FormatUint(last, 10)
	if more {
		page.Pending = -1
	}
	return page, last, nil
}

func (s *kvStore) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	var out json.RawMessage
	err := s.view("get local", func(tx Tx) error {
		if v := tx.Get(BucketLocal, []byte(id)); v != nil {
			out = bytes.Clone(v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, fmt.Errorf("get local %q: %w", id, engine.ErrNotFound)
	}
	return out, nil
}

func (s *kvStore) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if id == "" || !json.Valid(doc) {
		return invalid("local document %q", id)
	}
	if len(id) > MaxLocalIDLength {
		return invalid("_local id is %d bytes, over the limit of %d: use a shorter id", len(id), MaxLocalIDLength)
	}
	v := bytes.Clone(doc)
	err := s.b.Update(func(tx Tx) error { return tx.Put(BucketLocal, []byte(id), v) })
	if err != nil {
		return storageErr("put local", err)
	}
	return nil
}

func (s *kvStore) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	out := make(map[engine.ChunkID]engine.Chunk, len(ids))
	s.prefetch(ids)
	err := s.view("get chunks", func(tx Tx) error {
		for _, id := range ids {
			rec, err := loadRecord(tx, id)
			if err != nil {
				return err
			}
			if !rec.live() {
				continue
			}
			data, ok := chunkField(rec.Nodes[rec.winner()].Body)
			if !ok {
				return &engine.Error{Op: "get chunks", DocID: id, Stage: engine.StageDecode, Err: engine.ErrMalformed}
			}
			out[id] = engine.Chunk{ID: id, Data: data}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *kvStore) PutChunks(ctx context.Context, chunks []engine.Chunk) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	bodies := make([][]byte, len(chunks))
	for i, c := range chunks {
		if err := checkID(c.ID); err != nil {
			return err
		}
		bodies[i] = chunkBody(c.Data)
	}
	ids := make([]string, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID
	}
	s.prefetch(ids)
	return s.update("put chunks", func(w *writer) error {
		b := w.batch()
		for i, c := range chunks {
			p, err := b.load(c.ID)
			if err != nil {
				return err
			}
			if p.rec.live() {
				continue // content-addressed: already there
			}
			var data *string
			if utf8.ValidString(c.Data) {
				data = &c.Data // what chunkData reads back of bodies[i]
			}
			if _, err := s.edit(b, c.ID, p, "", false, bodies[i], data); err != nil {
				return err
			}
		}
		return b.flush()
	})
}

func (s *kvStore) AllDocs(ctx context.Context, opts AllDocsOptions) ([]DocInfo, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	var out []DocInfo
	err := s.view("all docs", func(tx Tx) error {
		var ferr error
		err := tx.Ascend(BucketDocs, []byte(opts.StartKey), func(k, v []byte) bool {
			id := string(k)
			if opts.EndKey != "" && id > opts.EndKey {
				return false
			}
			if opts.Limit > 0 && len(out) >= opts.Limit {
				return false
			}
			rec, err := decodeRecord(v)
			if err != nil {
				ferr = corruptRecord(k, err)
				return false
			}
			if w := rec.winner(); w >= 0 && !rec.Nodes[w].Deleted {
				out = append(out, DocInfo{ID: id, Rev: rec.Nodes[w].Rev})
			}
			return true
		})
		if err == nil {
			err = ferr
		}
		return err
	})
	return out, err
}
