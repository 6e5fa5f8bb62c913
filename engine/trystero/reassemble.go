package trystero

import (
	"encoding/json"
	"fmt"
	"sync"
)

// Default bounds of a Reassembler. Trystero itself keeps every partial
// message until its last frame, without limit; LiveSync's largest
// messages (rpc2 wire messages, whose payload is capped at 15360 bytes
// before JSON escaping) stay far below these.
const (
	DefaultMaxMessageBytes = 1 << 20 // one message, metadata included
	DefaultMaxPeerBytes    = 4 << 20 // all partial messages of one peer
	DefaultMaxInFlight     = 16      // partial messages of one peer
)

// ReassemblerConfig bounds what one peer can make a Reassembler hold.
// Zero fields take the defaults above.
type ReassemblerConfig struct {
	// MaxMessageBytes bounds one message (metadata and body). A message
	// that grows past it is dropped: the frame that overflows returns an
	// error wrapping ErrTooLarge and the rest of its frames, up to its
	// last, are discarded.
	MaxMessageBytes int
	// MaxPeerBytes bounds the bytes of all partial messages of one peer;
	// a frame that would exceed it drops its message as above.
	MaxPeerBytes int
	// MaxInFlight bounds the partial messages of one peer. A frame that
	// starts one more evicts the peer's least recently extended one,
	// whose later frames are then discarded (a few evicted keys are
	// remembered for that).
	MaxInFlight int
}

func (c ReassemblerConfig) withDefaults() ReassemblerConfig {
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxPeerBytes <= 0 {
		c.MaxPeerBytes = DefaultMaxPeerBytes
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	return c
}

// Message is one complete action message.
type Message struct {
	Peer   string
	Action string
	Nonce  uint16
	// Metadata is the metadata's JSON text, nil when the sender gave none.
	Metadata json.RawMessage
	// Binary and JSON are the last frame's flags. Body holds the raw bytes
	// of a binary message; otherwise the body decoded as text (UTF-8, a
	// leading byte order mark dropped, invalid sequences as U+FFFD), which
	// for a JSON message is checked to be valid JSON.
	Binary, JSON bool
	Body         []byte
}

// Text returns the body of a string or JSON message as a string.
func (m *Message) Text() string { return string(m.Body) }

// key names one message in flight from a peer.
type key struct {
	action string
	nonce  uint16
}

// partial is a message whose last frame has not arrived.
type partial struct {
	chunks  [][]byte
	meta    []byte
	hasMeta bool
	size    int
	touched uint64 // the peer's frame counter at the last frame
	discard bool   // overflowed: drop frames until the last
}

// peerState is a peer's messages in flight and the keys recently evicted.
type peerState struct {
	inFlight map[key]*partial
	evicted  []key
	bytes    int
	clock    uint64
}

// Reassembler joins the action frames of each peer into messages, by
// (peer, action, nonce), as Trystero's receiver does (trystero core dist
// action-wire.mjs handleData): frames are appended in arrival order (the
// data channel is reliable and ordered), a metadata frame sets the
// message's metadata, and the last frame completes the message with the
// flags it carries. Unlike Trystero it bounds what a peer can make it
// hold (ReassemblerConfig). It is safe for concurrent use.
//
// Trystero drops frames of most actions from a peer whose handshake is
// pending (ReceiveWhilePending); the caller applies that rule, with
// ParseAction and AddFrame, before frames reach the Reassembler.
type Reassembler struct {
	cfg   ReassemblerConfig
	mu    sync.Mutex
	peers map[string]*peerState
}

// NewReassembler returns a Reassembler with the given bounds.
func NewReassembler(cfg ReassemblerConfig) *Reassembler {
	return &Reassembler{cfg: cfg.withDefaults(), peers: make(map[string]*peerState)}
}

// Add takes one action frame (a room frame's payload) from peer. It
// returns the completed message when the frame was the last of one, nil
// otherwise.
func (r *Reassembler) Add(peer string, frame []byte) (*Message, error) {
	h, body := ParseAction(frame)
	return r.AddFrame(peer, h, body)
}

// AddFrame is Add for a frame already split by ParseAction. The body is
// copied. Errors: metadata or a JSON body that does not parse (the
// message is dropped, as Trystero's JSON.parse would throw; bad metadata
// leaves the message open without metadata, as in Trystero) wraps
// ErrMalformed; an overflowing message wraps ErrTooLarge.
func (r *Reassembler) AddFrame(peer string, h ActionHeader, body []byte) (*Message, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ps := r.peers[peer]
	if ps == nil {
		ps = &peerState{inFlight: make(map[key]*partial)}
		r.peers[peer] = ps
	}
	ps.clock++
	k := key{h.Name, h.Nonce}
	p := ps.inFlight[k]
	if p == nil {
		if r.wasEvicted(ps, k, h.Last) {
			return nil, nil
		}
		if len(ps.inFlight) >= r.cfg.MaxInFlight {
			r.evictOldest(ps)
		}
		p = &partial{}
		ps.inFlight[k] = p
	}
	p.touched = ps.clock
	if err := r.store(ps, k, p, h, body); err != nil {
		return nil, err
	}
	if !h.Last {
		return nil, nil
	}
	delete(ps.inFlight, k)
	ps.bytes -= p.size
	if len(ps.inFlight) == 0 && len(ps.evicted) == 0 {
		delete(r.peers, peer)
	}
	if p.discard {
		return nil, nil
	}
	return complete(peer, h, p)
}

// store adds one frame's body or metadata to p, enforcing the bounds.
// Metadata is kept as decoded text and counted at that length.
func (r *Reassembler) store(ps *peerState, k key, p *partial, h ActionHeader, body []byte) error {
	if p.discard {
		return nil
	}
	var text []byte
	delta := len(body)
	if h.Metadata {
		text = []byte(decodeText(body))
		delta = len(text) - len(p.meta)
	}
	if p.size+delta > r.cfg.MaxMessageBytes || ps.bytes+delta > r.cfg.MaxPeerBytes {
		ps.bytes -= p.size
		*p = partial{discard: true, touched: p.touched}
		return fmt.Errorf("%w: message %q/%d from a peer exceeds the reassembly bounds", ErrTooLarge, k.action, k.nonce)
	}
	if h.Metadata {
		if !json.Valid(text) {
			return fmt.Errorf("%w: metadata of %q/%d is not JSON", ErrMalformed, k.action, k.nonce)
		}
		p.meta, p.hasMeta = text, true
	} else {
		p.chunks = append(p.chunks, append([]byte(nil), body...))
	}
	p.size += delta
	ps.bytes += delta
	return nil
}

// complete builds the message of a partial whose last frame arrived.
func complete(peer string, h ActionHeader, p *partial) (*Message, error) {
	full := make([]byte, 0, p.size)
	for _, c := range p.chunks {
		full = append(full, c...)
	}
	m := &Message{Peer: peer, Action: h.Name, Nonce: h.Nonce, Binary: h.Binary, JSON: h.JSON && !h.Binary}
	if p.hasMeta {
		m.Metadata = json.RawMessage(p.meta)
	}
	if m.Binary {
		m.Body = full
		return m, nil
	}
	m.Body = []byte(decodeText(full))
	if m.JSON && !json.Valid(m.Body) {
		return nil, fmt.Errorf("%w: body of %q/%d is not JSON", ErrMalformed, h.Name, h.Nonce)
	}
	return m, nil
}

// wasEvicted reports whether k's message was evicted earlier, so that its
// frame must be discarded; the last frame forgets the key.
func (r *Reassembler) wasEvicted(ps *peerState, k key, last bool) bool {
	for i, e := range ps.evicted {
		if e == k {
			if last {
				ps.evicted = append(ps.evicted[:i], ps.evicted[i+1:]...)
			}
			return true
		}
	}
	return false
}

// evictOldest drops the peer's least recently extended partial message
// and remembers its key, keeping at most MaxInFlight such keys.
func (r *Reassembler) evictOldest(ps *peerState) {
	var oldest key
	var op *partial
	for k, p := range ps.inFlight {
		if op == nil || p.touched < op.touched {
			oldest, op = k, p
		}
	}
	if op == nil {
		return
	}
	delete(ps.inFlight, oldest)
	ps.bytes -= op.size
	if len(ps.evicted) >= r.cfg.MaxInFlight {
		ps.evicted = ps.evicted[1:]
	}
	ps.evicted = append(ps.evicted, oldest)
}

// DropPeer forgets everything held for peer, as Trystero does when the
// peer leaves or its connection closes.
func (r *Reassembler) DropPeer(peer string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.peers, peer)
}

// InFlight returns the number of partial messages held for peer.
func (r *Reassembler) InFlight(peer string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ps := r.peers[peer]; ps != nil {
		return len(ps.inFlight)
	}
	return 0
}
