//go:build js && wasm

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"syscall/js"

	"github.com/livesync-go/livesync-go/wasm/internal/jsawait"
)

// serveJS is the function loader/worker.mjs calls for every request:
// serve(req, sink), where req is {method, url, headers: [[name, value]…],
// body: null or a source} and sink takes the answer: head(status,
// [[name, value]…]), write(Uint8Array, done), end(), and abort(reason)
// for an answer cut short. source.next(done) gives the body's next
// Uint8Array, null at its end or a string saying why it failed; write
// gives true, or false once the client went away. Both return their
// result, or undefined and call done with it later (the loader waits for
// the body or for the client to read): a function call, not a Promise,
// which workerd would not resolve into a request that has ended. The
// request runs on a goroutine of its own; the call returns at once.
func serveJS(h http.Handler) func(js.Value, []js.Value) any {
	return func(_ js.Value, args []js.Value) any {
		if len(args) != 2 {
			panic(fmt.Sprintf("workers: serve takes 2 arguments, got %d", len(args)))
		}
		req, sink := args[0], args[1]
		ctx, cancel := context.WithCancel(context.Background())
		r, err := toRequest(ctx, req)
		if err != nil {
			go func() {
				w := newJSWriter(sink, cancel)
				defer w.cancel()
				http.Error(w, err.Error(), http.StatusBadRequest)
				w.end()
			}()
			return nil
		}
		go serveOne(h, r, newJSWriter(sink, cancel))
		return nil
	}
}

// serveOne serves r, and answers 500 (or cuts the answer short) when the
// handler panics: the instance is every request's, so a panic must not
// end it.
func serveOne(h http.Handler, r *http.Request, w *jsWriter) {
	defer w.cancel()
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(os.Stderr, "workers: panic serving %s %s: %v\n%s", r.Method, r.URL.Path, p, debug.Stack())
			if w.sentHead {
				w.sink.Call("abort", "internal error")
				return
			}
			w.buf = w.buf[:0]
			w.header = http.Header{"Content-Type": {"application/json"}}
			w.status = 0
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"error":"internal_server_error","reason":"the request failed"}` + "\n"))
		}
		w.end()
	}()
	h.ServeHTTP(w, r)
}

// toRequest makes the request the loader passed.
func toRequest(ctx context.Context, req js.Value) (*http.Request, error) {
	u, err := url.Parse(req.Get("url").String())
	if err != nil {
		return nil, fmt.Errorf("workers: request URL: %w", err)
	}
	r, err := http.NewRequestWithContext(ctx, req.Get("method").String(), u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("workers: request: %w", err)
	}
	r.URL = u
	r.RequestURI = u.RequestURI()
	hs := req.Get("headers")
	for i := range hs.Length() {
		kv := hs.Index(i)
		r.Header.Add(kv.Index(0).String(), kv.Index(1).String())
	}
	r.Host = u.Host
	r.RemoteAddr = r.Header.Get("Cf-Connecting-Ip")
	r.ContentLength = 0
	if src := req.Get("body"); src.Type() == js.TypeObject {
		r.Body = &jsBody{src: src}
		r.ContentLength = -1
		if n, err := strconv.ParseInt(r.Header.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
			r.ContentLength = n
		}
	}
	return r, nil
}

// jsBody reads a request body from the loader's source.
type jsBody struct {
	src  js.Value
	rest []byte
	err  error
}

func (b *jsBody) Read(p []byte) (int, error) {
	for len(b.rest) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		v := callLater(b.src, "next")
		switch {
		case v.Type() == js.TypeString:
			b.err = errors.New("workers: reading the request body: " + v.String())
		case v.IsNull() || v.IsUndefined():
			b.err = io.EOF
		default:
			b.rest = make([]byte, v.Length())
			js.CopyBytesToGo(b.rest, v)
		}
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

func (b *jsBody) Close() error { return nil }

// flushSize is how much of an answer jsWriter gathers before handing it
// to the loader (one call and one copy per piece).
const flushSize = 32 << 10

// errGone is what a write returns once the client stopped reading.
var errGone = errors.New("workers: the client went away")

// jsWriter is the http.ResponseWriter over a loader's sink. It drops
// Content-Length: the runtime streams the answer and ends it itself.
type jsWriter struct {
	sink     js.Value
	cancel   context.CancelFunc
	header   http.Header
	sent     http.Header // the header as of WriteHeader
	status   int
	sentHead bool
	buf      []byte
	err      error
}

var _ http.Flusher = (*jsWriter)(nil)

func newJSWriter(sink js.Value, cancel context.CancelFunc) *jsWriter {
	return &jsWriter{sink: sink, cancel: cancel, header: http.Header{}}
}

func (w *jsWriter) Header() http.Header { return w.header }

func (w *jsWriter) WriteHeader(code int) {
	if w.status != 0 || code < 100 || code > 999 {
		return
	}
	w.status = code
	w.sent = w.header.Clone()
	w.sent.Del("Content-Length")
}

func (w *jsWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.err != nil {
		return 0, w.err
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) >= flushSize {
		w.flush()
	}
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// Flush hands what was written to the loader.
func (w *jsWriter) Flush() {
	w.WriteHeader(http.StatusOK)
	w.flush()
}

func (w *jsWriter) flush() {
	if !w.sentHead {
		w.sentHead = true
		w.sink.Call("head", w.status, headerPairs(w.sent))
	}
	if len(w.buf) == 0 || w.err != nil {
		w.buf = w.buf[:0]
		return
	}
	u := js.Global().Get("Uint8Array").New(len(w.buf))
	js.CopyBytesToJS(u, w.buf)
	w.buf = w.buf[:0]
	if v := callLater(w.sink, "write", u); v.Type() != js.TypeBoolean || !v.Bool() {
		w.err = errGone
		w.cancel()
	}
}

// end sends the rest of the answer and ends it.
func (w *jsWriter) end() {
	w.WriteHeader(http.StatusOK)
	w.flush()
	w.sink.Call("end")
}

// callLater calls v's method with args and a callback: the method returns
// its result, or undefined and calls the callback with it later.
func callLater(v js.Value, method string, args ...any) js.Value {
	ch := make(chan js.Value, 1)
	done := js.FuncOf(func(_ js.Value, a []js.Value) any {
		ch <- jsawait.Arg0(a)
		return nil
	})
	defer done.Release()
	if r := v.Call(method, append(args, done)...); !r.IsUndefined() {
		return r
	}
	return <-ch
}

// headerPairs is h as [[name, value]…].
func headerPairs(h http.Header) []any {
	var out []any
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, []any{k, v})
		}
	}
	return out
}
