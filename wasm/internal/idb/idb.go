//go:build js && wasm

package idb

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall/js"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

const objectStore = "kv"

// pageSize is the number of records one getAll reads at Open (a
// variable for tests).
var pageSize = 16384

// strict asks the host to flush a write transaction to disk before its
// complete event (hosts without the option ignore it).
var strict = js.ValueOf(map[string]any{"durability": "strict"})

// Backend is a store.Backend over one IndexedDB database; see the package
// doc.
type Backend struct {
	name      string
	mem       store.Backend
	db        js.Value
	release   func() // ends the exclusivity
	closeOnce sync.Once
	// beforeCommit, set by tests, runs on each write transaction once its
	// requests are issued.
	beforeCommit func(tx js.Value)
}

// Open opens (creating it if absent) the IndexedDB database name and
// loads the replica it holds. It fails with ErrBusy while another handle
// has the database open, and with an error wrapping engine.ErrUnsupported
// where the host has no IndexedDB.
func Open(ctx context.Context, name string) (store.Backend, error) {
	return open(ctx, name)
}

func open(ctx context.Context, name string) (_ *Backend, err error) {
	factory, err := indexedDB(name)
	if err != nil {
		return nil, err
	}
	release, locked, err := acquire(name)
	if err != nil {
		return nil, err
	}
	b := &Backend{name: name, mem: store.NewMemoryBackend(), release: release}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	if b.db, err = connect(factory, name, !locked); err != nil {
		return nil, err
	}
	if err := b.load(ctx); err != nil {
		return nil, fmt.Errorf("idb: reading database %q: %w", name, err)
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

// View runs fn on the memory copy.
func (b *Backend) View(fn func(store.Tx) error) error { return b.mem.View(fn) }

// Update runs fn on the memory copy, recording what it writes, then
// writes that in one IndexedDB transaction; if that fails, the memory
// copy's changes are undone and the error returned.
func (b *Backend) Update(fn func(store.Tx) error) error {
	return b.mem.Update(func(tx store.Tx) error {
		w := &writeTx{Tx: tx}
		if err := fn(w); err != nil {
			return err
		}
		if len(w.ops) == 0 {
			return nil
		}
		return b.commit(w.ops)
	})
}

// Close waits for the Update in flight, closes the connection and lets
// another handle open the database.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.mem.Close()
		if b.db.Type() == js.TypeObject {
			b.db.Call("close")
		}
		b.release()
	})
	return nil
}

// op is the last write of one key in a transaction.
type op struct {
	bucket     store.Bucket
	key, value []byte
	del        bool
}

// writeTx records the writes of an Update.
type writeTx struct {
	store.Tx
	ops   []op
	index map[string]int // bucket ‖ key → ops index
}

func (t *writeTx) Put(b store.Bucket, key, value []byte) error {
	if err := t.Tx.Put(b, key, value); err != nil {
		return err
	}
	t.record(op{bucket: b, key: key, value: value})
	return nil
}

func (t *writeTx) Delete(b store.Bucket, key []byte) error {
	if err := t.Tx.Delete(b, key); err != nil {
		return err
	}
	t.record(op{bucket: b, key: slices.Clone(key), del: true}) // a deleted key may be reused by the caller
	return nil
}

func (t *writeTx) record(o op) {
	if t.index == nil {
		t.index = map[string]int{}
	}
	k := string(rune(o.bucket)) + string(o.key)
	if i, ok := t.index[k]; ok {
		t.ops[i] = o
		return
	}
	t.index[k] = len(t.ops)
	t.ops = append(t.ops, o)
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

// load reads every record into the memory copy, pageSize records at a
// time (getAll) in one transaction each.
// The exclusivity Open holds keeps other writers out between pages.
func (b *Backend) load(ctx context.Context) error {
	from := js.Undefined() // the last key read
	var buf []byte
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var req js.Value
		err := catch(func() {
			query := js.Null()
			if !from.IsUndefined() {
				query = js.Global().Get("IDBKeyRange").Call("lowerBound", from, true)
			}
			tx := b.db.Call("transaction", objectStore, "readonly")
			req = tx.Call("objectStore", objectStore).Call("getAll", query, pageSize)
		})
		if err != nil {
			return err
		}
		res, err := request(req)
		if err != nil {
			return err
		}
		n := res.Get("length").Int()
		if n == 0 {
			return nil
		}
		buf = copyAll(buf[:0], res, n)
		last, err := b.apply(buf, n)
		if err != nil {
			return err
		}
		if n < pageSize {
			return nil
		}
		from = u8(last)
	}
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

// apply puts the n framed records of data into the memory copy and
// returns the last one's IndexedDB key.
func (b *Backend) apply(data []byte, n int) (last []byte, err error) {
	bad := fmt.Errorf("idb: a stored record is not framed as this package writes it: %w", engine.ErrMalformed)
	err = b.mem.Update(func(tx store.Tx) error {
		for range n {
			key, rest, ok := field(data)
			if !ok || len(key) == 0 || key[0] >= store.NumBuckets {
				return bad
			}
			value, rest, ok := field(rest)
			if !ok {
				return bad
			}
			if err := tx.Put(store.Bucket(key[0]), key[1:], value); err != nil {
				return err
			}
			last, data = key, rest
		}
		if len(data) != 0 {
			return bad
		}
		return nil
	})
	return last, err
}

// field splits uvarint(len) ‖ bytes off data.
func field(data []byte) (f, rest []byte, ok bool) {
	n, k := binary.Uvarint(data)
	if k <= 0 || n > uint64(len(data)-k) {
		return nil, nil, false
	}
	return data[k : k+int(n)], data[k+int(n):], true
}
