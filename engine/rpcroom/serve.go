package rpcroom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Receive handles one message that arrived from peer on the rpc2 action.
// It returns quickly: requests are served, and acknowledgements and
// retransmissions sent, in goroutines that Close waits for. Malformed
// messages are dropped and reported through Config.OnWarning.
func (r *Room) Receive(peer string, msg []byte) {
	w, err := DecodeWire(msg)
	if err != nil {
		r.warn(peer, err)
		return
	}
	switch w.Kind {
	case WireRaw:
		r.dispatch(peer, w.Payload)
	case WireChunk:
		if payload, ok := r.onChunk(peer, w); ok {
			r.dispatch(peer, payload)
		}
	case WireChunkAck:
		r.onAck(peer, w)
	}
}

// dispatch acts on one whole envelope, given as WTF-8 text.
func (r *Room) dispatch(peer string, wtf8 []byte) {
	text, err := envelopeJSON(wtf8)
	if err != nil {
		r.warn(peer, fmt.Errorf("%w: %v", ErrMalformed, err))
		return
	}
	env, err := ParseEnvelope(text)
	if err != nil && !(env.Kind == KindRequest && env.RequestID != "") {
		r.warn(peer, err)
		return
	}
	switch env.Kind {
	case KindHandshake:
		r.mu.Lock()
		r.versions[peer] = peerVersion{env.VersionMajor, env.VersionMinor}
		r.mu.Unlock()
		if env.VersionMajor != VersionMajor {
			r.warn(peer, fmt.Errorf("%w: local=%d, remote=%v", ErrVersion, VersionMajor, env.VersionMajor))
		}
	case KindCancel:
		r.mu.Lock()
		if ic := r.inbound[peerKey{peer, env.RequestID}]; ic != nil {
			ic.cancelled = true
			ic.cancel()
		}
		r.mu.Unlock()
	case KindResponse:
		r.onResponse(peer, env)
	case KindRequest:
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.serving[peer] >= r.cfg.MaxRequestsPerPeer {
			r.warnLocked(peer, fmt.Errorf("%w: more than %d requests at once", ErrLimit, r.cfg.MaxRequestsPerPeer))
			return
		}
		if r.closed {
			return
		}
		r.serving[peer]++
		r.backgroundLocked(func(ctx context.Context) {
			defer r.served(peer)
			r.serve(ctx, peer, env, err)
		})
	}
}

// served counts a request of peer as answered (or dropped).
func (r *Room) served(peer string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.serving[peer]--; r.serving[peer] <= 0 {
		delete(r.serving, peer)
	}
}

// onResponse settles the call the response answers, if it is still
// waiting and was made to this peer.
func (r *Room) onResponse(peer string, env Envelope) {
	r.mu.Lock()
	p := r.pending[env.RequestID]
	r.mu.Unlock()
	if p == nil || p.peer != peer {
		return
	}
	if env.OK {
		r.settle(env.RequestID, callResult{data: env.Data})
		return
	}
	r.settle(env.RequestID, callResult{err: &Error{
		Code: env.Error.Code, Message: env.Error.Message, Details: env.Error.Details,
	}})
}

// serve answers one request (commonlib RpcRoom onEnvelopePayload): a
// request CanAccept refuses gets no answer; a malformed one
// PROTOCOL_ERROR; one from a peer of another major version, or for an
// unknown method, REMOTE_ERROR; otherwise the handler's result, or
// CANCELLED if the caller cancelled meanwhile.
func (r *Room) serve(ctx context.Context, peer string, env Envelope, parseErr error) {
	if r.cfg.CanAccept != nil && !r.cfg.CanAccept(ctx, peer, env.Method) {
		return
	}
	if parseErr != nil {
		r.respondError(ctx, peer, env.RequestID, ErrorShape{Code: CodeProtocol, Message: parseErr.Error()})
		return
	}
	r.mu.Lock()
	v, known := r.versions[peer]
	h := r.handlers[env.Method]
	r.mu.Unlock()
	if known && v.major != VersionMajor {
		r.respondError(ctx, peer, env.RequestID, ErrorShape{Code: CodeRemoteError,
			Message: fmt.Sprintf("RPC major mismatch: local=%d, remote=%v", VersionMajor, v.major)})
		return
	}
	if known && v.minor != VersionMinor {
		r.warn(peer, fmt.Errorf("%w: minor local=%d, remote=%v", ErrVersion, VersionMinor, v.minor))
	}
	if h == nil {
		r.respondError(ctx, peer, env.RequestID, ErrorShape{Code: CodeRemoteError, Message: "Method not found: " + env.Method})
		return
	}
	k := peerKey{peer, env.RequestID}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ic := &inboundCall{cancel: cancel}
	r.mu.Lock()
	r.inbound[k] = ic
	r.mu.Unlock()
	data, err := callHandler(hctx, h, peer, env.Args)
	r.mu.Lock()
	cancelled := ic.cancelled
	if r.inbound[k] == ic {
		delete(r.inbound, k)
	}
	r.mu.Unlock()
	if cancelled {
		err = &Error{Code: CodeCancelled, Message: "Invocation cancelled"}
	}
	if err != nil {
		r.respondError(ctx, peer, env.RequestID, errorShape(err))
		return
	}
	out, err := okEnvelope(env.RequestID, data)
	if err == nil {
		err = r.sendEnvelope(ctx, peer, out)
	}
	if err != nil {
		r.cfg.Logger.Debug("rpcroom: response not sent", "peer", peer, "err", err)
	}
}

// callHandler runs h and encodes its result; a panic becomes an error.
func callHandler(ctx context.Context, h HandlerFunc, peer string, args []json.RawMessage) (data json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			data, err = nil, fmt.Errorf("handler panicked: %v", p)
		}
	}()
	res, err := h(ctx, peer, args)
	if err != nil {
		return nil, err
	}
	switch v := res.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if v == nil {
			return nil, nil
		}
	}
	b, err := marshalJSON(res)
	if err != nil {
		return nil, fmt.Errorf("cannot encode result: %w", err)
	}
	return b, nil
}

// errorShape is commonlib's asRpcErrorShape for Go errors.
func errorShape(err error) ErrorShape {
	var e *Error
	if errors.As(err, &e) {
		return ErrorShape{Code: e.Code, Message: e.Message, Details: e.Details}
	}
	return ErrorShape{Code: CodeRemoteError, Message: err.Error()}
}

func (r *Room) respondError(ctx context.Context, peer, id string, shape ErrorShape) {
	env, err := errorEnvelope(id, shape)
	if err == nil {
		err = r.sendEnvelope(ctx, peer, env)
	}
	if err != nil {
		r.cfg.Logger.Debug("rpcroom: error response not sent", "peer", peer, "err", err)
	}
}
