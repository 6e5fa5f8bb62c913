//go:build js && wasm

package idb

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"syscall/js"

	"github.com/livesync-go/livesync-go/engine/store"
)

const objectStore = "kv"

// The pages of Ascend's getAll grow from firstPage to lastPage records
// (variables for tests): a short scan reads little, a long one few times.
var (
	firstPage = 64
	lastPage  = 4096
)

// strict asks the host to flush a write transaction to disk before its
// complete event (hosts without the option ignore it).
var strict = js.ValueOf(map[string]any{"durability": "strict"})

// recordsRead counts the records read from IndexedDB (tests).
var recordsRead atomic.Int64

// Backend is a store.Backend over one IndexedDB database; see the package
// doc.
type Backend struct {
	name      string
	db        js.Value
	release   func() // ends the exclusivity
	closeOnce sync.Once
	// mu is held shared by View, exclusively by Update (until its
	// IndexedDB transaction completes) and Close: what IndexedDB holds
	// is the committed state whenever a View runs.
	mu     sync.RWMutex
	closed bool
	cache  cache
	// beforeCommit, set by tests, runs on each write transaction once its
	// requests are issued.
	beforeCommit func(tx js.Value)
}

// Open opens (creating it if absent) the IndexedDB database name. It
// reads no record: transactions read what they need. It fails with
// ErrBusy while another handle has the database open, and with an error
// wrapping engine.ErrUnsupported where the host has no IndexedDB.
func Open(ctx context.Context, name string) (store.Backend, error) {
	return open(ctx, name)
}

func open(ctx context.Context, name string) (_ *Backend, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	factory, err := indexedDB(name)
	if err != nil {
		return nil, err
	}
	release, locked, err := acquire(name)
	if err != nil {
		return nil, err
	}
	b := &Backend{name: name, release: release}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	if b.db, err = connect(factory, name, !locked); err != nil {
		return nil, err
	}
	return b, nil
}

// Delete deletes the database name and the replica in it. It fails with
// ErrBusy while a handle has it open.
func Delete(ctx context.Context, name string) error {
	factory, err := indexedDB(name)
	if err != nil {
		return err
	}
	release, locked, err := acquire(name)
	if err != nil {
		return err
	}
	defer release()
	if !locked {
		// Without Web Locks, the versionchange probe tells whether
		// another connection is open before the deletion is queued.
		db, err := connect(factory, name, true)
		if err != nil {
			return err
		}
		db.Call("close")
	}
	var req js.Value
	if err := catch(func() { req = factory.Call("deleteDatabase", name) }); err != nil {
		return err
	}
	ch, stop := listen(req, "onsuccess", "onerror", "onblocked")
	defer stop()
	select {
	case ev := <-ch:
		switch ev.name {
		case "onerror":
			return domError(req.Get("error"))
		case "onblocked":
			// The deletion stays queued until the other connection closes.
			return ErrBusy
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func indexedDB(name string) (js.Value, error) {
	if name == "" {
		return js.Value{}, errors.New("idb: the database needs a name")
	}
	f := js.Global().Get("indexedDB")
	if f.Type() != js.TypeObject {
		return js.Value{}, errNoIndexedDB
	}
	return f, nil
}

// View runs fn on the committed state: reads go through the cache to
// IndexedDB. A read that fails fails the View with its error, whatever
// fn returns.
func (b *Backend) View(fn func(store.Tx) error) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return store.ErrClosed
	}
	t := &tx{b: b}
	err := fn(t)
	if t.err != nil {
		return t.err // what fn returned may stem from the read that failed
	}
	return err
}

// Update runs fn, which sees its own writes over the committed state,
// recording what it writes; then it writes that set in one IndexedDB
// transaction and waits for its end. Only a completed transaction's
// writes reach the cache, so a failed or aborted one leaves nothing
// behind.
func (b *Backend) Update(fn func(store.Tx) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return store.ErrClosed
	}
	t := &tx{b: b, write: true}
	err := fn(t)
	if t.err != nil {
		return t.err // what fn returned may stem from the read that failed
	}
	if err != nil {
		return err
	}
	if len(t.ops) == 0 {
		return nil
	}
	if err := b.commit(t.ops); err != nil {
		return err
	}
	for _, o := range t.ops {
		b.cache.put(cacheKey(o.bucket, o.key), o.value, !o.del)
	}
	return nil
}

// Close waits for the Update in flight, closes the connection and lets
// another handle open the database.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closed = true
		b.cache.clear()
		b.mu.Unlock()
		if b.db.Type() == js.TypeObject {
			b.db.Call("close")
		}
		b.release()
	})
	return nil
}

// commit writes ops in one readwrite transaction and waits for its end.
// The records are framed in one buffer copied to the host at once; each
// key and value is a slice (a copy) of it.
func (b *Backend) commit(ops []op) error {
	type span struct{ frame, key, keyEnd, end int }
	spans := make([]span, len(ops))
	size := 0
	for _, o := range ops {
		size += 2*binary.MaxVarintLen64 + 1 + len(o.key) + len(o.value)
	}
	buf := make([]byte, 0, size)
	for i, o := range ops {
		s := &spans[i]
		s.frame = len(buf)
		if !o.del {
			buf = binary.AppendUvarint(buf, uint64(1+len(o.key)))
		}
		s.key = len(buf)
		buf = append(append(buf, byte(o.bucket)), o.key...)
		s.keyEnd = len(buf)
		if !o.del {
			buf = binary.AppendUvarint(buf, uint64(len(o.value)))
			buf = append(buf, o.value...)
		}
		s.end = len(buf)
	}
	data := u8(buf)
	var tx js.Value
	err := catch(func() {
		tx = b.db.Call("transaction", objectStore, "readwrite", strict)
		os := tx.Call("objectStore", objectStore)
		for i, o := range ops {
			s := spans[i]
			key := data.Call("slice", s.key, s.keyEnd)
			if o.del {
				os.Call("delete", key)
			} else {
				os.Call("put", data.Call("slice", s.frame, s.end), key)
			}
		}
	})
	if err != nil {
		if tx.Type() == js.TypeObject {
			catch(func() { tx.Call("abort") })
		}
		return err
	}
	ch, stop := listen(tx, "oncomplete", "onabort")
	defer stop()
	if b.beforeCommit != nil {
		b.beforeCommit(tx)
	}
	if tx.Get("commit").Type() == js.TypeFunction {
		catch(func() { tx.Call("commit") }) // ends it sooner; throws if already aborted
	}
	if ev := <-ch; ev.name == "onabort" {
		if e := tx.Get("error"); e.Type() == js.TypeObject {
			return domError(e)
		}
		return &hostError{Name: "AbortError", Message: "the write transaction was aborted"}
	}
	return nil
}

// copyAll appends the n Uint8Arrays of array to buf: two host calls
// each while buf has room (CopyBytesToGo copies what fits and says how
// much), three when it grows.
func copyAll(buf []byte, array js.Value, n int) []byte {
	for i := range n {
		v := array.Index(i)
		if cap(buf)-len(buf) < 64<<10 {
			buf = slices.Grow(buf, max(256<<10, cap(buf)))
		}
		room := buf[len(buf):cap(buf)]
		k := js.CopyBytesToGo(room, v)
		if k == len(room) { // perhaps cut short
			size := v.Get("byteLength").Int()
			buf = slices.Grow(buf, size)
			room = buf[len(buf) : len(buf)+size]
			k = js.CopyBytesToGo(room, v)
		}
		buf = buf[:len(buf)+k]
	}
	return buf
}

// field splits uvarint(len) ‖ bytes off data.
func field(data []byte) (f, rest []byte, ok bool) {
	n, k := binary.Uvarint(data)
	if k <= 0 || n > uint64(len(data)-k) {
		return nil, nil, false
	}
	return data[k : k+int(n)], data[k+int(n):], true
}
