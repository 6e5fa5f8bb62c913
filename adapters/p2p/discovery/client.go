package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// The Nostr client side of discovery: one websocket per relay, speaking
// the three NIP-01 messages discovery needs (EVENT and its OK, REQ with
// its EVENT and EOSE answers, CLOSE). go-nostr provides the event, filter
// and envelope types; its own Relay connection is not used, because in
// the version served here its Close and its cleanup goroutine race on the
// connection field and can crash the process from a goroutine the caller
// cannot recover.

// maxMessageSize bounds one message read from a relay.
const maxMessageSize = 256 << 10

// dialTimeout bounds a connection attempt when ctx has no deadline.
const dialTimeout = 10 * time.Second

// subscriptionPing is how often a subscription pings its relay. A relay
// that sends nothing, not even the pong, for two and a half times as long
// is gone (a connection cut without a word, as a sleeping laptop's or a
// NAT's): the subscription ends, and the caller subscribes again.
var subscriptionPing = 30 * time.Second

// conn is one websocket to a relay. Writes are serialised; reads happen
// in one goroutine at a time (the caller's).
type conn struct {
	ws  *websocket.Conn
	wmu sync.Mutex
}

// dial connects to the relay at url.
func dial(ctx context.Context, url string) (*conn, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dialTimeout)
		defer cancel()
	}
	d := websocket.Dialer{HandshakeTimeout: dialTimeout, Proxy: http.ProxyFromEnvironment}
	ws, resp, err := d.DialContext(ctx, url, nil)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	ws.SetReadLimit(maxMessageSize)
	return &conn{ws: ws}, nil
}

// send writes one message (a JSON array).
func (c *conn) send(msg ...any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(dialTimeout))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

// read returns the next message the relay sent, parsed; nil for a message
// discovery does not know (it is skipped by the callers).
func (c *conn) read() (nostr.Envelope, error) {
	_, b, err := c.ws.ReadMessage()
	if err != nil {
		return nil, err
	}
	return nostr.ParseMessage(b), nil
}

// closeOnDone closes the connection when ctx ends, which unblocks a read;
// the returned function stops the watch.
func (c *conn) closeOnDone(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, func() { _ = c.ws.Close() })
}

// close says goodbye and closes the connection.
func (c *conn) close() {
	c.wmu.Lock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	c.wmu.Unlock()
	_ = c.ws.Close()
}

// publishOne sends ev to the relay at url and waits for its OK.
func publishOne(ctx context.Context, url string, ev nostr.Event) error {
	c, err := dial(ctx, url)
	if err != nil {
		return err
	}
	defer c.close()
	stop := c.closeOnDone(ctx)
	defer stop()
	if err := c.send("EVENT", ev); err != nil {
		return ctxOr(ctx, fmt.Errorf("send: %w", err))
	}
	for {
		env, err := c.read()
		if err != nil {
			return ctxOr(ctx, fmt.Errorf("waiting for the relay's answer: %w", err))
		}
		ok, is := env.(*nostr.OKEnvelope)
		if !is || ok.EventID != ev.ID {
			continue
		}
		if !ok.OK {
			return fmt.Errorf("refused: %s", ok.Reason)
		}
		return nil
	}
}

// ctxOr prefers ctx's error (the caller gave up) over a read error it
// caused by closing the connection.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

// subscription is one REQ on one relay.
type subscription struct {
	c  *conn
	id string
}

// subscribe connects to url and sends the REQ.
func subscribe(ctx context.Context, url string, filter nostr.Filter) (*subscription, error) {
	c, err := dial(ctx, url)
	if err != nil {
		return nil, err
	}
	s := &subscription{c: c, id: "discovery"}
	if err := c.send("REQ", s.id, filter); err != nil {
		c.close()
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	return s, nil
}

// events delivers the subscription's events (stored, then live) to fn
// until ctx ends, the relay closes the subscription or the connection
// drops; then it closes the connection.
func (s *subscription) events(ctx context.Context, fn func(*nostr.Event) bool) {
	stop := s.c.closeOnDone(ctx)
	defer stop()
	defer s.c.close()
	alive := func() { _ = s.c.ws.SetReadDeadline(time.Now().Add(subscriptionPing * 5 / 2)) }
	s.c.ws.SetPongHandler(func(string) error { alive(); return nil })
	done := make(chan struct{})
	defer close(done)
	go s.c.ping(done)
	for {
		alive()
		env, err := s.c.read()
		if err != nil {
			return
		}
		switch e := env.(type) {
		case *nostr.EventEnvelope:
			if e.SubscriptionID == nil || *e.SubscriptionID != s.id {
				continue
			}
			ev := e.Event
			if !ev.CheckID() {
				continue
			}
			if ok, err := ev.CheckSignature(); err != nil || !ok {
				continue // forged or damaged: a relay may be hostile
			}
			if !fn(&ev) {
				return
			}
		case *nostr.ClosedEnvelope:
			if e.SubscriptionID == s.id {
				return
			}
		}
	}
}

// ping pings the relay every subscriptionPing until done is closed.
func (c *conn) ping(done <-chan struct{}) {
	t := time.NewTicker(subscriptionPing)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		c.wmu.Lock()
		err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(dialTimeout))
		c.wmu.Unlock()
		if err != nil {
			return
		}
	}
}

// errNoRelay is the start of Subscribe's error when every relay failed.
var errNoRelay = errors.New("discovery: no relay could be subscribed to")
