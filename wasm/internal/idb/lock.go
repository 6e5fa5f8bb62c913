//go:build js && wasm

package idb

import (
	"sync"
	"syscall/js"

	"github.com/livesync-go/livesync-go/wasm/internal/jsawait"
)

// held are the databases a handle of this module has open.
var held = struct {
	sync.Mutex
	names map[string]bool
}{names: map[string]bool{}}

var noop = js.FuncOf(func(js.Value, []js.Value) any { return nil })

// acquire makes this caller the only one using database name: this
// module's handles, and other tabs and windows through the Web Lock
// "livesync-go:idb:NAME" where the host has navigator.locks (locked
// true). It fails with ErrBusy instead of waiting. release ends it.
func acquire(name string) (release func(), locked bool, err error) {
	held.Lock()
	if held.names[name] {
		held.Unlock()
		return nil, false, ErrBusy
	}
	held.names[name] = true
	held.Unlock()
	unhold := func() {
		held.Lock()
		delete(held.names, name)
		held.Unlock()
	}
	unlock, locked, err := webLock("livesync-go:idb:" + name)
	if err != nil {
		unhold()
		return nil, false, err
	}
	return func() { unlock(); unhold() }, locked, nil
}

// webLock takes the Web Lock name if it is free, holding it until unlock
// is called; locked is false where the host has no Web Locks (or refuses
// them, as an opaque origin does).
func webLock(name string) (unlock func(), locked bool, err error) {
	nav := js.Global().Get("navigator")
	if nav.Type() != js.TypeObject {
		return func() {}, false, nil
	}
	locks := nav.Get("locks")
	if locks.Type() != js.TypeObject || locks.Get("request").Type() != js.TypeFunction {
		return func() {}, false, nil
	}
	// hold settles when unlock is called; the lock is held until then.
	var resolve js.Value
	exec := js.FuncOf(func(_ js.Value, args []js.Value) any {
		resolve = args[0]
		return nil
	})
	hold := js.Global().Get("Promise").New(exec)
	exec.Release()

	type answer struct{ granted, failed bool }
	ch := make(chan answer, 1)
	send := func(a answer) {
		select {
		case ch <- a:
		default:
		}
	}
	granted := js.FuncOf(func(_ js.Value, args []js.Value) any {
		if jsawait.Arg0(args).Type() != js.TypeObject { // null: the lock is taken
			send(answer{})
			return nil
		}
		send(answer{granted: true})
		return hold
	})
	refused := js.FuncOf(func(js.Value, []js.Value) any {
		send(answer{failed: true})
		return nil
	})
	defer granted.Release()
	defer refused.Release()
	opts := js.ValueOf(map[string]any{"ifAvailable": true})
	var done js.Value // settles once the lock is released
	if err := catch(func() {
		done = locks.Call("request", name, opts, granted)
		done.Call("then", noop, refused)
	}); err != nil {
		return func() {}, false, nil
	}
	switch a := <-ch; {
	case a.failed:
		return func() {}, false, nil
	case !a.granted:
		return nil, false, ErrBusy
	}
	// The host releases the lock some time after hold settles: unlock
	// waits for it, so that an Open right after Close gets it.
	return func() { resolve.Invoke(); await(done) }, true, nil
}

// connect opens database name, creating its object store if new. With
// probe set (no Web Lock guards it), it then reopens it at the next
// version: the host runs the upgrade only once every other connection
// has closed, and reports the open as blocked while one is open, which
// connect reports as ErrBusy.
func connect(factory js.Value, name string, probe bool) (js.Value, error) {
	db, err := openDB(factory, name, 0)
	if err != nil || !probe {
		return db, err
	}
	version := db.Get("version").Int()
	db.Call("close")
	return openDB(factory, name, version+1)
}

// openDB opens name at version (0: the current one).
func openDB(factory js.Value, name string, version int) (js.Value, error) {
	var req js.Value
	if err := catch(func() {
		if version > 0 {
			req = factory.Call("open", name, version)
		} else {
			req = factory.Call("open", name)
		}
	}); err != nil {
		return js.Value{}, err
	}
	upgrade := js.FuncOf(func(js.Value, []js.Value) any {
		db := req.Get("result")
		if !db.Get("objectStoreNames").Call("contains", objectStore).Bool() {
			db.Call("createObjectStore", objectStore)
		}
		return nil
	})
	req.Set("onupgradeneeded", upgrade)
	ch, stop := listen(req, "onsuccess", "onerror", "onblocked")
	ev := <-ch
	stop()
	upgrade.Release()
	switch ev.name {
	case "onerror":
		return js.Value{}, domError(req.Get("error"))
	case "onblocked":
		abandon(req)
		return js.Value{}, ErrBusy
	}
	return req.Get("result"), nil
}

// abandon undoes a blocked open whenever the host gets to it: its
// upgrade is aborted (the open then fails) and a connection it still
// makes is closed.
func abandon(req js.Value) {
	var funcs []js.Func
	done := func() {
		for _, f := range funcs {
			f.Release()
		}
	}
	on := func(name string, f func()) {
		fn := js.FuncOf(func(js.Value, []js.Value) any {
			f()
			return nil
		})
		funcs = append(funcs, fn)
		req.Set(name, fn)
	}
	on("onupgradeneeded", func() { catch(func() { req.Get("transaction").Call("abort") }) })
	on("onsuccess", func() { req.Get("result").Call("close"); done() })
	on("onerror", done)
}
