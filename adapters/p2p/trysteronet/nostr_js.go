//go:build js

package trysteronet

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"syscall/js"

	"github.com/livesync-go/livesync-go/adapters/p2p/trysteronet/internal/bip340"
	"github.com/livesync-go/livesync-go/engine/trystero"
)

// nostrKey is the room's Nostr key (fresh per Room), signed with by
// internal/bip340.
type nostrKey struct {
	sec  [32]byte
	pub  string
	rand io.Reader
}

func newNostrKey(r io.Reader) (nostrKey, error) {
	sk, err := bip340.NewKey(r)
	if err != nil {
		return nostrKey{}, err
	}
	pk, err := bip340.PublicKey(sk)
	if err != nil {
		return nostrKey{}, err
	}
	return nostrKey{sec: sk, pub: hex.EncodeToString(pk[:]), rand: r}, nil
}

// sign returns the Schnorr signature of the event trystero publishes:
// kind TopicKind(topic), tagged ["x", topic].
func (k nostrKey) sign(now int64, topic, content string) ([]byte, error) {
	var aux [32]byte
	if _, err := io.ReadFull(k.rand, aux[:]); err != nil {
		return nil, err
	}
	sig, err := bip340.Sign(k.sec, trystero.NostrEventID(k.pub, now, topic, content), aux)
	return sig[:], err
}

// parseEvent reads an event of subscription subID shaped as trystero's
// (one tag, ["x", topic]) whose id matches its fields. Its signature is
// not checked, unlike natively: every room key is fresh and stands for
// nothing, so a hostile relay could sign whatever it forges with a key
// of its own, and checking would cost a slow math/big verification per
// event here.
func parseEvent(b []byte, subID string) (nostrEvent, bool) {
	var msg []json.RawMessage
	if json.Unmarshal(b, &msg) != nil || len(msg) != 3 {
		return nostrEvent{}, false
	}
	var typ, sub string
	var ev struct {
		ID        string     `json:"id"`
		PubKey    string     `json:"pubkey"`
		CreatedAt int64      `json:"created_at"`
		Kind      int        `json:"kind"`
		Tags      [][]string `json:"tags"`
		Content   string     `json:"content"`
	}
	if json.Unmarshal(msg[0], &typ) != nil || typ != "EVENT" || json.Unmarshal(msg[1], &sub) != nil || sub != subID ||
		json.Unmarshal(msg[2], &ev) != nil || len(ev.Tags) != 1 || len(ev.Tags[0]) != 2 || ev.Tags[0][0] != "x" || len(ev.PubKey) != 64 {
		return nostrEvent{}, false
	}
	topic := ev.Tags[0][1]
	id := trystero.NostrEventID(ev.PubKey, ev.CreatedAt, topic, ev.Content)
	if ev.ID != hex.EncodeToString(id[:]) {
		return nostrEvent{}, false
	}
	return nostrEvent{topic: topic, content: ev.Content, kind: ev.Kind}, true
}

// maxRelayQueue bounds the messages read from a relay and not handled
// yet; a relay that floods past it is dropped (and reconnected).
const maxRelayQueue = 4096

// jsSocket is a relay connection over the host's WebSocket.
type jsSocket struct {
	ws   js.Value
	h    handlers
	wake chan struct{}
	once sync.Once

	mu     sync.Mutex
	queue  [][]byte
	closed bool
}

var errSocketClosed = errors.New("trysteronet: relay connection closed")

func dialRelay(ctx context.Context, url string, host Host) (relayConn, error) {
	ctor, err := constructor(host.WebSocket, "WebSocket")
	if err != nil {
		return nil, err
	}
	s := &jsSocket{wake: make(chan struct{}, 1)}
	if err := try(func() { s.ws = ctor.New(url) }); err != nil {
		return nil, err
	}
	opened := make(chan bool, 1)
	s.h.set(s.ws, "onopen", func(js.Value) {
		select {
		case opened <- true:
		default:
		}
	})
	s.h.set(s.ws, "onmessage", func(ev js.Value) { s.received(ev.Get("data")) })
	s.h.set(s.ws, "onclose", func(js.Value) {
		select {
		case opened <- false:
		default:
		}
		s.end()
	})
	select {
	case ok := <-opened:
		if ok {
			return s, nil
		}
		s.Close(nil)
		return nil, errors.New("trysteronet: the relay refused the connection")
	case <-ctx.Done():
		s.Close(nil)
		return nil, ctx.Err()
	}
}

func (s *jsSocket) received(data js.Value) {
	b, ok := bytesOf(data)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if !ok || len(b) > maxRelayMessage || len(s.queue) >= maxRelayQueue {
		s.mu.Unlock()
		go s.Close(nil)
		return
	}
	s.queue = append(s.queue, b)
	s.mu.Unlock()
	s.notify()
}

func (s *jsSocket) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *jsSocket) end() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.notify()
}

func (s *jsSocket) Read() ([]byte, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			b := s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return b, nil
		}
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return nil, errSocketClosed
		}
		<-s.wake
	}
}

func (s *jsSocket) Write(msg []byte) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errSocketClosed
	}
	return try(func() { s.ws.Call("send", string(msg)) })
}

func (s *jsSocket) Close(bye []byte) {
	s.once.Do(func() {
		if bye != nil && s.ws.Get("readyState").Int() == 1 {
			_ = try(func() { s.ws.Call("send", string(bye)) })
		}
		_ = try(func() { s.ws.Call("close", 1000) })
		s.h.release()
		s.end()
	})
}
