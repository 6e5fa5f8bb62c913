//go:build js && wasm

package main

import (
	"os"
	"sync"
	"syscall/js"
)

// main hands the API to the registration function the loader named in
// the first argument, then keeps the module alive for the host's calls.
func main() {
	if len(os.Args) < 2 || js.Global().Get(os.Args[1]).Type() != js.TypeFunction {
		println("livesync.wasm: load it with the loader (index.mjs), which passes the name of its registration function")
		os.Exit(2)
	}
	webCrypto := useWebCrypto()
	api := newAPI()
	api.Set("webCrypto", webCrypto)
	quit := make(chan struct{})
	var once sync.Once
	api.Set("exit", js.FuncOf(func(js.Value, []js.Value) any {
		once.Do(func() { close(quit) })
		return nil
	}))
	js.Global().Call(os.Args[1], api)
	<-quit
	open := openHandles.all()
	for _, h := range open {
		h.shutdown()
	}
}

// openHandles are the vaults open and not closed yet, closed when the
// module exits.
var openHandles registry

type registry struct {
	mu sync.Mutex
	m  map[*handle]struct{}
}

func (r *registry) add(h *handle) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[*handle]struct{}{}
	}
	r.m[h] = struct{}{}
}

func (r *registry) remove(h *handle) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, h)
}

func (r *registry) all() []*handle {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*handle, 0, len(r.m))
	for h := range r.m {
		out = append(out, h)
	}
	return out
}

// newAPI is the object the loader returns: open, the error codes, and
// webCrypto (whether key derivation runs in crypto.subtle); main adds
// exit, which closes every vault and ends the module.
func newAPI() js.Value {
	api := object()
	api.Set("open", js.FuncOf(func(_ js.Value, args []js.Value) any {
		o, err := parseOpen(arg(args, 0))
		if err != nil {
			return rejected(err)
		}
		return async(func() (any, error) { return open(o) })
	}))
	codes := object()
	for _, c := range []string{CodeCancelled, CodeClosed, CodeBadOptions, CodeNeedPassphrase, CodeWrongPassphrase,
		CodeLocked, CodeSettingsMismatch, CodeIncompatible, CodeUnauthorized, CodeUnreachable, CodeNoDatabase,
		CodeNoVault, CodeMissingChunks, CodeNotFound, CodeBadPath, CodeTooLarge, CodeMalformed, CodeUnsupported, CodeBusy, CodeError} {
		codes.Set(c, c)
	}
	api.Set("codes", codes)
	setStorageAPI(api)
	return api
}
