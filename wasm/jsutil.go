//go:build js && wasm

package main

import (
	"fmt"
	"syscall/js"
)

// ignore is a JS function that does nothing.
var ignore = js.FuncOf(func(js.Value, []js.Value) any { return nil })

func object() js.Value { return js.Global().Get("Object").New() }

func arg(args []js.Value, i int) js.Value {
	if i < len(args) {
		return args[i]
	}
	return js.Undefined()
}

// jsError is err as a JS Error with code, stage and docId.
func jsError(err error) js.Value {
	info := classify(err)
	e := js.Global().Get("Error").New(err.Error())
	e.Set("code", info.Code)
	e.Set("stage", info.Stage)
	e.Set("docId", info.DocID)
	return e
}

// rejected is a Promise rejected with err.
func rejected(err error) js.Value {
	return js.Global().Get("Promise").Call("reject", jsError(err))
}

// async returns a Promise settled by f, which runs on its own goroutine
// so that the host's call returns at once. f returns a value js.ValueOf
// accepts (or a js.Value); a panic rejects the Promise.
func async(f func() (any, error)) js.Value {
	exec := js.FuncOf(func(_ js.Value, args []js.Value) any {
		resolve, reject := args[0], args[1]
		go func() {
			defer func() {
				if r := recover(); r != nil {
					reject.Invoke(jsError(fmt.Errorf("livesync.wasm: internal error: %v", r)))
				}
			}()
			v, err := f()
			if err != nil {
				reject.Invoke(jsError(err))
				return
			}
			resolve.Invoke(js.ValueOf(v))
		}()
		return nil
	})
	defer exec.Release()
	return js.Global().Get("Promise").New(exec)
}

// method is a JS method whose arguments are read at once (parse) and
// whose work runs in a Promise.
func method(parse func(args []js.Value) (func() (any, error), error)) js.Func {
	return js.FuncOf(func(_ js.Value, args []js.Value) any {
		run, err := parse(args)
		if err != nil {
			return rejected(err)
		}
		return async(run)
	})
}

// str reads an optional string option.
func str(o js.Value, key string) (string, error) {
	if o.Type() != js.TypeObject {
		return "", nil
	}
	v := o.Get(key)
	switch v.Type() {
	case js.TypeUndefined, js.TypeNull:
		return "", nil
	case js.TypeString:
		return v.String(), nil
	}
	return "", &optionsError{msg: fmt.Sprintf("option %s must be a string", key)}
}

// boolean reads an optional boolean option.
func boolean(o js.Value, key string) (bool, error) {
	if o.Type() != js.TypeObject {
		return false, nil
	}
	v := o.Get(key)
	switch v.Type() {
	case js.TypeUndefined, js.TypeNull:
		return false, nil
	case js.TypeBoolean:
		return v.Bool(), nil
	}
	return false, &optionsError{msg: fmt.Sprintf("option %s must be a boolean", key)}
}

// number reads an optional number option (0 when absent).
func number(o js.Value, key string) (float64, error) {
	if o.Type() != js.TypeObject {
		return 0, nil
	}
	v := o.Get(key)
	switch v.Type() {
	case js.TypeUndefined, js.TypeNull:
		return 0, nil
	case js.TypeNumber:
		return v.Float(), nil
	}
	return 0, &optionsError{msg: fmt.Sprintf("option %s must be a number (of milliseconds)", key)}
}

// bytesArg reads file contents: a string (UTF-8), a Uint8Array or an
// ArrayBuffer (or any ArrayBuffer view).
func bytesArg(v js.Value) ([]byte, error) {
	if v.Type() == js.TypeString {
		return []byte(v.String()), nil
	}
	u8 := js.Global().Get("Uint8Array")
	switch {
	case v.Type() != js.TypeObject:
	case v.InstanceOf(u8):
	case v.InstanceOf(js.Global().Get("ArrayBuffer")):
		v = u8.New(v)
	case js.Global().Get("ArrayBuffer").Call("isView", v).Bool():
		v = u8.New(v.Get("buffer"), v.Get("byteOffset"), v.Get("byteLength"))
	default:
		return nil, &optionsError{msg: "the data must be a string, a Uint8Array or an ArrayBuffer"}
	}
	if v.Type() != js.TypeObject {
		return nil, &optionsError{msg: "the data must be a string, a Uint8Array or an ArrayBuffer"}
	}
	b := make([]byte, v.Get("byteLength").Int())
	js.CopyBytesToGo(b, v)
	return b, nil
}

// uint8Array copies b into a new Uint8Array.
func uint8Array(b []byte) js.Value {
	a := js.Global().Get("Uint8Array").New(len(b))
	js.CopyBytesToJS(a, b)
	return a
}
