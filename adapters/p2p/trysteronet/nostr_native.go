//go:build !js

package trysteronet

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/livesync-go/livesync-go/engine/trystero"
	"github.com/nbd-wtf/go-nostr"
)

// nostrKey is the room's Nostr key (fresh per Room); go-nostr signs.
type nostrKey struct{ sec, pub string }

func newNostrKey(io.Reader) (nostrKey, error) {
	sk := nostr.GeneratePrivateKey()
	pk, err := nostr.GetPublicKey(sk)
	return nostrKey{sec: sk, pub: pk}, err
}

// sign returns the Schnorr signature of the event trystero publishes:
// kind TopicKind(topic), tagged ["x", topic].
func (k nostrKey) sign(now int64, topic, content string) ([]byte, error) {
	ev := nostr.Event{
		PubKey: k.pub, CreatedAt: nostr.Timestamp(now), Kind: trystero.TopicKind(topic),
		Tags: nostr.Tags{{"x", topic}}, Content: content,
	}
	if err := ev.Sign(k.sec); err != nil {
		return nil, err
	}
	return hex.DecodeString(ev.Sig)
}

// parseEvent reads an event of subscription subID with a valid id and
// signature (a relay may be hostile).
func parseEvent(b []byte, subID string) (nostrEvent, bool) {
	env, ok := nostr.ParseMessage(b).(*nostr.EventEnvelope)
	if !ok || env.SubscriptionID == nil || *env.SubscriptionID != subID {
		return nostrEvent{}, false
	}
	ev := env.Event
	tag := ev.Tags.GetFirst([]string{"x"})
	if tag == nil || len(*tag) < 2 || !ev.CheckID() {
		return nostrEvent{}, false
	}
	if ok, err := ev.CheckSignature(); err != nil || !ok {
		return nostrEvent{}, false
	}
	return nostrEvent{topic: (*tag)[1], content: ev.Content, kind: ev.Kind}, true
}

// gorillaConn is a relay connection over gorilla/websocket, kept alive
// with pings: a connection silent for 2.5 ping intervals is dead.
type gorillaConn struct {
	ws   *websocket.Conn
	once sync.Once
	done chan struct{}
	wg   sync.WaitGroup
}

func dialRelay(ctx context.Context, url string, _ Host) (relayConn, error) {
	d := websocket.Dialer{HandshakeTimeout: dialTimeout, Proxy: http.ProxyFromEnvironment}
	ws, resp, err := d.DialContext(ctx, url, nil)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(maxRelayMessage)
	g := &gorillaConn{ws: ws, done: make(chan struct{})}
	ws.SetPongHandler(func(string) error { g.alive(); return nil })
	g.wg.Add(1)
	go g.ping()
	return g, nil
}

func (g *gorillaConn) alive() { _ = g.ws.SetReadDeadline(time.Now().Add(relayPing * 5 / 2)) }

func (g *gorillaConn) Read() ([]byte, error) {
	g.alive()
	_, b, err := g.ws.ReadMessage()
	return b, err
}

func (g *gorillaConn) Write(msg []byte) error {
	_ = g.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
	return g.ws.WriteMessage(websocket.TextMessage, msg)
}

func (g *gorillaConn) Close(bye []byte) {
	g.once.Do(func() {
		close(g.done)
		if bye != nil {
			_ = g.ws.SetWriteDeadline(time.Now().Add(time.Second))
			_ = g.ws.WriteMessage(websocket.TextMessage, bye)
			_ = g.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		}
		_ = g.ws.Close()
		g.wg.Wait()
	})
}

func (g *gorillaConn) ping() {
	defer g.wg.Done()
	t := time.NewTicker(relayPing)
	defer t.Stop()
	for {
		select {
		case <-g.done:
			return
		case <-t.C:
		}
		if g.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeTimeout)) != nil {
			return
		}
	}
}
