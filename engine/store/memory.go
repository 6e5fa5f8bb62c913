package store

import (
	"errors"
	"slices"
	"sort"
	"sync"
)

// NewMemory returns an empty Store held in memory: for wasm builds and
// tests. Its data is lost when the process ends.
func NewMemory(opts Options) (Store, error) {
	return Open(newMemBackend(), opts)
}

// NewMemoryBackend returns the empty in-memory Backend NewMemory uses,
// for a Store composed with Open (a test wrapping its transactions, for
// example).
func NewMemoryBackend() Backend { return newMemBackend() }

// memBackend is a Backend of Go maps. Update holds an exclusive lock and
// keeps an undo log so a failed transaction leaves nothing behind.
type memBackend struct {
	mu      sync.RWMutex
	buckets [NumBuckets]*memBucket
	closed  bool
}

type memBucket struct {
	m map[string][]byte
	// keys is the sorted key index for Ascend. It may hold deleted keys
	// (skipped) and, when !sorted, is rebuilt before use.
	idxMu   sync.Mutex
	keys    []string
	sorted  bool
	garbage int
}

var errMemClosed = errors.New("store: memory backend closed")

func newMemBackend() *memBackend {
	b := &memBackend{}
	for i := range b.buckets {
		b.buckets[i] = &memBucket{m: map[string][]byte{}, sorted: true}
	}
	return b
}

func (b *memBackend) View(fn func(Tx) error) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return errMemClosed
	}
	return fn(&memTx{b: b})
}

func (b *memBackend) Update(fn func(Tx) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errMemClosed
	}
	tx := &memTx{b: b, write: true}
	if err := fn(tx); err != nil {
		for i := len(tx.undo) - 1; i >= 0; i-- {
			u := tx.undo[i]
			if u.existed {
				b.buckets[u.bucket].set(u.key, u.prev)
			} else {
				b.buckets[u.bucket].del(u.key)
			}
		}
		return err
	}
	return nil
}

func (b *memBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

type undo struct {
	bucket  Bucket
	key     string
	prev    []byte
	existed bool
}

type memTx struct {
	b     *memBackend
	write bool
	undo  []undo
}

func (t *memTx) Get(b Bucket, key []byte) []byte { return t.b.buckets[b].m[string(key)] }

func (t *memTx) Put(b Bucket, key, value []byte) error {
	if !t.write {
		return errors.New("store: Put in a read-only transaction")
	}
	bk := t.b.buckets[b]
	k := string(key)
	prev, ok := bk.m[k]
	t.undo = append(t.undo, undo{bucket: b, key: k, prev: prev, existed: ok})
	bk.set(k, slices.Clone(value))
	return nil
}

func (t *memTx) Delete(b Bucket, key []byte) error {
	if !t.write {
		return errors.New("store: Delete in a read-only transaction")
	}
	bk := t.b.buckets[b]
	k := string(key)
	prev, ok := bk.m[k]
	if !ok {
		return nil
	}
	t.undo = append(t.undo, undo{bucket: b, key: k, prev: prev, existed: true})
	bk.del(k)
	return nil
}

func (bk *memBucket) set(k string, v []byte) {
	if _, ok := bk.m[k]; !ok {
		if !bk.sorted || (len(bk.keys) > 0 && k <= bk.keys[len(bk.keys)-1]) {
			bk.sorted = false
		}
		bk.keys = append(bk.keys, k)
	}
	bk.m[k] = v
}

func (bk *memBucket) del(k string) {
	if _, ok := bk.m[k]; ok {
		delete(bk.m, k)
		bk.garbage++
	}
}

func (t *memTx) Ascend(b Bucket, from []byte, fn func(k, v []byte) bool) error {
	bk := t.b.buckets[b]
	bk.idxMu.Lock()
	if !bk.sorted || bk.garbage > len(bk.keys)/2 {
		keys := make([]string, 0, len(bk.m))
		for k := range bk.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		bk.keys, bk.sorted, bk.garbage = keys, true, 0
	}
	keys := bk.keys
	bk.idxMu.Unlock()
	i := sort.SearchStrings(keys, string(from))
	for ; i < len(keys); i++ {
		v, ok := bk.m[keys[i]]
		if !ok {
			continue
		}
		if !fn([]byte(keys[i]), v) {
			break
		}
	}
	return nil
}
