//go:build js && wasm

package idb

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"syscall/js"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// tx is a transaction of the Backend. A write transaction records its
// writes (the last of each key) and shows them to its own reads.
type tx struct {
	b     *Backend
	write bool
	ops   []op
	index map[string]int // cacheKey → ops index
	err   error          // the first read that failed; fails the transaction
}

// op is the last write of one key in a transaction.
type op struct {
	bucket     store.Bucket
	key, value []byte
	del        bool
}

// cacheKey is the IndexedDB key of key in bucket b: b ‖ key.
func cacheKey(b store.Bucket, key []byte) string {
	return string(append([]byte{byte(b)}, key...))
}

func (t *tx) Get(b store.Bucket, key []byte) []byte {
	k := cacheKey(b, key)
	if i, ok := t.index[k]; ok {
		return t.ops[i].value // nil when deleted
	}
	if t.err != nil {
		return nil
	}
	v, err := t.b.get(k)
	if err != nil {
		t.err = err
		return nil
	}
	return v
}

func (t *tx) Put(b store.Bucket, key, value []byte) error {
	if !t.write {
		return fmt.Errorf("idb: Put in a read-only transaction")
	}
	if value == nil {
		value = []byte{} // nil means absent to Get
	}
	t.record(op{bucket: b, key: key, value: value})
	return nil
}

func (t *tx) Delete(b store.Bucket, key []byte) error {
	if !t.write {
		return fmt.Errorf("idb: Delete in a read-only transaction")
	}
	t.record(op{bucket: b, key: slices.Clone(key), del: true}) // a deleted key may be reused by the caller
	return nil
}

func (t *tx) record(o op) {
	if t.index == nil {
		t.index = map[string]int{}
	}
	k := cacheKey(o.bucket, o.key)
	if i, ok := t.index[k]; ok {
		t.ops[i] = o
		return
	}
	t.index[k] = len(t.ops)
	t.ops = append(t.ops, o)
}

// Ascend reads the bucket from IndexedDB in key order, in pages that
// grow, merged with the transaction's own writes (which win over what
// IndexedDB holds for the same key).
func (t *tx) Ascend(b store.Bucket, from []byte, fn func(key, value []byte) bool) error {
	if t.err != nil {
		return t.err
	}
	var mine []op // this transaction's writes in the range, in key order
	for _, o := range t.ops {
		if o.bucket == b && bytes.Compare(o.key, from) >= 0 {
			mine = append(mine, o)
		}
	}
	slices.SortFunc(mine, func(x, y op) int { return bytes.Compare(x.key, y.key) })
	// emit yields o unless deleted; false when fn asked to stop.
	emit := func(o op) bool { return o.del || fn(o.key, o.value) }
	lower, open := u8([]byte(cacheKey(b, from))), false
	upper := u8([]byte{byte(b) + 1})
	for n := firstPage; ; n = min(2*n, lastPage) {
		recs, last, err := t.b.page(lower, open, upper, n)
		if err != nil {
			return err
		}
		for _, r := range recs {
			for len(mine) > 0 && bytes.Compare(mine[0].key, r.key) < 0 {
				if !emit(mine[0]) {
					return nil
				}
				mine = mine[1:]
			}
			if len(mine) > 0 && bytes.Equal(mine[0].key, r.key) {
				continue // shadowed; emitted when the loop above reaches it
			}
			if n == firstPage {
				// A short scan's records are often read next (a listing's
				// first entries); a long scan's would only churn the cache.
				t.b.cache.put(cacheKey(b, r.key), r.value, true)
			}
			if !fn(r.key, r.value) {
				return nil
			}
		}
		if len(recs) < n {
			break
		}
		lower, open = last, true
	}
	for _, o := range mine {
		if !emit(o) {
			return nil
		}
	}
	return nil
}

// kv is a record read by Ascend: its key without the bucket byte.
type kv struct{ key, value []byte }

// page reads up to n records with keys in (or from) lower up to upper
// (excluded) in one readonly transaction; last is the last one's
// IndexedDB key.
func (b *Backend) page(lower js.Value, open bool, upper js.Value, n int) (recs []kv, last js.Value, err error) {
	var req js.Value
	err = catch(func() {
		query := js.Global().Get("IDBKeyRange").Call("bound", lower, upper, open, true)
		tx := b.db.Call("transaction", objectStore, "readonly")
		req = tx.Call("objectStore", objectStore).Call("getAll", query, n)
	})
	if err != nil {
		return nil, js.Undefined(), err
	}
	res, err := request(req)
	if err != nil {
		return nil, js.Undefined(), err
	}
	count := res.Get("length").Int()
	recordsRead.Add(int64(count))
	data := copyAll(nil, res, count) // not reused: fn's slices live until the transaction ends
	recs = make([]kv, count)
	var key []byte
	for i := range recs {
		key, recs[i].value, data, err = unframe(data)
		if err != nil {
			return nil, js.Undefined(), err
		}
		recs[i].key = key[1:]
	}
	if len(data) != 0 {
		return nil, js.Undefined(), errMalformed
	}
	if count > 0 {
		last = u8(key)
	}
	return recs, last, nil
}

var errMalformed = fmt.Errorf("idb: a stored record is not framed as this package writes it: %w", engine.ErrMalformed)

// unframe splits one framed record (uvarint(len(key)) ‖ key ‖
// uvarint(len(value)) ‖ value, key = bucket ‖ the store's key) off data.
func unframe(data []byte) (key, value, rest []byte, err error) {
	key, rest, ok := field(data)
	if !ok || len(key) == 0 || key[0] >= store.NumBuckets {
		return nil, nil, nil, errMalformed
	}
	value, rest, ok = field(rest)
	if !ok {
		return nil, nil, nil, errMalformed
	}
	return key, value, rest, nil
}

// get returns the committed value of the IndexedDB key k, nil if absent:
// from the cache, or read from IndexedDB and cached.
func (b *Backend) get(k string) ([]byte, error) {
	if v, ok := b.cache.get(k); ok {
		return v, nil
	}
	var req js.Value
	err := catch(func() {
		tx := b.db.Call("transaction", objectStore, "readonly")
		req = tx.Call("objectStore", objectStore).Call("get", u8([]byte(k)))
	})
	if err != nil {
		return nil, err
	}
	res, err := request(req)
	if err != nil {
		return nil, err
	}
	if res.IsUndefined() {
		b.cache.put(k, nil, false)
		return nil, nil
	}
	recordsRead.Add(1)
	data := copyAll(nil, js.Global().Get("Array").Call("of", res), 1)
	key, value, rest, err := unframe(data)
	if err != nil || len(rest) != 0 || string(key) != k {
		return nil, errMalformed
	}
	b.cache.put(k, value, true)
	return value, nil
}

// cacheLimit is about how many bytes of keys and values the cache keeps;
// past it, it forgets about half its entries.
var cacheLimit = 32 << 20

// cache is the committed value (or absence) of keys read or written,
// kept coherent by Update (the only writer, with one handle per
// database).
type cache struct {
	mu   sync.Mutex
	m    map[string][]byte // nil: absent
	size int
}

const entryOverhead = 64 // map entry, string and slice headers

func (c *cache) get(k string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *cache) put(k string, v []byte, present bool) {
	if present && v == nil {
		v = []byte{}
	} else if !present {
		v = nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string][]byte{}
	}
	if old, ok := c.m[k]; ok {
		c.size -= len(k) + len(old) + entryOverhead
	}
	c.m[k] = v
	c.size += len(k) + len(v) + entryOverhead
	if c.size > cacheLimit {
		for k, v := range c.m { // map order: about random
			delete(c.m, k)
			c.size -= len(k) + len(v) + entryOverhead
			if c.size <= cacheLimit/2 {
				break
			}
		}
	}
}

func (c *cache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m, c.size = nil, 0
}

// prefetchMax is the most keys one prefetch transaction reads.
const prefetchMax = 1024

// Prefetch reads the committed values of the keys of bucket bk the cache
// lacks, in IndexedDB transactions whose requests all run at once (one
// wait each, rather than one per key), so that a transaction about to
// Get them finds them cached. The store calls it where it knows the keys
// ahead (a batch of a pull). A failure leaves the keys to Get.
func (b *Backend) Prefetch(bk store.Bucket, keys [][]byte) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return store.ErrClosed
	}
	var miss []string
	seen := map[string]bool{}
	for _, key := range keys {
		k := cacheKey(bk, key)
		if _, ok := b.cache.get(k); !ok && !seen[k] {
			seen[k] = true
			miss = append(miss, k)
		}
	}
	for len(miss) > 0 {
		n := min(len(miss), prefetchMax)
		if err := b.prefetch(miss[:n]); err != nil {
			return err
		}
		miss = miss[n:]
	}
	return nil
}

func (b *Backend) prefetch(keys []string) error {
	reqs := make([]js.Value, len(keys))
	var t js.Value
	err := catch(func() {
		t = b.db.Call("transaction", objectStore, "readonly")
		os := t.Call("objectStore", objectStore)
		for i, k := range keys {
			reqs[i] = os.Call("get", u8([]byte(k)))
		}
	})
	if err != nil {
		return err
	}
	ch, stop := listen(t, "oncomplete", "onabort")
	ev := <-ch
	stop()
	if ev.name == "onabort" {
		return domError(t.Get("error"))
	}
	var buf []byte
	for i, k := range keys {
		res := reqs[i].Get("result")
		if res.IsUndefined() {
			b.cache.put(k, nil, false)
			continue
		}
		recordsRead.Add(1)
		buf = copyAll(buf[len(buf):], js.Global().Get("Array").Call("of", res), 1)
		key, value, rest, err := unframe(buf)
		if err != nil || len(rest) != 0 || string(key) != k {
			return errMalformed
		}
		b.cache.put(k, value, true)
	}
	return nil
}
