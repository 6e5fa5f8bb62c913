package rpcroom

import (
	"context"
	"fmt"
	"slices"
)

// doneMemory is how many completed stream ids are remembered per peer, so
// that a late duplicate part cannot start the stream over.
const doneMemory = 64

// outStream is a chunked envelope sent and kept for retransmission until
// the receiver acknowledges it, the peer leaves or it idles out.
type outStream struct {
	peer  string
	parts [][]uint16
	timer Timer
}

// inStream is a chunked envelope being reassembled.
type inStream struct {
	total    int
	size     int            // bytes held in parts
	parts    map[int][]byte // WTF-8 payloads by index
	ackTimer Timer
	idle     Timer
}

func (s *inStream) stop() {
	if s.ackTimer != nil {
		s.ackTimer.Stop()
	}
	if s.idle != nil {
		s.idle.Stop()
	}
}

func (s *inStream) missing() []int {
	m := []int{}
	for i := range s.total {
		if _, ok := s.parts[i]; !ok {
			m = append(m, i)
		}
	}
	return m
}

// sendEnvelope sends the envelope JSON text env to peer: raw when its
// UTF-8 length is at most MaxWirePayloadBytes, otherwise as chunks that
// are kept for retransmission (commonlib RpcRoom sendEnvelope).
func (r *Room) sendEnvelope(ctx context.Context, peer string, env []byte) error {
	units := jsUnits(string(env))
	max := r.cfg.MaxWirePayloadBytes
	if EncodedLen(units) <= max {
		return r.cfg.Transport.Send(ctx, peer, EncodeRaw(units))
	}
	id, err := newID("stream", r.cfg.Clock.Now(), r.cfg.Rand)
	if err != nil {
		return err
	}
	parts := SplitUTF16(units, max)
	o := &outStream{peer: peer, parts: parts}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return &Error{Code: CodeNotConnected, Message: "Room closed"}
	}
	o.timer = r.cfg.Clock.AfterFunc(r.cfg.StreamIdleTimeout, func() { r.forgetOut(id, o) })
	r.out[id] = o
	r.mu.Unlock()
	for i, p := range parts {
		if err := r.cfg.Transport.Send(ctx, peer, EncodeChunk(id, i, len(parts), p)); err != nil {
			r.forgetOut(id, o)
			return err
		}
	}
	return nil
}

func (r *Room) forgetOut(id string, o *outStream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out[id] == o {
		o.timer.Stop()
		delete(r.out, id)
	}
}

// onAck handles a chunk-ack from peer: an empty list completes the stream,
// otherwise the listed parts are sent again (once each, however often an
// index is listed; unknown indices are ignored).
func (r *Room) onAck(peer string, w Wire) {
	r.mu.Lock()
	o := r.out[w.StreamID]
	if o == nil || o.peer != peer {
		r.mu.Unlock()
		return
	}
	if len(w.Missing) == 0 {
		o.timer.Stop()
		delete(r.out, w.StreamID)
		r.mu.Unlock()
		return
	}
	o.timer.Stop()
	o.timer = r.cfg.Clock.AfterFunc(r.cfg.StreamIdleTimeout, func() { r.forgetOut(w.StreamID, o) })
	idx := slices.Clone(w.Missing)
	slices.Sort(idx)
	idx = slices.Compact(idx)
	r.mu.Unlock()
	r.background(func(ctx context.Context) {
		for _, i := range idx {
			if i < 0 || i >= len(o.parts) {
				continue
			}
			if err := r.cfg.Transport.Send(ctx, peer, EncodeChunk(w.StreamID, i, len(o.parts), o.parts[i])); err != nil {
				r.cfg.Logger.Debug("rpcroom: resend failed", "peer", peer, "err", err)
				return
			}
		}
	})
}

// onChunk stores one part of an incoming stream; when the stream is
// complete it acknowledges it with an empty missing list and returns the
// joined WTF-8 payload.
func (r *Room) onChunk(peer string, w Wire) ([]byte, bool) {
	k := peerKey{peer, w.StreamID}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || slices.Contains(r.done[peer], w.StreamID) {
		return nil, false
	}
	s := r.in[k]
	if s == nil {
		if w.Total > r.cfg.MaxParts {
			r.warnLocked(peer, fmt.Errorf("%w: %d parts", ErrLimit, w.Total))
			return nil, false
		}
		if r.inPerPeer[peer] >= r.cfg.MaxStreamsPerPeer {
			r.warnLocked(peer, fmt.Errorf("%w: %d open streams", ErrLimit, r.inPerPeer[peer]))
			return nil, false
		}
		s = &inStream{total: w.Total, parts: map[int][]byte{}}
		r.in[k] = s
		r.inPerPeer[peer]++
	}
	if w.Total != s.total {
		r.warnLocked(peer, fmt.Errorf("%w: part says %d parts, stream has %d", ErrMalformed, w.Total, s.total))
		return nil, false
	}
	delta := len(w.Payload) - len(s.parts[w.Index])
	s.size += delta
	r.inBytes[peer] += delta
	if s.size > r.cfg.MaxMessageBytes || r.inBytes[peer] > r.cfg.MaxMessageBytes {
		r.dropInLocked(k, s)
		r.warnLocked(peer, fmt.Errorf("%w: more than %d bytes", ErrLimit, r.cfg.MaxMessageBytes))
		return nil, false
	}
	s.parts[w.Index] = w.Payload
	s.stop()
	if len(s.parts) < s.total {
		s.ackTimer = r.cfg.Clock.AfterFunc(r.cfg.ChunkMissingRetry, func() { r.askMissing(k, s) })
		s.idle = r.cfg.Clock.AfterFunc(r.cfg.StreamIdleTimeout, func() { r.dropStale(k, s) })
		return nil, false
	}
	r.dropInLocked(k, s)
	d := append(r.done[peer], w.StreamID)
	if len(d) > doneMemory {
		d = d[len(d)-doneMemory:]
	}
	r.done[peer] = d
	payload := make([]byte, 0, s.size)
	for i := range s.total {
		payload = append(payload, s.parts[i]...)
	}
	r.backgroundLocked(func(ctx context.Context) {
		_ = r.cfg.Transport.Send(ctx, peer, EncodeChunkAck(w.StreamID, nil))
	})
	return payload, true
}

func (r *Room) dropInLocked(k peerKey, s *inStream) {
	s.stop()
	delete(r.in, k)
	if r.inBytes[k.peer] -= s.size; r.inBytes[k.peer] <= 0 {
		delete(r.inBytes, k.peer)
	}
	if r.inPerPeer[k.peer]--; r.inPerPeer[k.peer] <= 0 {
		delete(r.inPerPeer, k.peer)
	}
}

// askMissing sends the missing indices of a stream that went quiet
// (commonlib RpcRoom scheduleMissingAck). Like commonlib, it asks once
// per quiet period: the timer is re-armed only by another part.
func (r *Room) askMissing(k peerKey, s *inStream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.in[k] != s {
		return
	}
	missing := s.missing()
	r.backgroundLocked(func(ctx context.Context) {
		_ = r.cfg.Transport.Send(ctx, k.peer, EncodeChunkAck(k.id, missing))
	})
}

func (r *Room) dropStale(k peerKey, s *inStream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.in[k] != s {
		return
	}
	r.dropInLocked(k, s)
	r.warnLocked(k.peer, fmt.Errorf("%w: stream %s", ErrStale, k.id))
}

// backgroundLocked is background for a caller holding r.mu.
func (r *Room) backgroundLocked(f func(ctx context.Context)) {
	if r.closed {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f(r.ctx)
	}()
}

// warnLocked is warn for a caller holding r.mu; OnWarning must not call
// back into the Room.
func (r *Room) warnLocked(peer string, err error) { r.warn(peer, err) }
