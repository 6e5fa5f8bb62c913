//go:build js

package trysteronet

import (
	"errors"
	"fmt"
	"sync"
	"syscall/js"
)

// Host is what the js build takes from its host: the constructors of
// RTCPeerConnection and WebSocket. An undefined one means the global
// constructor of that name.
type Host struct {
	RTCPeerConnection js.Value
	WebSocket         js.Value
}

// constructor is the host's constructor, else the global one.
func constructor(v js.Value, name string) (js.Value, error) {
	if v.IsUndefined() || v.IsNull() {
		v = js.Global().Get(name)
	}
	if v.Type() != js.TypeFunction {
		return js.Value{}, fmt.Errorf("trysteronet: the host has no %s", name)
	}
	return v, nil
}

// try runs f and turns a JS exception into an error.
func try(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if je, ok := r.(js.Error); ok {
				err = errors.New(je.Error())
				return
			}
			panic(r)
		}
	}()
	f()
	return nil
}

// await waits for a Promise; it must not run in a JS callback.
func await(p js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	then := js.FuncOf(func(_ js.Value, a []js.Value) any {
		ch <- result{v: argAt(a, 0)}
		return nil
	})
	catch := js.FuncOf(func(_ js.Value, a []js.Value) any {
		e := argAt(a, 0)
		msg := "rejected"
		if e.Type() == js.TypeObject && e.Get("message").Type() == js.TypeString {
			msg = e.Get("message").String()
		} else if e.Type() == js.TypeString {
			msg = e.String()
		}
		ch <- result{err: errors.New(msg)}
		return nil
	})
	defer then.Release()
	defer catch.Release()
	if err := try(func() { p.Call("then", then, catch) }); err != nil {
		return js.Value{}, err
	}
	r := <-ch
	return r.v, r.err
}

func argAt(a []js.Value, i int) js.Value {
	if i < len(a) {
		return a[i]
	}
	return js.Undefined()
}

// bytesOf copies a message's data: a string (its UTF-8), an ArrayBuffer
// or a view of one; ok false for anything else (a Blob).
func bytesOf(v js.Value) ([]byte, bool) {
	if v.Type() == js.TypeString {
		return []byte(v.String()), true
	}
	g := js.Global()
	u8 := g.Get("Uint8Array")
	switch {
	case v.Type() != js.TypeObject:
		return nil, false
	case v.InstanceOf(g.Get("ArrayBuffer")):
		v = u8.New(v)
	case g.Get("ArrayBuffer").Call("isView", v).Bool():
		v = u8.New(v.Get("buffer"), v.Get("byteOffset"), v.Get("byteLength"))
	default:
		return nil, false
	}
	b := make([]byte, v.Get("byteLength").Int())
	js.CopyBytesToGo(b, v)
	return b, true
}

// serial runs functions one at a time on a goroutine of its own, in the
// order posted: JS callbacks post and return at once (a JS callback
// must not block).
type serial struct {
	mu      sync.Mutex
	q       []func()
	wake    chan struct{}
	done    chan struct{}
	stopped sync.Once
}

func newSerial() *serial {
	s := &serial{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *serial) post(fn func()) { s.postBounded(fn, -1) }

// postBounded posts fn unless limit (>= 0) functions wait already; it
// reports whether it did.
func (s *serial) postBounded(fn func(), limit int) bool {
	s.mu.Lock()
	if limit >= 0 && len(s.q) >= limit {
		s.mu.Unlock()
		return false
	}
	s.q = append(s.q, fn)
	s.mu.Unlock()
	s.notify()
	return true
}

func (s *serial) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *serial) run() {
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			if len(s.q) == 0 {
				s.mu.Unlock()
				break
			}
			fn := s.q[0]
			s.q[0] = nil
			s.q = s.q[1:]
			s.mu.Unlock()
			select {
			case <-s.done:
				return
			default:
			}
			fn()
		}
	}
}

func (s *serial) stop() { s.stopped.Do(func() { close(s.done) }) }

// handlers keeps the js.Funcs set as an object's event handlers, to
// unset and release them together.
type handlers struct {
	mu  sync.Mutex
	obj []js.Value
	key []string
	fns []js.Func
}

func (h *handlers) set(obj js.Value, key string, fn func(ev js.Value)) {
	f := js.FuncOf(func(_ js.Value, a []js.Value) any {
		fn(argAt(a, 0))
		return nil
	})
	h.mu.Lock()
	h.obj, h.key, h.fns = append(h.obj, obj), append(h.key, key), append(h.fns, f)
	h.mu.Unlock()
	obj.Set(key, f)
}

func (h *handlers) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, f := range h.fns {
		h.obj[i].Set(h.key[i], js.Null())
		f.Release()
	}
	h.obj, h.key, h.fns = nil, nil, nil
}
