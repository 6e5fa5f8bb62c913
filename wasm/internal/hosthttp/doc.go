// Package hosthttp is an http.RoundTripper for GOOS=js GOARCH=wasm that
// sends every request through a fetch-compatible function the host
// passes in (the browser's or Node's fetch, or an adapter over a
// plugin's own request function), so that Go code such as the CouchDB
// adapter runs unchanged in a page or a plugin while the host keeps
// every network decision (CORS, proxies, mobile restrictions).
//
// Response bodies are streamed through the ReadableStream reader when the
// host's Response has one (needed for long-lived _changes feeds), else
// read whole through arrayBuffer(). A request's context cancels the
// host's request through an AbortController, also while its body is
// being read.
//
// The package builds only for js/wasm.
package hosthttp
