//go:build js && wasm && upstreams

package main

import (
	"errors"
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
	return retryLost{t}
}

// retryLost sends a request once more when fetch failed without an
// answer ("Network connection lost"): the runtime reuses a kept-alive
// connection that the server closed at that moment (Node's servers close
// them after 5 idle seconds), and fetch, unlike net/http's own
// transport, does not retry. The bridge's requests may be sent twice:
// reads, _revs_diff, writes of revisions with new_edits=false and of
// checkpoints each end the same either way.
type retryLost struct{ next http.RoundTripper }

func (t retryLost) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(r)
	var fe *hosthttp.FetchError
	if err == nil || !errors.As(err, &fe) || r.Context().Err() != nil || (r.Body != nil && r.GetBody == nil) {
		return res, err
	}
	again := r.Clone(r.Context())
	if r.Body != nil {
		body, gerr := r.GetBody()
		if gerr != nil {
			return nil, err
		}
		again.Body = body
	}
	return t.next.RoundTrip(again)
}
