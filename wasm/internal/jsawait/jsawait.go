//go:build js && wasm

// Package jsawait waits, from a goroutine, for a JavaScript Promise to
// settle. The wasm build's host bridges (HTTP, IndexedDB, WebCrypto) all
// need it. Never call Await from inside a js.FuncOf callback: the callback
// would block the event loop the Promise needs to settle.
package jsawait

import "syscall/js"

// Await waits for p to settle. It returns p's value, or, when p was
// rejected, its reason with rejected true. A value that is not a thenable
// is returned as it is.
func Await(p js.Value) (value js.Value, rejected bool) {
	if p.Type() != js.TypeObject || p.Get("then").Type() != js.TypeFunction {
		return p, false
	}
	type settled struct {
		v        js.Value
		rejected bool
	}
	ch := make(chan settled, 1)
	ok := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- settled{v: Arg0(args)}
		return nil
	})
	fail := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- settled{v: Arg0(args), rejected: true}
		return nil
	})
	p.Call("then", ok, fail)
	s := <-ch
	ok.Release()
	fail.Release()
	return s.v, s.rejected
}

// Arg0 is a callback's first argument, or undefined.
func Arg0(args []js.Value) js.Value {
	if len(args) == 0 {
		return js.Undefined()
	}
	return args[0]
}
