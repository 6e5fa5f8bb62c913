//go:build js && wasm

package main

import (
	"os"
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
	js.Global().Call(os.Args[1], api)
	select {}
}

// newAPI is the object the loader returns: open, the error codes, and
// webCrypto (whether key derivation runs in crypto.subtle).
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
		CodeNoVault, CodeMissingChunks, CodeNotFound, CodeBadPath, CodeTooLarge, CodeMalformed, CodeUnsupported, CodeError} {
		codes.Set(c, c)
	}
	api.Set("codes", codes)
	return api
}
