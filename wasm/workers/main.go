//go:build js && wasm

// Command workers is the CouchDB-protocol endpoint of livesync-go as a
// Cloudflare Worker (github.com/syumai/workers): LiveSync's plugin and
// PouchDB replicate with it, and the databases live in D1 (binding DB).
//
// It runs under either of two loaders (build.sh picks one):
//   - loader/worker.mjs (the default) starts one instance on the
//     isolate's first event and hands it every request (serveJS) and cron
//     event (syumai/workers' runScheduler) after it, concurrently; main
//     never returns. Nothing a request opens outlives it (app.ServeHTTP
//     scopes it), so requests share only the settings;
//   - syumai/workers' worker.mjs (LIVESYNC_WORKER_LOADER=request) runs a
//     fresh Go instance for every event, and main returns shortly after
//     the answer is sent (settle), ending every goroutine and timer of
//     the request with the instance.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"syscall/js"
	"time"

	"github.com/syumai/workers"
	"github.com/syumai/workers/cloudflare"
	"github.com/syumai/workers/cloudflare/cron"

	"github.com/livesync-go/livesync-go/wasm/workers/d1kv"
)

// binding is the D1 database binding's name in wrangler.toml.
const binding = "DB"

func main() {
	h, task := start()
	cron.ScheduleTaskNonBlock(task)
	b := js.Global().Get("context").Get("binding")
	if !b.Get("isolate").Truthy() {
		serve(h)
		return
	}
	b.Set("serve", js.FuncOf(serveJS(h)))
	b.Set("poke", js.FuncOf(func(js.Value, []js.Value) any { return nil }))
	workers.Ready()
	select {} // the loader calls in until the isolate goes away
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

// start builds the Worker from its binding and settings: the handler and
// the cron task, or, when they are wrong, a handler that answers every
// request with the reason and a task that does nothing.
func start() (http.Handler, cron.Task) {
	nothing := func(context.Context) error { return nil }
	x, err := d1kv.NewD1(cloudflare.GetBinding(binding))
	if err != nil {
		return failing(err), nothing
	}
	// The tables exist: wrangler applies migrations/ before a deploy (and
	// tests/workers/run-worker.mjs locally), so no request pays for it.
	a, err := newApp(cloudflare.Getenv, x)
	if err != nil {
		return failing(err), nothing
	}
	return a, func(ctx context.Context) error {
		// syumai/workers panics on a task's error, which would end the
		// instance every request of the isolate shares: log it instead.
		if err := a.Scheduled(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "workers: scheduled task: %v\n", err)
		}
		return nil
	}
}
