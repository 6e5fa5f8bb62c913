//go:build js && wasm

package main

import (
	"context"
	"fmt"
	"sync"
	"syscall/js"
	"time"

	"github.com/livesync-go/livesync-go/engine/vault"
)

// dispatcher delivers the vault's events to the JS listeners on one
// goroutine of its own, in order, so that the engine never waits for JS
// and a listener that throws harms nothing else.
//
// The vault's held-count events say how many files are held; JS also
// wants how many chunks they wait for. The dispatcher hands each
// held-count event to a counter goroutine, which counts both from the
// replica (at most once per countInterval: a count reads every document)
// and queues the event with the counts, so that it follows the held and
// released events it sums up.
type dispatcher struct {
	mu        sync.Mutex
	queue     []queued
	wake      chan struct{}
	done      chan struct{}
	listeners map[int]listener
	next      int
	unwatch   func()
	stopOnce  sync.Once

	count   func(context.Context) (heldCounts, error) // the replica's held files and missing chunks
	ctx     context.Context                           // the handle's: counts end with it
	recount chan struct{}                             // a held-count event waits for its count
}

// queued is one event to deliver; counts is set on a counted held-count
// event.
type queued struct {
	e      vault.Event
	counts *heldCounts
}

// heldCounts are the held files and the distinct chunks they lack.
type heldCounts struct {
	held, pendingChunks int
}

// countInterval is the shortest time between two counts of held files.
const countInterval = 500 * time.Millisecond

// listener is one on() registration.
type listener struct {
	topic string // "file", "held" or "status"
	fn    js.Value
}

// startEvents starts the handle's dispatcher.
func (h *handle) startEvents() {
	d := &dispatcher{wake: make(chan struct{}, 1), done: make(chan struct{}), listeners: map[int]listener{},
		ctx: h.ctx, recount: make(chan struct{}, 1), count: h.heldCounts}
	d.unwatch = h.v.Watch(h.ctx, d.push)
	h.events = d
	go d.run()
	go d.counter()
}

// heldCounts counts the held files and the distinct chunks they lack.
func (h *handle) heldCounts(ctx context.Context) (heldCounts, error) {
	files, err := h.v.Held(ctx)
	if err != nil {
		return heldCounts{}, err
	}
	missing := map[string]bool{}
	for _, f := range files {
		for _, id := range f.Missing {
			missing[id] = true
		}
	}
	return heldCounts{held: len(files), pendingChunks: len(missing)}, nil
}

func (d *dispatcher) push(e vault.Event) {
	if e.Kind == vault.HeldCount {
		// Counted by the counter, which queues it.
		select {
		case d.recount <- struct{}{}:
		default: // a count is due already; it will see this change too
		}
		return
	}
	d.enqueue(queued{e: e})
}

func (d *dispatcher) enqueue(q queued) {
	d.mu.Lock()
	d.queue = append(d.queue, q)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// counter counts the held files after each held-count event (several
// events in a row make one count) and queues the event with the counts.
// It counts only for listeners of "held" or "status".
func (d *dispatcher) counter() {
	var last time.Time
	for {
		select {
		case <-d.done:
			return
		case <-d.recount:
		}
		if wait := countInterval - time.Since(last); !last.IsZero() && wait > 0 {
			select {
			case <-d.done:
				return
			case <-time.After(wait):
			}
		}
		if !d.listening("held", "status") {
			continue
		}
		last = time.Now()
		c, err := d.count(d.ctx)
		if err != nil {
			continue // the vault is closing, or the replica failed: the next event counts again
		}
		d.enqueue(queued{e: vault.Event{Kind: vault.HeldCount, Held: c.held}, counts: &c})
	}
}

// listening reports whether a listener of one of topics is registered.
func (d *dispatcher) listening(topics ...string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.listeners {
		for _, t := range topics {
			if l.topic == t {
				return true
			}
		}
	}
	return false
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

func (d *dispatcher) deliver(q queued) {
	e := q.e
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
	o := eventObject(e)
	if q.counts != nil {
		o["held"], o["pendingChunks"] = q.counts.held, q.counts.pendingChunks
	}
	obj := js.ValueOf(o)
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
