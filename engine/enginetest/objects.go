package enginetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
)

// MemObjects is a journal bucket kept in memory: a journalsync.Objects
// (adapters/minio.Bucket is the real one) holding object keys and bodies
// under one prefix, with failures injected per call and calls counted for
// tests that assert how often the bucket was asked. The zero value is not
// usable; call NewMemObjects. It is safe for concurrent use.
//
// It follows the port exactly: List skips names starting "_" and orders
// keys by journal.ComparePackKeys, Get of an absent key wraps
// engine.ErrNotFound, Put is create-only (engine.ErrExists, which is
// journalsync.ErrExists) except that storing the very body already stored
// succeeds. Unlike S3 it never pages: a listing is one answer.
type MemObjects struct {
	prefix, id string

	mu       sync.Mutex
	objs     map[string][]byte
	failList func(n int) error      // consulted by every List, n counts them from 1
	failGet  map[string]error       // Get of that key fails with this error
	failPut  func(key string) error // consulted before every Put
	onGet    func(key string)       // called at the start of every Get
	lists    int                    // List calls
	gets     map[string]int         // Get calls per key
	puts     []string               // keys created by Put, in order
	refused  []string               // keys Put refused with ErrExists, in order
}

// NewMemObjects returns an empty bucket whose keys start with prefix. id
// is its ID; "" gives an ID naming the prefix.
func NewMemObjects(prefix, id string) *MemObjects {
	if id == "" {
		id = "memory:" + prefix
	}
	return &MemObjects{prefix: prefix, id: id, objs: map[string][]byte{}, failGet: map[string]error{}, gets: map[string]int{}}
}

// Prefix returns the prefix every key starts with.
func (m *MemObjects) Prefix() string { return m.prefix }

// ID returns the id given to NewMemObjects.
func (m *MemObjects) ID() string { return m.id }

// List returns the keys under the prefix that sort after `after` in byte
// order (S3's StartAfter), without names starting "_", ordered by
// journal.ComparePackKeys. A failure set with FailList is returned as it is.
func (m *MemObjects) List(ctx context.Context, after string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lists++
	if m.failList != nil {
		if err := m.failList(m.lists); err != nil {
			return nil, err
		}
	}
	return m.packKeys(after), nil
}

func (m *MemObjects) packKeys(after string) []string {
	var keys []string
	for k := range m.objs {
		name, ok := strings.CutPrefix(k, m.prefix)
		if ok && k > after && journal.IsPackListingCandidate(name) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, journal.ComparePackKeys)
	return keys
}

// Get returns a copy of the object's body; an absent key is an
// *engine.Error wrapping engine.ErrNotFound with StageStorage, as the S3
// adapter answers NoSuchKey (a missing bucket would also wrap
// engine.ErrNoDatabase; inject one with FailGet). The hook set with OnGet
// runs first, outside the bucket's lock, so it may block.
func (m *MemObjects) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	hook := m.onGet
	m.mu.Unlock()
	if hook != nil {
		hook(key)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gets[key]++
	if err := m.failGet[key]; err != nil {
		return nil, err
	}
	b, ok := m.objs[key]
	if !ok {
		return nil, &engine.Error{Op: "get object", DocID: key, Stage: engine.StageStorage, Err: fmt.Errorf("memory bucket: no such key: %w", engine.ErrNotFound)}
	}
	return bytes.Clone(b), nil
}

// Put creates key with a copy of body. An existing key is refused with an
// *engine.Error wrapping engine.ErrExists unless it holds exactly body
// (the port's exception for a retried call whose answer was lost), which
// succeeds without creating anything. A failure set with FailPut is
// returned before anything is stored.
func (m *MemObjects) Put(ctx context.Context, key string, body []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failPut != nil {
		if err := m.failPut(key); err != nil {
			return err
		}
	}
	if old, ok := m.objs[key]; ok {
		if bytes.Equal(old, body) {
			return nil
		}
		m.refused = append(m.refused, key)
		return &engine.Error{Op: "put object", DocID: key, Stage: engine.StageStorage, Err: fmt.Errorf("memory bucket: %w", engine.ErrExists)}
	}
	m.objs[key] = bytes.Clone(body)
	m.puts = append(m.puts, key)
	return nil
}

// Set stores body under key as it is, replacing what was there, as
// another writer (or a hostile one) could.
func (m *MemObjects) Set(key string, body []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[key] = bytes.Clone(body)
}

// Object returns a copy of key's body and whether it exists.
func (m *MemObjects) Object(key string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[key]
	return bytes.Clone(b), ok
}

// Body returns a copy of key's body, nil if it does not exist.
func (m *MemObjects) Body(key string) []byte {
	b, _ := m.Object(key)
	return b
}

// Remove deletes key, as a wipe of the bucket would.
func (m *MemObjects) Remove(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, key)
}

// Keys returns every stored key, prefix included, in byte order.
func (m *MemObjects) Keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := make([]string, 0, len(m.objs))
	for k := range m.objs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// PackKeys returns what List(ctx, "") would, without counting a call or
// consulting FailList.
func (m *MemObjects) PackKeys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.packKeys("")
}

// FailList makes every later List consult f with the 1-based number of
// the call; a non-nil answer is List's error. nil clears it.
func (m *MemObjects) FailList(f func(n int) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failList = f
}

// FailGet makes Get of key fail with err; a nil err clears it.
func (m *MemObjects) FailGet(key string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		delete(m.failGet, key)
	} else {
		m.failGet[key] = err
	}
}

// FailPut makes every later Put consult f, under the bucket's lock, before
// storing; a non-nil answer is Put's error. nil clears it.
func (m *MemObjects) FailPut(f func(key string) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failPut = f
}

// OnGet makes every later Get call f with its key first (outside the
// bucket's lock: f may block). nil clears it.
func (m *MemObjects) OnGet(f func(key string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onGet = f
}

// Lists returns the number of List calls so far.
func (m *MemObjects) Lists() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lists
}

// Gets returns the number of Get calls for key so far.
func (m *MemObjects) Gets(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gets[key]
}

// TotalGets returns the number of Get calls so far, for any key.
func (m *MemObjects) TotalGets() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.gets {
		n += c
	}
	return n
}

// Puts returns the keys Put created, in order.
func (m *MemObjects) Puts() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.puts)
}

// Refused returns the keys Put refused because they existed, in order.
func (m *MemObjects) Refused() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.refused)
}
