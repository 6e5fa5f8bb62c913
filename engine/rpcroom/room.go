package rpcroom

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// HandlerFunc serves one method. peer is the caller's transport id; args
// are the request's arguments as raw JSON (lone surrogates as \udxxx
// escapes). ctx ends when the caller cancels, the peer leaves or the Room
// closes. The result is sent as the response's data: a json.RawMessage
// as it is, nil as no data at all (a JavaScript handler's undefined; use
// json.RawMessage("null") for null), anything else through
// encoding/json. An error is sent as {code, message, details}: an *Error
// keeps its Code, Message and Details, any other error becomes
// REMOTE_ERROR with err.Error() as the message (commonlib
// src/rpc/errors.ts asRpcErrorShape).
type HandlerFunc func(ctx context.Context, peer string, args []json.RawMessage) (any, error)

// Room is commonlib's RpcRoom (src/rpc/RpcRoom.ts): request/response
// RPC between peers over one message transport, with chunking of large
// envelopes. Its methods are safe for concurrent use.
type Room struct {
	cfg    Config
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // handlers and background sends

	mu        sync.Mutex
	closed    bool
	handlers  map[string]HandlerFunc
	pending   map[string]*pendingCall  // by request id
	inbound   map[peerKey]*inboundCall // requests being served
	out       map[string]*outStream    // chunked envelopes sent, by stream id
	in        map[peerKey]*inStream    // chunked envelopes arriving
	inPerPeer map[string]int           // len of in per peer
	inBytes   map[string]int           // bytes held in in per peer
	done      map[string][]string      // recently completed stream ids per peer
	versions  map[string]peerVersion   // from handshakes
	serving   map[string]int           // requests being served per peer
}

// peerKey names a request or stream of one peer.
type peerKey struct{ peer, id string }

type peerVersion struct{ major, minor float64 }

type pendingCall struct {
	peer  string
	ch    chan callResult // buffered 1; receives exactly once
	timer Timer
}

type callResult struct {
	data json.RawMessage
	err  error
}

type inboundCall struct {
	cancel    context.CancelFunc
	cancelled bool
}

// New returns a Room that sends through cfg.Transport.
func New(cfg Config) (*Room, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Room{
		cfg:       cfg.withDefaults(),
		ctx:       ctx,
		cancel:    cancel,
		handlers:  map[string]HandlerFunc{},
		pending:   map[string]*pendingCall{},
		inbound:   map[peerKey]*inboundCall{},
		out:       map[string]*outStream{},
		in:        map[peerKey]*inStream{},
		inPerPeer: map[string]int{},
		inBytes:   map[string]int{},
		done:      map[string][]string{},
		versions:  map[string]peerVersion{},
		serving:   map[string]int{},
	}, nil
}

// Handle registers fn for method, replacing any earlier handler. method
// must contain "." or "/"; otherwise Handle returns an error matching
// ErrProtocol.
func (r *Room) Handle(method string, fn HandlerFunc) error {
	if !ValidMethod(method) {
		return &Error{Code: CodeProtocol, Message: "Method must be namespaced: " + method}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handlers[method] = fn
	return nil
}

// Call invokes method on peer with args and the timeout LiveSync uses for
// that method (MethodTimeout). See CallTimeout.
func (r *Room) Call(ctx context.Context, peer, method string, args ...any) (json.RawMessage, error) {
	return r.CallTimeout(ctx, peer, method, MethodTimeout(method), args...)
}

// CallTimeout invokes method on peer with args (each encoded with
// encoding/json; a json.RawMessage is sent as it is) and waits for the
// response's data, nil if the response had none. timeout <= 0 waits
// without limit. Errors are *Error: PROTOCOL_ERROR for a method without
// "." or "/" or unencodable args; TIMEOUT; NOT_CONNECTED when sending
// fails, the peer leaves or the Room closes; CANCELLED when ctx ends
// (a cancel envelope then tells the peer, and a later response is
// ignored); or the code of the peer's error response.
func (r *Room) CallTimeout(ctx context.Context, peer, method string, timeout time.Duration, args ...any) (json.RawMessage, error) {
	if !ValidMethod(method) {
		return nil, &Error{Code: CodeProtocol, Message: "Method must be namespaced: " + method}
	}
	raw := make([]json.RawMessage, len(args))
	for i, a := range args {
		b, err := marshalJSON(a)
		if err != nil {
			return nil, &Error{Code: CodeProtocol, Message: fmt.Sprintf("cannot encode argument %d", i), Err: err}
		}
		raw[i] = b
	}
	id, err := newID("req", r.cfg.Clock.Now(), r.cfg.Rand)
	if err != nil {
		return nil, &Error{Code: CodeNotConnected, Message: "cannot make a request id", Err: err}
	}
	env, err := requestEnvelope(id, method, raw)
	if err != nil {
		return nil, &Error{Code: CodeProtocol, Message: "cannot encode request", Err: err}
	}
	p := &pendingCall{peer: peer, ch: make(chan callResult, 1)}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, &Error{Code: CodeNotConnected, Message: "Room closed"}
	}
	r.pending[id] = p
	if timeout > 0 {
		p.timer = r.cfg.Clock.AfterFunc(timeout, func() {
			r.settle(id, callResult{err: &Error{Code: CodeTimeout, Message: "RPC timed out: " + method}})
		})
	}
	r.mu.Unlock()
	if err := r.sendEnvelope(ctx, peer, env); err != nil {
		r.settle(id, callResult{err: &Error{Code: CodeNotConnected, Message: "cannot send request", Err: err}})
	}
	select {
	case res := <-p.ch:
		return res.data, res.err
	case <-ctx.Done():
		r.settle(id, callResult{})
		r.background(func(bg context.Context) {
			if env, err := cancelEnvelope(id); err == nil {
				_ = r.sendEnvelope(bg, peer, env)
			}
		})
		return nil, &Error{Code: CodeCancelled, Message: "Invocation cancelled", Err: ctx.Err()}
	}
}

// settle removes the pending call id, if still pending, and hands it res.
func (r *Room) settle(id string, res callResult) {
	r.mu.Lock()
	p := r.pending[id]
	delete(r.pending, id)
	r.mu.Unlock()
	if p == nil {
		return
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	p.ch <- res
}

// background runs f in a goroutine that Close waits for, unless the Room
// is closed; f's context ends at Close.
func (r *Room) background(f func(ctx context.Context)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backgroundLocked(f)
}

// PeerJoined sends peer the handshake envelope {"kind":"handshake",
// "versionMajor":1,"versionMinor":0}, as RpcRoom does when its transport
// reports a joining peer.
func (r *Room) PeerJoined(peer string) {
	r.background(func(ctx context.Context) {
		env, err := handshakeEnvelope()
		if err == nil {
			err = r.sendEnvelope(ctx, peer, env)
		}
		if err != nil {
			r.cfg.Logger.Debug("rpcroom: handshake not sent", "peer", peer, "err", err)
		}
	})
}

// PeerLeft forgets peer: its calls still waiting fail with NOT_CONNECTED,
// the contexts of its requests being served end, and its streams in
// either direction are dropped. (commonlib's RpcRoom only forgets the
// peer's version and leaves its calls to time out.)
func (r *Room) PeerLeft(peer string) {
	var gone []string
	r.mu.Lock()
	delete(r.versions, peer)
	for id, p := range r.pending {
		if p.peer == peer {
			gone = append(gone, id)
		}
	}
	for k, ic := range r.inbound {
		if k.peer == peer {
			ic.cancel()
		}
	}
	for k, s := range r.in {
		if k.peer == peer {
			s.stop()
			delete(r.in, k)
		}
	}
	delete(r.inPerPeer, peer)
	delete(r.inBytes, peer)
	delete(r.done, peer)
	for id, o := range r.out {
		if o.peer == peer {
			o.timer.Stop()
			delete(r.out, id)
		}
	}
	r.mu.Unlock()
	for _, id := range gone {
		r.settle(id, callResult{err: &Error{Code: CodeNotConnected, Message: "Peer left"}})
	}
}

// Close stops the Room: calls still waiting fail with NOT_CONNECTED
// ("Room closed"), the contexts of handlers end, timers stop, and Close
// waits for handlers and background sends to return. Later messages are
// ignored. Close is idempotent.
func (r *Room) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	ids := make([]string, 0, len(r.pending))
	for id := range r.pending {
		ids = append(ids, id)
	}
	for k, s := range r.in {
		s.stop()
		delete(r.in, k)
	}
	for id, o := range r.out {
		o.timer.Stop()
		delete(r.out, id)
	}
	r.mu.Unlock()
	r.cancel()
	for _, id := range ids {
		r.settle(id, callResult{err: &Error{Code: CodeNotConnected, Message: "Room closed"}})
	}
	r.wg.Wait()
	return nil
}

// warn reports a dropped message.
func (r *Room) warn(peer string, err error) {
	r.cfg.Logger.Debug("rpcroom: message dropped", "peer", peer, "err", err)
	if r.cfg.OnWarning != nil {
		r.cfg.OnWarning(peer, err)
	}
}
