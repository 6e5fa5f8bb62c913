//go:build js && wasm && p2p

package main

import (
	"errors"
	"fmt"
	"sync"
	"syscall/js"
	"time"

	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
	"github.com/livesync-go/livesync-go/engine/trystero"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// object is the P2P peer as JS sees it: id (this peer's Trystero id),
// peers(), sync(peer, {wait, rewind}), pull(peer, {wait, rewind}),
// notify(), on(topic, fn) and close(). Every method but on() returns a
// Promise; after close, or the vault's, they fail with code "closed".
func (p *p2pPeer) object() js.Value {
	o := object()
	o.Set("id", p.room.SelfID())
	m := func(parse func(args []js.Value) (func() (any, error), error)) js.Func {
		return p.h.method(func(args []js.Value) (func() (any, error), error) {
			if p.ctx.Err() != nil {
				return nil, errP2PClosed
			}
			return parse(args)
		})
	}
	o.Set("peers", m(func([]js.Value) (func() (any, error), error) {
		return func() (any, error) {
			out := []any{}
			for _, ad := range p.hosted.Known() {
				out = append(out, map[string]any{"peerId": ad.PeerID, "name": ad.Name, "platform": ad.Platform})
			}
			return out, nil
		}, nil
	}))
	o.Set("sync", m(func(args []js.Value) (func() (any, error), error) { return p.replicate(args, true) }))
	o.Set("pull", m(func(args []js.Value) (func() (any, error), error) { return p.replicate(args, false) }))
	o.Set("notify", m(func([]js.Value) (func() (any, error), error) {
		return func() (any, error) { p.hosted.NotifyProgress(""); return nil, nil }, nil
	}))
	o.Set("close", method(func([]js.Value) (func() (any, error), error) {
		return func() (any, error) { p.close(); return nil, nil }, nil
	}))
	o.Set("on", js.FuncOf(p.events.on))
	return o
}

var errP2PClosed = fmt.Errorf("livesync.wasm: the P2P peer has left the room: %w", vault.ErrClosed)

// replicate is sync (pull, then ask the peer to pull: legacy/reqSync) or
// pull from the peer named by its id or device name.
func (p *p2pPeer) replicate(args []js.Value, sync bool) (func() (any, error), error) {
	name := arg(args, 0)
	if name.Type() != js.TypeString || name.String() == "" {
		return nil, &optionsError{msg: "name the peer by its id or its device name"}
	}
	waitMS, err := number(arg(args, 1), "wait")
	if err != nil {
		return nil, err
	}
	rewind, err := boolean(arg(args, 1), "rewind")
	if err != nil {
		return nil, err
	}
	wait := defaultPeerWait
	if waitMS > 0 {
		wait = time.Duration(waitMS) * time.Millisecond
	}
	return func() (any, error) {
		ad, err := p.find(p.ctx, name.String(), wait)
		if err != nil {
			return nil, err
		}
		run := p.hosted.Pull
		if sync {
			run = p.hosted.Sync
		}
		res, err := run(p.ctx, ad.PeerID, livesyncrpc.PullOptions{Rewind: rewind})
		if err != nil {
			return nil, err
		}
		mismatch := make([]any, len(res.TweakMismatch))
		for i, k := range res.TweakMismatch {
			mismatch[i] = k
		}
		return map[string]any{"peerId": ad.PeerID, "docs": res.Docs, "batches": res.Batches, "tweakMismatch": mismatch}, nil
	}, nil
}

// p2pEvents delivers the peer's events to the JS listeners on one
// goroutine, in order, as the vault's dispatcher does: "peer" ({kind:
// "join" | "leave" | "error", peerId, error}) and "progress" ({peerId,
// sending, lastSeq, maxSeqInBatch, done}).
type p2pEvents struct {
	mu        sync.Mutex
	queue     []func() (string, map[string]any)
	listeners map[int]listener
	next      int
	wake      chan struct{}
	done      chan struct{}
	once      sync.Once
}

func newP2PEvents() *p2pEvents {
	e := &p2pEvents{listeners: map[int]listener{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go e.run()
	return e
}

func (e *p2pEvents) push(topic string, o map[string]any) {
	e.mu.Lock()
	e.queue = append(e.queue, func() (string, map[string]any) { return topic, o })
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *p2pEvents) peer(kind, peer string, err error) {
	o := map[string]any{"kind": kind, "peerId": peer}
	if err != nil {
		eo := errorObject(err)
		if errors.Is(err, trystero.ErrIncorrectPassword) {
			eo["code"] = "wrong_room_passphrase"
		}
		o["error"] = eo
	}
	e.push("peer", o)
}

func (e *p2pEvents) progress(pr livesyncrpc.Progress) {
	o := map[string]any{"peerId": pr.Peer, "sending": pr.Sending, "done": pr.Info == nil}
	if pr.Info != nil {
		o["lastSeq"], o["maxSeqInBatch"] = pr.Info.LastSeq, pr.Info.MaxSeqInBatch
	}
	e.push("progress", o)
}

func (e *p2pEvents) run() {
	for {
		select {
		case <-e.done:
			return
		case <-e.wake:
		}
		e.mu.Lock()
		q := e.queue
		e.queue = nil
		e.mu.Unlock()
		for _, f := range q {
			topic, o := f()
			e.mu.Lock()
			var fns []js.Value
			for _, l := range e.listeners {
				if l.topic == topic {
					fns = append(fns, l.fn)
				}
			}
			e.mu.Unlock()
			if len(fns) > 0 {
				obj := js.ValueOf(o)
				for _, fn := range fns {
					call(fn, obj)
				}
			}
		}
	}
}

func (e *p2pEvents) stop() { e.once.Do(func() { close(e.done) }) }

// on(topic, fn) calls fn with every event of topic ("peer" or
// "progress") and returns a function that stops it.
func (e *p2pEvents) on(_ js.Value, args []js.Value) any {
	topic, fn := arg(args, 0), arg(args, 1)
	if topic.Type() != js.TypeString || fn.Type() != js.TypeFunction || (topic.String() != "peer" && topic.String() != "progress") {
		return jsError(&optionsError{msg: "on needs a topic (\"peer\" or \"progress\") and a function"})
	}
	e.mu.Lock()
	id := e.next
	e.next++
	e.listeners[id] = listener{topic: topic.String(), fn: fn}
	e.mu.Unlock()
	return js.FuncOf(func(js.Value, []js.Value) any {
		e.mu.Lock()
		delete(e.listeners, id)
		e.mu.Unlock()
		return nil
	})
}
