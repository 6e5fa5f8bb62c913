//go:build js && wasm

package main

import (
	"fmt"
	"sync"
	"syscall/js"

	"github.com/livesync-go/livesync-go/engine/vault"
)

// dispatcher delivers the vault's events to the JS listeners on one
// goroutine of its own, in order, so that the engine never waits for JS
// and a listener that throws harms nothing else.
type dispatcher struct {
	mu        sync.Mutex
	queue     []vault.Event
	wake      chan struct{}
	done      chan struct{}
	listeners map[int]listener
	next      int
	unwatch   func()
	stopOnce  sync.Once
}

// listener is one on() registration.
type listener struct {
	topic string // "file", "held" or "status"
	fn    js.Value
}

// startEvents starts the handle's dispatcher.
func (h *handle) startEvents() {
	d := &dispatcher{wake: make(chan struct{}, 1), done: make(chan struct{}), listeners: map[int]listener{}}
	d.unwatch = h.v.Watch(h.ctx, d.push)
	h.events = d
	go d.run()
}

func (d *dispatcher) push(e vault.Event) {
	d.mu.Lock()
	d.queue = append(d.queue, e)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dispatcher) run() {
	for {
		select {
		case <-d.done:
			return
		case <-d.wake:
		}
		d.mu.Lock()
		q := d.queue
		d.queue = nil
		d.mu.Unlock()
		for _, e := range q {
			d.deliver(e)
		}
	}
}

func (d *dispatcher) stop() {
	d.stopOnce.Do(func() {
		d.unwatch()
		close(d.done)
	})
}

// topicsOf says which topics e belongs to: file events are "file" (held
// and released too), held and released files and the held count are
// "held", and every event that is not a file event is "status".
func topicsOf(k vault.EventKind) (file, held, status bool) {
	file = k.IsFile()
	held = k == vault.FileHeld || k == vault.FileReleased || k == vault.HeldCount
	return file, held, !file
}

func (d *dispatcher) deliver(e vault.Event) {
	file, held, status := topicsOf(e.Kind)
	d.mu.Lock()
	var fns []js.Value
	for _, l := range d.listeners {
		if (l.topic == "file" && file) || (l.topic == "held" && held) || (l.topic == "status" && status) {
			fns = append(fns, l.fn)
		}
	}
	d.mu.Unlock()
	if len(fns) == 0 {
		return
	}
	obj := js.ValueOf(eventObject(e))
	for _, fn := range fns {
		call(fn, obj)
	}
}

// call calls a listener; an exception it throws is dropped.
func call(fn, obj js.Value) {
	defer func() { _ = recover() }()
	fn.Invoke(obj)
}

// eventObject is e as JS sees it: kind, and the fields that kind sets.
// It never holds note contents.
func eventObject(e vault.Event) map[string]any {
	o := map[string]any{"kind": e.Kind.String()}
	set := func(k, v string) {
		if v != "" {
			o[k] = v
		}
	}
	set("path", e.Path)
	set("docId", e.DocID)
	set("rev", e.Rev)
	set("remote", e.Remote)
	switch e.Kind {
	case vault.FileHeld:
		o["missing"] = e.Missing
	case vault.HeldCount:
		o["held"] = e.Held
	case vault.SyncWritten:
		o["written"] = e.Written
	case vault.SyncProgress:
		if e.Sync != nil {
			o["read"], o["written"], o["pending"] = e.Sync.DocsRead, e.Sync.DocsWritten, e.Sync.Pending
		}
	case vault.SyncRetrying:
		if e.Retry != nil {
			o["what"], o["delayMs"] = e.Retry.What, e.Retry.Delay.Milliseconds()
			o["error"] = errorObject(e.Retry.Err)
		}
	case vault.HuntFound:
		if e.Hunt != nil {
			o["found"], o["total"] = e.Hunt.Found, e.Hunt.Total
		}
	}
	if e.Direction != 0 {
		o["direction"] = e.Direction.String()
	}
	if e.Err != nil {
		o["error"] = errorObject(e.Err)
	}
	return o
}

// errorObject describes an error in an event: its message and code.
func errorObject(err error) map[string]any {
	if err == nil {
		return nil
	}
	info := classify(err)
	return map[string]any{"message": err.Error(), "code": info.Code, "stage": info.Stage, "docId": info.DocID}
}

// on(topic, fn) calls fn with every event of topic ("file", "status" or
// "held") and returns a function that stops it. It returns at once, not
// a Promise. Wrong arguments return an Error, which the loader throws (a
// Go function cannot throw into JS).
func (h *handle) on(_ js.Value, args []js.Value) any {
	topic, fn := arg(args, 0), arg(args, 1)
	if topic.Type() != js.TypeString || fn.Type() != js.TypeFunction {
		return jsError(&optionsError{msg: "on needs a topic (\"file\", \"status\" or \"held\") and a function"})
	}
	t := topic.String()
	if t != "file" && t != "status" && t != "held" {
		return jsError(&optionsError{msg: fmt.Sprintf("on: unknown topic %q (want \"file\", \"status\" or \"held\")", t)})
	}
	d := h.events
	d.mu.Lock()
	id := d.next
	d.next++
	d.listeners[id] = listener{topic: t, fn: fn}
	d.mu.Unlock()
	return js.FuncOf(func(js.Value, []js.Value) any {
		d.mu.Lock()
		delete(d.listeners, id)
		d.mu.Unlock()
		return nil
	})
}
