//go:build js && wasm

package hosthttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall/js"

	"github.com/livesync-go/livesync-go/wasm/internal/jsawait"
)

// Transport sends requests through Fetch, a JS function with the
// signature of fetch(url, init): it returns a Promise of a Response-like
// object with status, headers (a Headers object, or a plain object) and
// a body (a ReadableStream) or arrayBuffer().
type Transport struct {
	Fetch js.Value
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns a Transport over fetch; it fails unless fetch is a
// function.
func New(fetch js.Value) (*Transport, error) {
	if fetch.Type() != js.TypeFunction {
		return nil, errors.New("hosthttp: the host's fetch is not a function")
	}
	return &Transport{Fetch: fetch}, nil
}

// FetchError is a request the host's fetch rejected (the server could
// not be reached, CORS refused it, …). Message is the host's error text.
type FetchError struct {
	Message string
}

func (e *FetchError) Error() string { return "hosthttp: fetch failed: " + e.Message }

// RoundTrip sends req through the host's fetch. The body of the
// response is read as it arrives; closing it cancels the host's
// request.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	init, err := requestInit(req)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ac := js.Global().Get("AbortController")
	if ac.Type() == js.TypeFunction {
		ac = ac.New()
		init.Set("signal", ac.Get("signal"))
	} else {
		ac = js.Undefined()
	}
	abort := func() {
		if !ac.IsUndefined() {
			ac.Call("abort")
		}
	}
	stopAbort := context.AfterFunc(ctx, abort)

	res, err := await(t.Fetch.Invoke(req.URL.String(), init))
	if err != nil {
		stopAbort()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &FetchError{Message: jsErrorText(err.(jsError).v)}
	}
	resp, err := response(req, res)
	if err != nil {
		stopAbort()
		abort()
		return nil, err
	}
	resp.Body = &body{ctx: ctx, src: bodySource(res), res: res, stopAbort: stopAbort}
	return resp, nil
}

// requestInit is fetch's init object for req; it reads (and closes) the
// request's body.
func requestInit(req *http.Request) (js.Value, error) {
	init := js.Global().Get("Object").New()
	init.Set("method", req.Method)
	headers := js.Global().Get("Object").New()
	for k, vs := range req.Header {
		// A header with no value is not sent, as net/http does: an
		// Idempotency-Key without one only marks a request replayable,
		// and a browser's CORS preflight would refuse it.
		if len(vs) == 0 {
			continue
		}
		headers.Set(k, strings.Join(vs, ", "))
	}
	init.Set("headers", headers)
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return js.Value{}, err
		}
		if len(b) > 0 || req.Method == http.MethodPost || req.Method == http.MethodPut {
			buf := js.Global().Get("Uint8Array").New(len(b))
			js.CopyBytesToJS(buf, b)
			init.Set("body", buf)
		}
	}
	return init, nil
}

// response turns the host's Response into an http.Response without a
// body.
func response(req *http.Request, res js.Value) (*http.Response, error) {
	if res.Type() != js.TypeObject {
		return nil, errors.New("hosthttp: the host's fetch did not resolve to a response")
	}
	code := res.Get("status").Int()
	header := http.Header{}
	h := res.Get("headers")
	switch {
	case h.Type() != js.TypeObject:
	case h.Get("forEach").Type() == js.TypeFunction:
		f := js.FuncOf(func(_ js.Value, args []js.Value) any {
			header.Add(args[1].String(), args[0].String())
			return nil
		})
		h.Call("forEach", f)
		f.Release()
	default:
		keys := js.Global().Get("Object").Call("keys", h)
		for i := 0; i < keys.Length(); i++ {
			k := keys.Index(i).String()
			header.Add(k, h.Get(k).String())
		}
	}
	length := int64(-1)
	if cl := header.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			length = n
		}
	}
	uncompressed := false
	if decodedByFetch(header.Get("Content-Encoding")) {
		header.Del("Content-Encoding")
		header.Del("Content-Length")
		length, uncompressed = -1, true
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        header,
		ContentLength: length,
		Uncompressed:  uncompressed,
		Request:       req,
	}, nil
}

// decodedByFetch reports whether fetch hands over the body of a response
// with this Content-Encoding decoded: every coding listed is one fetch
// decodes (gzip, deflate, br, zstd). Any other coding (S3's aws-chunked,
// which some servers store with the object) reaches the caller as sent,
// Content-Length and all.
func decodedByFetch(ce string) bool {
	decoded := false
	for _, c := range strings.Split(ce, ",") {
		switch strings.ToLower(strings.TrimSpace(c)) {
		case "", "identity":
		case "gzip", "x-gzip", "deflate", "br", "zstd":
			decoded = true
		default:
			return false
		}
	}
	return decoded
}

// bodySource returns how to read res's body: a ReadableStream reader, or
// nil to use arrayBuffer().
func bodySource(res js.Value) js.Value {
	b := res.Get("body")
	if b.Type() == js.TypeObject && b.Get("getReader").Type() == js.TypeFunction {
		return b.Call("getReader")
	}
	if ab := res.Get("arrayBuffer"); ab.Type() == js.TypeFunction {
		return js.Null() // read whole through arrayBuffer
	}
	return js.Undefined() // no body at all
}

// body is a response body read from the host.
type body struct {
	ctx       context.Context
	src       js.Value // a reader, js.Null() (arrayBuffer) or js.Undefined()
	res       js.Value
	stopAbort func() bool

	closeOnce sync.Once
	closed    atomic.Bool

	mu      sync.Mutex // held by Read, never by Close
	pending []byte
	err     error
	whole   bool // arrayBuffer read
}

var errClosed = errors.New("hosthttp: body closed")

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.pending) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		b.pending, b.err = b.next()
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

// next reads the next piece of the body.
func (b *body) next() ([]byte, error) {
	switch {
	case b.src.IsUndefined() || b.whole:
		return nil, io.EOF
	case b.src.IsNull():
		b.whole = true
		v, err := await(b.res.Call("arrayBuffer"))
		if err != nil {
			return nil, b.readErr(err)
		}
		return bytesOf(v), nil
	}
	v, err := await(b.src.Call("read"))
	if err != nil {
		return nil, b.readErr(err)
	}
	if b.closed.Load() {
		return nil, errClosed
	}
	if v.Get("done").Bool() {
		return nil, io.EOF
	}
	return bytesOf(v.Get("value")), nil
}

// readErr is the error of a failed read: the context's, errClosed, or
// the host's.
func (b *body) readErr(err error) error {
	switch {
	case b.ctx.Err() != nil:
		return b.ctx.Err()
	case b.closed.Load():
		return errClosed
	}
	return &FetchError{Message: jsErrorText(err.(jsError).v)}
}

// Close cancels the host's reading of the body; a Read waiting for the
// next piece returns errClosed.
func (b *body) Close() error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		b.stopAbort()
		if b.src.Type() == js.TypeObject {
			// The reader's cancel settles a pending read; its own
			// promise's rejection, if any, is of no interest.
			p := b.src.Call("cancel")
			if p.Type() == js.TypeObject && p.Get("catch").Type() == js.TypeFunction {
				p.Call("catch", noop)
			}
		}
	})
	return nil
}

// noop swallows a rejection nobody waits for.
var noop = js.FuncOf(func(js.Value, []js.Value) any { return nil })

// bytesOf copies a Uint8Array (or ArrayBuffer) into Go memory.
func bytesOf(v js.Value) []byte {
	if v.Type() != js.TypeObject {
		return nil
	}
	u8 := js.Global().Get("Uint8Array")
	if !v.InstanceOf(u8) {
		v = u8.New(v)
	}
	out := make([]byte, v.Get("byteLength").Int())
	js.CopyBytesToGo(out, v)
	return out
}

// jsError is a rejected promise's reason.
type jsError struct{ v js.Value }

func (e jsError) Error() string { return jsErrorText(e.v) }

// await waits for p to settle: its value, or a jsError with its reason.
// A value that is not a thenable is returned as it is.
func await(p js.Value) (js.Value, error) {
	v, rejected := jsawait.Await(p)
	if rejected {
		return js.Undefined(), jsError{v}
	}
	return v, nil
}

// jsErrorText is the text of a JS error and of its cause.
func jsErrorText(v js.Value) string {
	if v.Type() != js.TypeObject {
		if v.IsUndefined() || v.IsNull() {
			return "unknown error"
		}
		return v.String()
	}
	msg := v.Call("toString").String()
	if c := v.Get("cause"); c.Type() == js.TypeObject && c.Get("message").Type() == js.TypeString {
		msg += ": " + c.Get("message").String()
	} else if c.Type() == js.TypeString {
		msg += ": " + c.String()
	}
	return msg
}
