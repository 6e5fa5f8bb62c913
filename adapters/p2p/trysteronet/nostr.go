package trysteronet

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/engine/trystero"
)

// The Nostr side: one websocket per relay, our own client (as in package
// discovery) because go-nostr's Relay connection races in Close. The
// websocket, the key, the signature and the event parsing are the
// platform's (nostr_native.go: gorilla/websocket and go-nostr;
// nostr_js.go: the host's WebSocket and internal/bip340).

// relayConn is one websocket connection to a relay.
type relayConn interface {
	// Read returns the next text message; an error ends the connection.
	Read() ([]byte, error)
	// Write sends a text message.
	Write(msg []byte) error
	// Close ends the connection, after sending bye (if not nil) and a
	// normal closure. Only the first call does anything.
	Close(bye []byte)
}

const (
	maxRelayMessage = 256 << 10
	dialTimeout     = 10 * time.Second
	writeTimeout    = 10 * time.Second
	// relayRetry and relayRetryMax are trystero's reconnection backoff
	// (utils.mjs makeSocket: 3333 ms, doubling up to 60 s).
	relayRetry    = 3333 * time.Millisecond
	relayRetryMax = 60 * time.Second
	relayPing     = 30 * time.Second
)

// relayClient keeps one relay subscribed and announced on.
type relayClient struct {
	r     *Room
	idx   int
	url   string
	subID string

	mu sync.Mutex // guards ws and its writes
	ws relayConn
}

// run connects, subscribes and announces until ctx ends, reconnecting
// with backoff.
func (c *relayClient) run(ctx context.Context) {
	wait := relayRetry
	for ctx.Err() == nil {
		ws, err := c.dial(ctx)
		if err == nil {
			wait = relayRetry
			c.serve(ctx, ws)
			if ctx.Err() != nil {
				return
			}
		} else {
			c.r.log.Debug("trysteronet: relay connection failed", "relay", c.url, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, relayRetryMax)
	}
}

func (c *relayClient) dial(ctx context.Context) (relayConn, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	ws, err := dialRelay(dctx, c.url, c.r.cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return ws, nil
}

// serve subscribes to the room's self and root topics (one REQ, as
// trystero batches them), announces on trystero's schedule and hands the
// events read to the room, until the connection or ctx ends.
func (c *relayClient) serve(ctx context.Context, ws relayConn) {
	c.mu.Lock()
	c.ws = ws
	c.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { c.shutdown(ws) })
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(done)
		stop()
		c.mu.Lock()
		c.ws = nil
		c.mu.Unlock()
		ws.Close(nil)
		wg.Wait()
	}()
	r := c.r
	req := trystero.NostrSubscribe(c.subID, []string{r.selfTopic, r.rootTopic}, time.Now().Unix())
	if c.write(ws, req) != nil {
		return
	}
	wg.Add(1)
	go func() { defer wg.Done(); announce(c.r.selfID, c.r.rootTopic, c.publish, done) }()
	for {
		b, err := ws.Read()
		if err != nil {
			return
		}
		c.handle(b)
	}
}

// shutdown closes the subscription and the connection when the room
// leaves.
func (c *relayClient) shutdown(ws relayConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ws.Close([]byte(`["CLOSE",` + quote(c.subID) + `]`))
}

func quote(s string) string { return `"` + s + `"` } // ids are alphanumeric

func (c *relayClient) write(ws relayConn, msg []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ws.Write(msg)
}

// announce publishes {"peerId"} on the root topic at once and then after
// trystero.NextAnnounce(n), until done is closed. A failed publish is
// retried on schedule, as trystero does.
func announce(selfID, rootTopic string, publish func(topic, content string) error, done <-chan struct{}) {
	msg := string(trystero.Signal{PeerID: selfID}.Encode())
	for n := 0; ; n++ {
		_ = publish(rootTopic, msg)
		t := time.NewTimer(trystero.NextAnnounce(n))
		select {
		case <-done:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// publish sends content on topic as trystero's Nostr strategy does: an
// event of kind TopicKind(topic) tagged ["x", topic], signed with the
// room's key.
func (c *relayClient) publish(topic, content string) error {
	r := c.r
	now := time.Now().Unix()
	sig, err := r.nostr.sign(now, topic, content)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	msg := trystero.NostrEventMessage(r.nostr.pub, now, topic, content, sig)
	c.mu.Lock()
	ws := c.ws
	c.mu.Unlock()
	if ws == nil {
		return errNoRelay
	}
	return c.write(ws, msg)
}

// handle reads one relay message; events of our subscription on our
// topics, of the topic's kind and with a valid id (and, natively,
// signature), go to the room.
func (c *relayClient) handle(b []byte) {
	ev, ok := parseEvent(b, c.subID)
	if !ok || (ev.topic != c.r.rootTopic && ev.topic != c.r.selfTopic) || ev.kind != trystero.TopicKind(ev.topic) {
		return
	}
	c.r.post(func() { c.r.handleSignal(c.idx, []byte(ev.content)) })
}

// nostrEvent is what the room reads of a relay's event.
type nostrEvent struct {
	topic, content string
	kind           int
}
