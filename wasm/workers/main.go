//go:build js && wasm

// Command workers is the CouchDB-protocol endpoint of livesync-go as a
// Cloudflare Worker (github.com/syumai/workers): LiveSync's plugin and
// PouchDB replicate with it, and the databases live in D1.
package main

import (
	"github.com/syumai/workers"
	"github.com/syumai/workers/cloudflare"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
)

func main() {
	s, err := parseSettings(cloudflare.Getenv)
	if err != nil {
		workers.Serve(failing(err))
		return
	}
	h, err := newHandler(s, couchapi.NewMemoryDatabases())
	if err != nil {
		workers.Serve(failing(err))
		return
	}
	workers.Serve(h)
}
