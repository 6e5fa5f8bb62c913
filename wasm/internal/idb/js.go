//go:build js && wasm

package idb

import (
	"errors"
	"fmt"
	"syscall/js"

	"github.com/livesync-go/livesync-go/wasm/internal/jsawait"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// event is the handler that fired (its name) and its target.
type event struct {
	name   string
	target js.Value
}

// listen sets the handlers names (such as "onsuccess") of target to
// deliver the first of them that fires on the returned channel; release
// removes them. The handlers never block: they run on the host's event
// loop.
func listen(target js.Value, names ...string) (<-chan event, func()) {
	ch := make(chan event, 1)
	funcs := make([]js.Func, len(names))
	for i, name := range names {
		funcs[i] = js.FuncOf(func(js.Value, []js.Value) any {
			select {
			case ch <- event{name: name, target: target}:
			default:
			}
			return nil
		})
		target.Set(name, funcs[i])
	}
	return ch, func() {
		for i, name := range names {
			target.Set(name, js.Null())
			funcs[i].Release()
		}
	}
}

// request waits for an IDBRequest's success (its result) or error.
func request(req js.Value) (js.Value, error) {
	ch, release := listen(req, "onsuccess", "onerror")
	defer release()
	if ev := <-ch; ev.name == "onerror" {
		return js.Undefined(), domError(req.Get("error"))
	}
	return req.Get("result"), nil
}

// await waits for a Promise.
func await(p js.Value) (js.Value, error) {
	v, rejected := jsawait.Await(p)
	if rejected {
		return js.Undefined(), domError(v)
	}
	return v, nil
}

// hostError is an error IndexedDB reported: a DOMException's name
// (QuotaExceededError, AbortError, …) and message.
type hostError struct {
	Name, Message string
}

func (e *hostError) Error() string {
	if e.Message == "" {
		return "idb: " + e.Name
	}
	return "idb: " + e.Name + ": " + e.Message
}

// domError is v (a DOMException, an Error, or null) as a Go error.
func domError(v js.Value) error {
	if v.Type() != js.TypeObject {
		return &hostError{Name: "UnknownError", Message: "IndexedDB failed without an error"}
	}
	e := &hostError{Name: str(v.Get("name")), Message: str(v.Get("message"))}
	if e.Name == "QuotaExceededError" {
		return &storageFull{e}
	}
	return e
}

func str(v js.Value) string {
	if v.Type() == js.TypeString {
		return v.String()
	}
	return ""
}

// catch runs f, turning a JS exception it throws (a panic of js.Error)
// into an error.
func catch(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			var je js.Error
			if e, ok := r.(error); ok && errors.As(e, &je) {
				err = domError(je.Value)
				return
			}
			panic(r)
		}
	}()
	f()
	return nil
}

// u8 copies b into a new Uint8Array.
func u8(b []byte) js.Value {
	a := js.Global().Get("Uint8Array").New(len(b))
	js.CopyBytesToJS(a, b)
	return a
}

// goBytes copies a Uint8Array or ArrayBuffer into Go.
func goBytes(v js.Value) []byte {
	if !v.InstanceOf(js.Global().Get("Uint8Array")) {
		v = js.Global().Get("Uint8Array").New(v)
	}
	b := make([]byte, v.Get("byteLength").Int())
	js.CopyBytesToGo(b, v)
	return b
}

var errNoIndexedDB = fmt.Errorf("idb: this host has no IndexedDB (globalThis.indexedDB): %w", engine.ErrUnsupported)

// storageFull is a QuotaExceededError: store.ErrStorageFull.
type storageFull struct{ *hostError }

func (e *storageFull) Unwrap() []error { return []error{e.hostError, store.ErrStorageFull} }
