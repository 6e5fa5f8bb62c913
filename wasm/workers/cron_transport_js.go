//go:build js && wasm && upstreams

package main

import (
	"net/http"
	"syscall/js"

	"github.com/livesync-go/livesync-go/wasm/internal/hosthttp"
)

// upstreamTransport sends a run's upstream requests through the
// runtime's fetch, called as a plain function. net/http's own js
// transport calls it as a method of js.Global(), which in a Worker is
// the Go runtime's proxy of globalThis (wasm_exec.js), and workerd
// refuses that call ("Illegal invocation").
func upstreamTransport() http.RoundTripper {
	t, err := hosthttp.New(js.Global().Get("fetch"))
	if err != nil {
		panic("workers: the runtime has no fetch: " + err.Error())
	}
	return t
}
