//go:build !js

package trysteronet

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/livesync-go/livesync-go/engine/trystero"
	"github.com/nbd-wtf/go-nostr"
)

// The Nostr side: one websocket per relay, our own client (as in package
// discovery) because go-nostr's Relay connection races in Close. go-nostr
// supplies the event type, the id check and the Schnorr signature.

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
	ws *websocket.Conn
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

func (c *relayClient) dial(ctx context.Context) (*websocket.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	d := websocket.Dialer{HandshakeTimeout: dialTimeout, Proxy: http.ProxyFromEnvironment}
	ws, resp, err := d.DialContext(dctx, c.url, nil)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	ws.SetReadLimit(maxRelayMessage)
	return ws, nil
}

// serve subscribes to the room's self and root topics (one REQ, as
// trystero batches them), announces on trystero's schedule and hands the
// events read to the room, until the connection or ctx ends.
func (c *relayClient) serve(ctx context.Context, ws *websocket.Conn) {
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
		_ = ws.Close()
		wg.Wait()
	}()
	r := c.r
	req := trystero.NostrSubscribe(c.subID, []string{r.selfTopic, r.rootTopic}, time.Now().Unix())
	if c.write(ws, req) != nil {
		return
	}
	wg.Add(2)
	go func() { defer wg.Done(); announce(c.r.selfID, c.r.rootTopic, c.publish, done) }()
	go func() { defer wg.Done(); c.ping(ws, done) }()
	alive := func() { _ = ws.SetReadDeadline(time.Now().Add(relayPing * 5 / 2)) }
	ws.SetPongHandler(func(string) error { alive(); return nil })
	for {
		alive()
		_, b, err := ws.ReadMessage()
		if err != nil {
			return
		}
		c.handle(b)
	}
}

// shutdown closes the subscription and the connection when the room
// leaves.
func (c *relayClient) shutdown(ws *websocket.Conn) {
	c.mu.Lock()
	_ = ws.SetWriteDeadline(time.Now().Add(time.Second))
	_ = ws.WriteMessage(websocket.TextMessage, []byte(`["CLOSE",`+quote(c.subID)+`]`))
	_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	c.mu.Unlock()
	_ = ws.Close()
}

func quote(s string) string { return `"` + s + `"` } // ids are alphanumeric

func (c *relayClient) write(ws *websocket.Conn, msg []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = ws.SetWriteDeadline(time.Now().Add(writeTimeout))
	return ws.WriteMessage(websocket.TextMessage, msg)
}

func (c *relayClient) ping(ws *websocket.Conn, done <-chan struct{}) {
	t := time.NewTicker(relayPing)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		c.mu.Lock()
		err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeTimeout))
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
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
	ev := nostr.Event{
		PubKey: r.pubKey, CreatedAt: nostr.Timestamp(now), Kind: trystero.TopicKind(topic),
		Tags: nostr.Tags{{"x", topic}}, Content: content,
	}
	if err := ev.Sign(r.secKey); err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	sig, err := hex.DecodeString(ev.Sig)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	msg := trystero.NostrEventMessage(r.pubKey, now, topic, content, sig)
	c.mu.Lock()
	ws := c.ws
	c.mu.Unlock()
	if ws == nil {
		return errNoRelay
	}
	return c.write(ws, msg)
}

// handle reads one relay message; events of our subscription on our
// topics, with a valid id and signature, go to the room.
func (c *relayClient) handle(b []byte) {
	env, ok := nostr.ParseMessage(b).(*nostr.EventEnvelope)
	if !ok || env.SubscriptionID == nil || *env.SubscriptionID != c.subID {
		return
	}
	ev := env.Event
	tag := ev.Tags.GetFirst([]string{"x"})
	if tag == nil || len(*tag) < 2 {
		return
	}
	topic := (*tag)[1]
	if topic != c.r.rootTopic && topic != c.r.selfTopic {
		return
	}
	if ev.Kind != trystero.TopicKind(topic) || !ev.CheckID() {
		return
	}
	if ok, err := ev.CheckSignature(); err != nil || !ok {
		return // a relay may be hostile
	}
	c.r.post(func() { c.r.handleSignal(c.idx, []byte(ev.Content)) })
}
