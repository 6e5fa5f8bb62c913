package trysteronet

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/engine/trystero"
)

var sleep = time.Sleep

// disconnectedClose is how long a connection may stay "disconnected"
// before it counts as closed (trystero peer.mjs disconnectedCloseDelayMs).
const disconnectedClose = 5 * time.Second

// maxPendingCandidates bounds the remote candidates buffered before a
// remote description is set.
const maxPendingCandidates = 64

// conn is one WebRTC connection to a peer, offering or answering, and
// its data channel's room session.
type conn struct {
	r       *Room
	peer    string
	pc      rtcPeer
	offerID string // the offer it answers (answering side)
	relay   int    // the relay that offer arrived on

	// smu serialises sends (and their waits for the channel to drain);
	// it is never held with mu.
	smu  sync.Mutex
	low  chan struct{} // the channel's buffered amount fell low (capacity 1)
	gone chan struct{} // closed by close

	mu         sync.Mutex
	dc         rtcChannel
	remoteSet  bool
	candidates []trystero.ICECandidate
	opened     bool
	hs         *trystero.PeerHandshake
	active     bool
	closed     bool
	hsTimer    *time.Timer
	discTimer  *time.Timer
}

// newConn makes a peer connection with the room's ICE configuration;
// the offering side creates the "data" channel as trystero does
// (default options: ordered, reliable, not negotiated).
func (r *Room) newConn(peer string, offering bool) (*conn, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	pc, err := newRTC(r.cfg)
	if err != nil {
		r.mu.Unlock()
		return nil, fmt.Errorf("trysteronet: peer connection: %w", err)
	}
	c := &conn{r: r, peer: peer, pc: pc, low: make(chan struct{}, 1), gone: make(chan struct{})}
	r.conns[c] = struct{}{}
	r.mu.Unlock()
	pc.OnStateChange(c.onState)
	if offering {
		dc, err := pc.CreateDataChannel("data")
		if err != nil {
			c.close(false)
			return nil, fmt.Errorf("trysteronet: data channel: %w", err)
		}
		c.setupChannel(dc)
	} else {
		pc.OnDataChannel(c.setupChannel)
	}
	return c, nil
}

func (c *conn) setupChannel(dc rtcChannel) {
	c.mu.Lock()
	if c.dc != nil || c.closed {
		c.mu.Unlock()
		_ = dc.Close()
		return
	}
	c.dc = dc
	c.mu.Unlock()
	dc.SetBufferedAmountLowThreshold(bufferedLow)
	dc.OnBufferedAmountLow(func() {
		select {
		case c.low <- struct{}{}:
		default:
		}
	})
	dc.OnOpen(c.open)
	dc.OnMessage(c.onData)
	dc.OnClose(func() { c.close(true) })
}

func (c *conn) onState(s rtcState) {
	switch s {
	case rtcFailed, rtcClosed:
		c.close(true)
	case rtcDisconnected:
		c.mu.Lock()
		if c.discTimer == nil && !c.closed {
			c.discTimer = time.AfterFunc(disconnectedClose, func() {
				if c.pc.State() == rtcDisconnected {
					c.close(true)
				}
			})
		}
		c.mu.Unlock()
	default:
		c.mu.Lock()
		if c.discTimer != nil {
			c.discTimer.Stop()
			c.discTimer = nil
		}
		c.mu.Unlock()
	}
}

// setRemote applies the peer's offer or answer, then the candidates that
// came before it.
func (c *conn) setRemote(offer bool, sdp string) error {
	if err := c.pc.SetRemote(offer, sdp); err != nil {
		return err
	}
	c.mu.Lock()
	c.remoteSet = true
	pending := c.candidates
	c.candidates = nil
	c.mu.Unlock()
	for _, cand := range pending {
		_ = c.pc.AddCandidate(cand)
	}
	return nil
}

// addCandidate applies a remote candidate, or keeps it until the remote
// description is set.
func (c *conn) addCandidate(cand trystero.ICECandidate) {
	c.mu.Lock()
	if !c.remoteSet {
		if len(c.candidates) < maxPendingCandidates {
			c.candidates = append(c.candidates, cand)
		}
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	if err := c.pc.AddCandidate(cand); err != nil {
		c.r.log.Debug("trysteronet: remote candidate refused", "peer", c.peer, "err", err)
	}
}

// open starts the room session when the data channel opens: the room's
// presence, then the password handshake (trystero strategy.mjs
// connectPeer, handshake.mjs start).
func (c *conn) open() {
	r := c.r
	c.mu.Lock()
	if c.opened || c.closed {
		c.mu.Unlock()
		return
	}
	c.opened = true
	c.hs = trystero.NewPeerHandshake(r.selfID, c.peer, r.cfg.Password, r.cfg.AppID, r.cfg.RoomID)
	outs := c.hs.Start(r.rand)
	c.hsTimer = time.AfterFunc(r.cfg.HandshakeTimeout, func() {
		c.mu.Lock()
		done := c.active || c.closed
		c.mu.Unlock()
		if done {
			return
		}
		r.joinError(c.peer, fmt.Errorf("trysteronet: peer %s: handshake timed out after %s", c.peer, r.cfg.HandshakeTimeout))
		c.close(true)
	})
	c.mu.Unlock()
	r.post(func() { r.connected(c) })
	err := c.sendFrames([][]byte{trystero.PresenceFrame(r.token, true)})
	if err == nil {
		err = c.sendOutgoing(outs)
	}
	if err != nil {
		c.close(true)
	}
}

func (c *conn) sendOutgoing(outs []trystero.Outgoing) error {
	for _, o := range outs {
		if err := c.sendAction(o.Action, o.Kind, o.Body); err != nil {
			return err
		}
	}
	return nil
}

// sendAction splits a message into action frames with the room's next
// nonce for the action and sends them as room frames.
func (c *conn) sendAction(action string, kind trystero.BodyKind, body []byte) error {
	r := c.r
	r.sendMu.Lock()
	frames, err := r.sender.Split(action, body, kind, nil)
	r.sendMu.Unlock()
	if err != nil {
		return err
	}
	for i, f := range frames {
		frames[i] = trystero.RoomFrame(r.token, f)
	}
	return c.sendFrames(frames)
}

// bufferedLow and drainTimeout are trystero's backpressure (peer.mjs
// bufferedAmountLowThreshold, action-wire.mjs backpressureWaitTimeoutMs):
// before each frame the sender waits while more than bufferedLow bytes
// are queued on the channel, and gives the message up after
// drainTimeout without progress.
const (
	bufferedLow  = 65535
	drainTimeout = 10 * time.Second
)

var errDrain = errors.New("trysteronet: data channel did not drain")

// sendFrames sends data-channel messages in order, with backpressure.
func (c *conn) sendFrames(frames [][]byte) error {
	c.mu.Lock()
	dc, closed := c.dc, c.closed
	c.mu.Unlock()
	if closed || dc == nil {
		return ErrNotConnected
	}
	c.smu.Lock()
	defer c.smu.Unlock()
	for _, f := range frames {
		if err := c.drain(dc); err != nil {
			return err
		}
		if err := dc.Send(f); err != nil {
			return err
		}
	}
	return nil
}

func (c *conn) drain(dc rtcChannel) error {
	if dc.BufferedAmount() <= bufferedLow {
		return nil
	}
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	for dc.BufferedAmount() > bufferedLow {
		select {
		case <-c.low:
		case <-c.gone:
			return ErrNotConnected
		case <-t.C:
			return errDrain
		}
	}
	return nil
}

// sendLeave sends @_leave if the channel is open.
func (c *conn) sendLeave() bool {
	c.mu.Lock()
	opened := c.opened && !c.closed
	c.mu.Unlock()
	return opened && c.sendAction(trystero.ActionLeave, trystero.BodyString, nil) == nil
}

// onData handles one data-channel message.
func (c *conn) onData(data []byte) {
	r := c.r
	c.open()
	f, err := trystero.ParseFrame(data)
	if err != nil || f.Kind != trystero.FrameRoom || f.RoomToken != r.token {
		return // presence, other rooms and garbage: trystero ignores them too
	}
	h, body := trystero.ParseAction(f.Payload)
	c.mu.Lock()
	active, closed := c.active, c.closed
	c.mu.Unlock()
	if closed || (!active && !trystero.ReceiveWhilePending(h.Name)) {
		return
	}
	m, err := r.reasm.AddFrame(c.peer, h, body)
	if err != nil {
		r.log.Debug("trysteronet: frame dropped", "peer", c.peer, "err", err)
		return
	}
	if m == nil {
		return
	}
	switch m.Action {
	case trystero.ActionHandshakeData, trystero.ActionHandshakeReady:
		c.handshake(m)
	case trystero.ActionLeave:
		c.close(true)
	case trystero.ActionPing:
		_ = c.sendAction(trystero.ActionPong, trystero.BodyString, nil)
	case trystero.ActionPong, trystero.ActionSignal, trystero.ActionStream, trystero.ActionTrack, trystero.ActionResponse:
		// Media renegotiation and requests are not used by LiveSync.
	default:
		if fn := r.handler(m.Action); fn != nil && active {
			fn(c.peer, m.Body)
		}
	}
}

// handshake feeds the password handshake; a failure drops the peer and
// is a join error ("incorrect password for overlapping room").
func (c *conn) handshake(m *trystero.Message) {
	r := c.r
	c.mu.Lock()
	if c.active || c.hs == nil {
		c.mu.Unlock()
		return
	}
	outs, err := c.hs.Receive(m)
	activated := err == nil && c.hs.Active()
	if activated {
		c.active = true
		c.hsTimer.Stop()
	}
	c.mu.Unlock()
	if err == nil {
		err = c.sendOutgoing(outs)
	}
	if err != nil {
		if errors.Is(err, trystero.ErrIncorrectPassword) {
			r.joinError(c.peer, fmt.Errorf("trysteronet: peer %s: %w", c.peer, err))
		}
		c.close(true)
		return
	}
	if !activated {
		return
	}
	r.mu.Lock()
	old := r.active[c.peer]
	r.active[c.peer] = c
	r.mu.Unlock()
	if old != nil && old != c {
		old.close(false)
	}
	for _, fn := range r.joinFns() {
		fn(c.peer)
	}
}

// close ends the connection once; notify tells OnPeerLeave if the peer
// was active (not when the room itself is leaving).
func (c *conn) close(notify bool) {
	r := c.r
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	close(c.gone)
	wasActive := c.active
	if c.hsTimer != nil {
		c.hsTimer.Stop()
	}
	if c.discTimer != nil {
		c.discTimer.Stop()
	}
	c.mu.Unlock()
	r.mu.Lock()
	current := r.active[c.peer] == c
	if current {
		delete(r.active, c.peer)
	}
	delete(r.conns, c)
	r.mu.Unlock()
	if current {
		r.reasm.DropPeer(c.peer)
	}
	// pion's Close waits for its goroutines, which may be the caller;
	// the js build's waits for the host.
	r.wg.Add(1)
	go func() { defer r.wg.Done(); _ = c.pc.Close() }()
	r.post(func() { r.disconnected(c) })
	if notify && wasActive && current {
		for _, fn := range r.leaveFns() {
			fn(c.peer)
		}
	}
}
