//go:build js && wasm

package jsawait

import (
	"syscall/js"
	"testing"
)

func TestAwait(t *testing.T) {
	promise := js.Global().Get("Promise")
	if v, rejected := Await(promise.Call("resolve", 42)); rejected || v.Int() != 42 {
		t.Errorf("resolved: got %v, rejected %v; want 42", v, rejected)
	}
	reason := js.Global().Get("Error").New("no")
	if v, rejected := Await(promise.Call("reject", reason)); !rejected || !v.Equal(reason) {
		t.Errorf("rejected: got %v, rejected %v; want the reason", v, rejected)
	}
	if v, rejected := Await(js.ValueOf("plain")); rejected || v.String() != "plain" {
		t.Errorf("not a thenable: got %v, rejected %v", v, rejected)
	}
	if v := Arg0(nil); !v.IsUndefined() {
		t.Errorf("Arg0(nil) = %v, want undefined", v)
	}
}
