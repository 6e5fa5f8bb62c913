//go:build js && wasm

// Command workers is the CouchDB-protocol endpoint of livesync-go as a
// Cloudflare Worker (github.com/syumai/workers): LiveSync's plugin and
// PouchDB replicate with it, and the databases live in D1 (binding DB).
//
// syumai/workers runs a fresh Go instance for every request (its
// worker.mjs instantiates the module per fetch) and main returns shortly
// after the answer is sent (settle), ending every goroutine and timer of
// the request with the instance.
package main

import (
	"net/http"
	"time"

	"github.com/syumai/workers"
	"github.com/syumai/workers/cloudflare"
	"github.com/syumai/workers/cloudflare/cron"

	"github.com/livesync-go/livesync-go/wasm/workers/d1kv"
)

// binding is the D1 database binding's name in wrangler.toml.
const binding = "DB"

func main() {
	x, err := d1kv.NewD1(cloudflare.GetBinding(binding))
	if err != nil {
		serve(failing(err))
		return
	}
	// The tables exist: wrangler applies migrations/ before a deploy (and
	// tests/workers/run-worker.mjs locally), so no request pays for it.
	a, err := newApp(cloudflare.Getenv, x)
	if err != nil {
		serve(failing(err))
		return
	}
	cron.ScheduleTaskNonBlock(a.Scheduled)
	serve(a)
}

// serve answers the request with h, then gives the callbacks still in
// flight between workerd and this instance (the answer stream's last
// pull, its close) time to return before main does: JavaScript calling
// into a Go program that has exited throws in workerd ("reading
// 'exports'" of the deleted instance), seen here before this pause.
func serve(h http.Handler) {
	workers.ServeNonBlock(h)
	workers.Ready()
	<-workers.Done()
	time.Sleep(settle)
}

// settle is how long an instance lives on after its answer ended.
const settle = 20 * time.Millisecond
