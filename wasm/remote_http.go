//go:build js && wasm && !(nocouchdb && nos3)

package main

import (
	"net/http"
	"syscall/js"

	"github.com/livesync-go/livesync-go/wasm/internal/hosthttp"
)

// hostClient is an HTTP client whose requests go through the host's
// fetch. Only builds with a remote adapter include it (and net/http).
func hostClient(fetch js.Value) (*http.Client, error) {
	tr, err := hosthttp.New(fetch)
	if err != nil {
		return nil, &optionsError{msg: "host.fetch must be a fetch-compatible function"}
	}
	return &http.Client{Transport: tr}, nil
}
