//go:build !js

package nostrrelay

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// conn is one websocket client. Its reader runs in the HTTP handler's
// goroutine and its writer in its own; they share only the bounded queue
// out. The relay's other goroutines never block on a conn: they offer
// messages, and a full queue closes the connection.
type conn struct {
	r      *Relay
	ws     *websocket.Conn
	remote string
	out    chan []byte
	queued atomic.Int64  // bytes in out, bounded by Config.WriteQueueBytes
	sent   chan struct{} // the writer wrote a message (capacity 1)
	done   chan struct{} // closed by kill
	wrote  chan struct{} // closed when the writer has ended

	once      sync.Once
	closeCode int // set by kill before done is closed
	closeText string

	subs map[string]nostr.Filters // guarded by r.mu

	events, requests bucket // the reader's only
}

func newConn(r *Relay, ws *websocket.Conn, remote string) *conn {
	now := r.cfg.Now()
	return &conn{
		r: r, ws: ws, remote: remote,
		out:      make(chan []byte, r.cfg.WriteQueue),
		sent:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		wrote:    make(chan struct{}),
		subs:     map[string]nostr.Filters{},
		events:   newBucket(r.cfg.EventsPerMinute, now),
		requests: newBucket(r.cfg.EventsPerMinute, now),
	}
}

// kill ends the connection, with a close frame of code and text unless
// code is 0. It does not block.
func (c *conn) kill(code int, text string) {
	c.once.Do(func() {
		c.closeCode, c.closeText = code, text
		close(c.done)
		// Cut short a write to a client that does not read.
		_ = c.ws.UnderlyingConn().SetWriteDeadline(time.Now().Add(closeGrace))
	})
}

// send queues a message of this connection's own reader, waiting while
// the queue is full, in messages or bytes (its own client is slow: only
// it waits). False once the connection is ending.
func (c *conn) send(msg []byte) bool {
	n := int64(len(msg))
	for q := c.queued.Load(); q > 0 && q+n > int64(c.r.cfg.WriteQueueBytes); q = c.queued.Load() {
		select {
		case <-c.sent:
		case <-c.done:
			return false
		}
	}
	c.queued.Add(n)
	select {
	case c.out <- msg:
		return true
	case <-c.done:
		return false
	}
}

// offer queues a message from elsewhere in the relay without waiting; a
// full queue means the client does not keep up, and it is disconnected.
func (c *conn) offer(msg []byte) {
	n := int64(len(msg))
	if c.queued.Add(n) <= int64(c.r.cfg.WriteQueueBytes) {
		select {
		case c.out <- msg:
			return
		default:
		}
	}
	c.queued.Add(-n)
	select {
	case <-c.done:
		return
	default:
	}
	c.r.dropped.Add(1)
	c.r.log.Info("nostr relay: dropping a connection that does not read", "remote", c.remote)
	c.kill(websocket.ClosePolicyViolation, "too slow: the write queue is full")
}

// serve runs the connection until it ends.
func (c *conn) serve() {
	c.r.wg.Add(1)
	go c.write()
	c.read()
	c.kill(0, "")
	<-c.wrote
}

func (c *conn) write() {
	defer c.r.wg.Done()
	defer close(c.wrote)
	defer c.ws.Close()
	ping := time.NewTicker(pingInterval)
	defer ping.Stop()
	for {
		select {
		case msg := <-c.out:
			_ = c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
			err := c.ws.WriteMessage(websocket.TextMessage, msg)
			c.queued.Add(-int64(len(msg)))
			select {
			case c.sent <- struct{}{}:
			default:
			}
			if err != nil {
				c.kill(0, "")
				return
			}
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeTimeout)); err != nil {
				c.kill(0, "")
				return
			}
		case <-c.done:
			if c.closeCode != 0 {
				_ = c.ws.WriteControl(websocket.CloseMessage,
					websocket.FormatCloseMessage(c.closeCode, c.closeText), time.Now().Add(closeGrace))
			}
			return
		}
	}
}

func (c *conn) read() {
	c.ws.SetReadLimit(int64(c.r.readLimit()))
	alive := func() { _ = c.ws.SetReadDeadline(time.Now().Add(idleTimeout)) }
	c.ws.SetPongHandler(func(string) error { alive(); return nil })
	c.ws.SetPingHandler(func(data string) error {
		alive()
		err := c.ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(writeTimeout))
		if errors.Is(err, websocket.ErrCloseSent) {
			return nil
		}
		return err
	})
	for {
		alive()
		typ, data, err := c.ws.ReadMessage()
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				c.r.log.Debug("nostr relay: message too large", "remote", c.remote)
				c.kill(websocket.CloseMessageTooBig, fmt.Sprintf("message larger than %d bytes", c.r.readLimit()))
			}
			return
		}
		if typ != websocket.TextMessage {
			data = nil // not JSON: refused as malformed
		}
		if !c.handle(data) {
			return
		}
	}
}

// handle answers one client message; false ends the connection.
func (c *conn) handle(data []byte) bool {
	msg, err := decodeMessage(data, c.r.cfg.MaxFilters)
	if err != nil {
		return c.refuse(err.(*decodeError))
	}
	now := c.r.cfg.Now()
	switch msg.Label {
	case labelEvent:
		if !c.events.take(now) {
			c.r.rejected.Add(1)
			return c.send(okMessage(msg.Event.ID, false,
				fmt.Sprintf("rate-limited: at most %d events a minute per connection", c.r.cfg.EventsPerMinute)))
		}
		ok, reason := c.r.publish(msg.Event, msg.EventSize)
		if !ok {
			c.r.log.Debug("nostr relay: event refused", "remote", c.remote, "reason", reason)
		}
		return c.send(okMessage(msg.Event.ID, ok, reason))
	case labelReq:
		if !c.requests.take(now) {
			return c.send(closedMessage(msg.SubID,
				fmt.Sprintf("rate-limited: at most %d requests a minute per connection", c.r.cfg.EventsPerMinute)))
		}
		stored, refusal := c.r.subscribe(c, msg.SubID, msg.Filters)
		if refusal != "" {
			return c.send(closedMessage(msg.SubID, refusal))
		}
		for _, ev := range stored {
			if !c.send(eventMessage(msg.SubID, ev)) {
				return false
			}
		}
		return c.send(eoseMessage(msg.SubID))
	default: // labelClose
		c.r.unsubscribe(c, msg.SubID)
		return true
	}
}

// refuse answers a message that did not decode: OK false for an event
// whose id could be read, CLOSED for a REQ whose subscription id could,
// NOTICE otherwise. Malformed messages spend the request budget; a client
// that keeps sending them is disconnected.
func (c *conn) refuse(e *decodeError) bool {
	if e.Label == labelEvent {
		c.r.rejected.Add(1)
	}
	if !c.requests.take(c.r.cfg.Now()) {
		c.r.log.Debug("nostr relay: disconnecting a client sending malformed messages", "remote", c.remote)
		c.kill(websocket.ClosePolicyViolation, "too many malformed messages")
		return false
	}
	switch {
	case e.Label == labelEvent && e.ID != "":
		return c.send(okMessage(e.ID, false, e.Reason))
	case e.Label == labelReq && e.ID != "":
		return c.send(closedMessage(e.ID, e.Reason))
	}
	return c.send(noticeMessage(e.Reason))
}
