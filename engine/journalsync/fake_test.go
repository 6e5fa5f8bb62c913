package journalsync

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
)

// memObjects is an in-memory Objects: a map of object keys to bodies
// under one prefix, with per-key error injection and call counts.
type memObjects struct {
	prefix, id string

	mu      sync.Mutex
	objs    map[string][]byte
	getErr  map[string]error       // Get of that key fails with this error
	putErr  func(key string) error // if set, consulted before every Put
	listErr error                  // List fails with this error
	gets    map[string]int         // Get calls per key
	lists   int                    // List calls
	puts    []string               // keys of successful Puts, in order
	taken   []string               // keys of Puts refused with ErrExists
	onGet   func(key string)       // if set, called at the start of every Get
}

var _ Objects = (*memObjects)(nil)

func newMemObjects(prefix string) *memObjects {
	return &memObjects{
		prefix: prefix, id: "http://127.0.0.1:9000,bucket" + prefix + ",auto",
		objs: map[string][]byte{}, getErr: map[string]error{}, gets: map[string]int{},
	}
}

func (m *memObjects) Prefix() string { return m.prefix }
func (m *memObjects) ID() string     { return m.id }

// List returns the keys under the prefix that sort after `after` in byte
// order (S3's StartAfter), without names starting "_", ordered by
// journal.ComparePackKeys. Unlike S3 it never pages: the whole listing is
// one answer.
func (m *memObjects) List(ctx context.Context, after string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lists++
	if m.listErr != nil {
		return nil, m.listErr
	}
	var keys []string
	for k := range m.objs {
		name, ok := strings.CutPrefix(k, m.prefix)
		if ok && k > after && journal.IsPackListingCandidate(name) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, journal.ComparePackKeys)
	return keys, nil
}

func (m *memObjects) Get(ctx context.Context, key string) ([]byte, error) {
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
	if err := m.getErr[key]; err != nil {
		return nil, err
	}
	b, ok := m.objs[key]
	if !ok {
		return nil, &engine.Error{Op: "get object", DocID: key, Stage: engine.StageProtocol, Err: fmt.Errorf("fake: no such key: %w", engine.ErrNotFound)}
	}
	return bytes.Clone(b), nil
}

// Put is create-only, as the port says: an existing key is ErrExists.
func (m *memObjects) Put(ctx context.Context, key string, body []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.putErr != nil {
		if err := m.putErr(key); err != nil {
			return err
		}
	}
	if _, ok := m.objs[key]; ok {
		m.taken = append(m.taken, key)
		return &engine.Error{Op: "put object", DocID: key, Stage: engine.StageStorage, Err: fmt.Errorf("fake: %w", ErrExists)}
	}
	m.objs[key] = bytes.Clone(body)
	m.puts = append(m.puts, key)
	return nil
}

// set stores an object as it is.
func (m *memObjects) set(key string, body []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[key] = bytes.Clone(body)
}

func (m *memObjects) get(key string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.objs[key])
}

func (m *memObjects) remove(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, key)
}

// packKeys returns the pack keys in listing order.
func (m *memObjects) packKeys() []string {
	keys, _ := m.List(context.Background(), "")
	m.mu.Lock()
	m.lists--
	m.mu.Unlock()
	return keys
}

func (m *memObjects) getCount(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gets[key]
}

func (m *memObjects) failGet(key string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		delete(m.getErr, key)
	} else {
		m.getErr[key] = err
	}
}

// totalGets counts every Get call.
func (m *memObjects) totalGets() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.gets {
		n += c
	}
	return n
}

func (m *memObjects) listCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lists
}

// transportErr is what an adapter returns after its own retries failed.
func transportErr(key string) error {
	return &engine.Error{Op: "get object", DocID: key, Stage: engine.StageTransport, Err: errors.New("fake: connection reset")}
}
