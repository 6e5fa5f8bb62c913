//go:build !js

package nostrrelay

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// clock is a settable clock for Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now().Truncate(time.Second)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// startRelay serves a relay on loopback and returns it with its ws:// URL.
func startRelay(t testing.TB, cfg Config) (*Relay, string) {
	t.Helper()
	r := New(cfg)
	srv := httptest.NewServer(r)
	t.Cleanup(func() {
		r.Close()
		srv.Close()
	})
	return r, "ws" + strings.TrimPrefix(srv.URL, "http")
}

// event returns a signed event of kind with a "d" tag, created at created
// and expiring at exp (no expiration tag when exp is zero).
func event(t testing.TB, key string, kind int, d string, created, exp time.Time, content string) nostr.Event {
	t.Helper()
	tags := nostr.Tags{{"d", d}}
	if !exp.IsZero() {
		tags = append(tags, nostr.Tag{"expiration", strconv.FormatInt(exp.Unix(), 10)})
	}
	ev := nostr.Event{CreatedAt: nostr.Timestamp(created.Unix()), Kind: kind, Tags: tags, Content: content}
	if err := ev.Sign(key); err != nil {
		t.Fatal(err)
	}
	return ev
}

// announcement is a valid event for the default configuration at now.
func announcement(t testing.TB, key, room string, now time.Time) nostr.Event {
	return event(t, key, KindAnnouncement, room, now, now.Add(5*time.Minute), "sealed")
}

// client is a raw websocket client speaking JSON arrays.
type client struct {
	t  testing.TB
	ws *websocket.Conn
}

func dial(t testing.TB, url string) *client {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v (response %v)", url, err, resp)
	}
	t.Cleanup(func() { ws.Close() })
	return &client{t: t, ws: ws}
}

func (c *client) sendRaw(msg string) {
	c.t.Helper()
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

func (c *client) send(parts ...any) {
	c.t.Helper()
	b, err := json.Marshal(parts)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
}

// recv reads one relay message as its JSON elements.
func (c *client) recv() []json.RawMessage {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, data, err := c.ws.ReadMessage()
	if err != nil {
		c.t.Fatalf("recv: %v", err)
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(data, &parts); err != nil || len(parts) == 0 {
		c.t.Fatalf("relay sent %q", data)
	}
	return parts
}

func str(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s is not a string", raw)
	}
	return s
}

// publish sends ev and returns the OK answer.
func (c *client) publish(ev nostr.Event) (bool, string) {
	c.t.Helper()
	c.send("EVENT", ev)
	m := c.recv()
	if len(m) != 4 || str(c.t, m[0]) != "OK" || str(c.t, m[1]) != ev.ID {
		c.t.Fatalf("answer to EVENT: %s", m)
	}
	var ok bool
	_ = json.Unmarshal(m[2], &ok)
	return ok, str(c.t, m[3])
}

// req opens a subscription and returns the ids of the stored events it
// gets before EOSE, or the CLOSED reason.
func (c *client) req(id string, filters ...any) (ids []string, closed string) {
	c.t.Helper()
	c.send(append([]any{"REQ", id}, filters...)...)
	for {
		m := c.recv()
		switch str(c.t, m[0]) {
		case "EVENT":
			var ev nostr.Event
			if err := json.Unmarshal(m[2], &ev); err != nil || str(c.t, m[1]) != id {
				c.t.Fatalf("bad EVENT %s", m)
			}
			ids = append(ids, ev.ID)
		case "EOSE":
			return ids, ""
		case "CLOSED":
			return ids, str(c.t, m[2])
		default:
			c.t.Fatalf("unexpected %s", m)
		}
	}
}

// closeCode waits for the relay to close the connection and returns the
// close code (-1 for a close without a frame), skipping other messages.
func (c *client) closeCode() (int, string) {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := c.ws.ReadMessage()
		if err == nil {
			continue
		}
		if ce, ok := err.(*websocket.CloseError); ok {
			return ce.Code, ce.Text
		}
		return -1, err.Error()
	}
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
