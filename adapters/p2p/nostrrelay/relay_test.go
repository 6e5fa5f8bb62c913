//go:build !js

package nostrrelay

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

func TestPublishAndSubscribe(t *testing.T) {
	clk := newClock()
	r, url := startRelay(t, Config{Now: clk.Now})
	key := nostr.GeneratePrivateKey()
	pub, sub := dial(t, url), dial(t, url)

	stored := announcement(t, key, "room-1", clk.Now())
	if ok, reason := pub.publish(stored); !ok || reason != "" {
		t.Fatalf("publish: %v %q", ok, reason)
	}
	if ok, reason := pub.publish(stored); !ok || !strings.HasPrefix(reason, "duplicate:") {
		t.Fatalf("publish again: %v %q", ok, reason)
	}
	other := announcement(t, nostr.GeneratePrivateKey(), "room-2", clk.Now())
	pub.publish(other)

	ids, closed := sub.req("s1", map[string]any{"kinds": []int{KindAnnouncement}, "#d": []string{"room-1"}})
	if closed != "" || len(ids) != 1 || ids[0] != stored.ID {
		t.Fatalf("stored events for room-1: %v %q", ids, closed)
	}
	// Live: a new event of the room reaches the subscriber, another room's does not.
	pub.publish(announcement(t, nostr.GeneratePrivateKey(), "room-2", clk.Now()))
	live := announcement(t, nostr.GeneratePrivateKey(), "room-1", clk.Now())
	pub.publish(live)
	m := sub.recv()
	var got nostr.Event
	if str(t, m[0]) != "EVENT" || str(t, m[1]) != "s1" || json.Unmarshal(m[2], &got) != nil || got.ID != live.ID {
		t.Fatalf("live delivery: %s", m)
	}
	if ok, _ := got.CheckSignature(); !ok {
		t.Fatal("delivered event does not verify")
	}
	// After CLOSE, nothing more is delivered for s1. The REQ s2 makes sure
	// the CLOSE was handled before the publication; the relay queues
	// deliveries before it answers OK, so an EVENT for s1 would come
	// before the EOSE of s3.
	sub.send("CLOSE", "s1")
	if _, closed := sub.req("s2", map[string]any{"ids": []string{stored.ID}}); closed != "" {
		t.Fatal(closed)
	}
	pub.publish(announcement(t, nostr.GeneratePrivateKey(), "room-1", clk.Now()))
	if ids, closed := sub.req("s3", map[string]any{"limit": 0}); closed != "" || len(ids) != 0 {
		t.Fatal(ids, closed)
	}
	if st := r.Stats(); st.Connections != 2 || st.Events != 5 || st.Accepted != 6 || st.Rejected != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFilters(t *testing.T) {
	clk := newClock()
	_, url := startRelay(t, Config{Now: clk.Now, Kinds: []int{KindAnnouncement, 30079}})
	c := dial(t, url)
	k1, k2 := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	now := clk.Now()
	e1 := event(t, k1, KindAnnouncement, "a", now.Add(-3*time.Second), now.Add(time.Minute), "1")
	e2 := event(t, k1, KindAnnouncement, "b", now.Add(-2*time.Second), now.Add(time.Minute), "2")
	e3 := event(t, k2, 30079, "a", now.Add(-1*time.Second), now.Add(time.Minute), "3")
	for _, ev := range []nostr.Event{e1, e2, e3} {
		if ok, reason := c.publish(ev); !ok {
			t.Fatal(reason)
		}
	}
	pk1, _ := nostr.GetPublicKey(k1)
	cases := []struct {
		name   string
		filter map[string]any
		want   []string
	}{
		{"all, newest first", map[string]any{}, []string{e3.ID, e2.ID, e1.ID}},
		{"ids", map[string]any{"ids": []string{e2.ID}}, []string{e2.ID}},
		{"authors", map[string]any{"authors": []string{pk1}}, []string{e2.ID, e1.ID}},
		{"kinds", map[string]any{"kinds": []int{30079}}, []string{e3.ID}},
		{"#d", map[string]any{"#d": []string{"a"}}, []string{e3.ID, e1.ID}},
		{"#d and kind", map[string]any{"#d": []string{"a"}, "kinds": []int{KindAnnouncement}}, []string{e1.ID}},
		{"since", map[string]any{"since": now.Add(-2 * time.Second).Unix()}, []string{e3.ID, e2.ID}},
		{"until", map[string]any{"until": now.Add(-2 * time.Second).Unix()}, []string{e2.ID, e1.ID}},
		{"limit", map[string]any{"limit": 1}, []string{e3.ID}},
		{"limit 0", map[string]any{"limit": 0}, nil},
		{"empty list matches nothing", map[string]any{"kinds": []int{}}, nil},
		{"other tag", map[string]any{"#e": []string{"x"}}, nil},
	}
	for i, tc := range cases {
		ids, closed := c.req("q"+string(rune('a'+i)), tc.filter)
		if closed != "" || strings.Join(ids, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: got %v %q, want %v", tc.name, ids, closed, tc.want)
		}
	}
	// Two filters: the union, each event once.
	ids, _ := c.req("u", map[string]any{"ids": []string{e1.ID}}, map[string]any{"authors": []string{pk1}})
	if len(ids) != 2 {
		t.Errorf("union of two filters: %v", ids)
	}
}

func TestReplaceable(t *testing.T) {
	clk := newClock()
	r, url := startRelay(t, Config{Now: clk.Now})
	c := dial(t, url)
	key := nostr.GeneratePrivateKey()
	now := clk.Now()
	exp := now.Add(10 * time.Minute)
	old := event(t, key, KindAnnouncement, "room", now.Add(-time.Minute), exp, "old")
	cur := event(t, key, KindAnnouncement, "room", now, exp, "new")
	otherRoom := event(t, key, KindAnnouncement, "room-2", now.Add(-time.Minute), exp, "other room")
	otherKey := event(t, nostr.GeneratePrivateKey(), KindAnnouncement, "room", now.Add(-time.Minute), exp, "other author")
	for _, ev := range []nostr.Event{old, cur, otherRoom, otherKey} {
		if ok, reason := c.publish(ev); !ok || reason != "" {
			t.Fatalf("publish %s: %v %q", ev.Content, ok, reason)
		}
	}
	// The older version, published after the newer one, is not stored.
	if ok, reason := c.publish(old); !ok || !strings.HasPrefix(reason, "duplicate:") {
		t.Fatalf("older version: %v %q", ok, reason)
	}
	ids, _ := c.req("s", map[string]any{"#d": []string{"room", "room-2"}})
	if len(ids) != 3 || !contains(ids, cur.ID) || contains(ids, old.ID) {
		t.Fatalf("stored %v; want the newer version, the other room and the other author", ids)
	}
	// Same created_at: the lower id wins, whatever the order of arrival.
	a := event(t, key, KindAnnouncement, "tie", now, exp, "a")
	b := event(t, key, KindAnnouncement, "tie", now, exp, "b")
	low, high := a, b
	if high.ID < low.ID {
		low, high = high, low
	}
	c.publish(high)
	c.publish(low)
	c.publish(high)
	ids, _ = c.req("t", map[string]any{"#d": []string{"tie"}})
	if len(ids) != 1 || ids[0] != low.ID {
		t.Fatalf("tie: stored %v, want the lower id %s", ids, low.ID)
	}
	if st := r.Stats(); st.Events != 4 {
		t.Fatalf("%d events stored, want 4", st.Events)
	}
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// TestRefusals: each policy answers OK false with its NIP-01 prefix, and
// nothing refused is stored.
func TestRefusals(t *testing.T) {
	clk := newClock()
	r, url := startRelay(t, Config{Now: clk.Now, MaxEventSize: 2048})
	c := dial(t, url)
	key := nostr.GeneratePrivateKey()
	now := clk.Now()
	badSig := announcement(t, key, "r", now)
	badSig.Sig = strings.Repeat("0", 128)
	badID := announcement(t, key, "r", now)
	badID.Content = "changed after signing"
	cases := []struct {
		name   string
		ev     nostr.Event
		prefix string
	}{
		{"other kind", event(t, key, 1, "r", now, now.Add(time.Minute), "note"), "blocked: "},
		{"no expiration", event(t, key, KindAnnouncement, "r", now, time.Time{}, "x"), "invalid: an expiration"},
		{"expired", event(t, key, KindAnnouncement, "r", now.Add(-time.Hour), now.Add(-time.Second), "x"), "invalid: event has expired"},
		{"expires too late", event(t, key, KindAnnouncement, "r", now, now.Add(DefaultMaxExpiry+2*clockSkew), "x"), "invalid: expiration more than 1h0m0s ahead"},
		{"future", event(t, key, KindAnnouncement, "r", now.Add(10*time.Minute), now.Add(20*time.Minute), "x"), "invalid: created_at"},
		{"too large", event(t, key, KindAnnouncement, "r", now, now.Add(time.Minute), strings.Repeat("x", 2048)), "invalid: event larger than 2048 bytes"},
		{"bad id", badID, "invalid: id is not the hash"},
		{"bad signature", badSig, "invalid: bad signature"},
	}
	for _, tc := range cases {
		ok, reason := c.publish(tc.ev)
		if ok || !strings.HasPrefix(reason, tc.prefix) {
			t.Errorf("%s: OK %v %q, want false %q...", tc.name, ok, reason, tc.prefix)
		}
	}
	// At the limits: accepted.
	edge := event(t, key, KindAnnouncement, "edge", now, now.Add(DefaultMaxExpiry), "x")
	if ok, reason := c.publish(edge); !ok {
		t.Fatalf("an expiration MaxExpiry ahead: %q", reason)
	}
	if st := r.Stats(); st.Events != 1 || st.Rejected != uint64(len(cases)) || st.Accepted != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestMalformed: malformed messages get a NOTICE (or OK false / CLOSED
// when the id is readable); a client that keeps sending them is
// disconnected.
func TestMalformed(t *testing.T) {
	clk := newClock()
	_, url := startRelay(t, Config{Now: clk.Now, EventsPerMinute: 5})
	c := dial(t, url)
	id := strings.Repeat("ab", 32)
	c.sendRaw(`not json`)
	if m := c.recv(); str(t, m[0]) != "NOTICE" || !strings.HasPrefix(str(t, m[1]), "invalid:") {
		t.Fatalf("answer to garbage: %s", m)
	}
	c.sendRaw(`["EVENT",{"id":"` + id + `","kind":"x"}]`)
	if m := c.recv(); str(t, m[0]) != "OK" || str(t, m[1]) != id || !strings.HasPrefix(str(t, m[3]), "invalid:") {
		t.Fatalf("answer to a malformed event: %s", m)
	}
	c.sendRaw(`["REQ","sub",42]`)
	if m := c.recv(); str(t, m[0]) != "CLOSED" || str(t, m[1]) != "sub" || !strings.HasPrefix(str(t, m[2]), "invalid:") {
		t.Fatalf("answer to a malformed REQ: %s", m)
	}
	c.sendRaw(`["AUTH","x"]`)
	if m := c.recv(); str(t, m[0]) != "NOTICE" || !strings.HasPrefix(str(t, m[1]), "unsupported:") {
		t.Fatalf("answer to AUTH: %s", m)
	}
	c.sendRaw(`[]`) // the fifth malformed message of the minute
	c.recv()
	c.sendRaw(`[]`) // the sixth: disconnected
	if code, text := c.closeCode(); code != websocket.ClosePolicyViolation || !strings.Contains(text, "malformed") {
		t.Fatalf("close %d %q, want policy violation", code, text)
	}
}

// TestEventRate: EventsPerMinute events per connection, then
// "rate-limited:" until the bucket refills with the (injected) clock.
func TestEventRate(t *testing.T) {
	clk := newClock()
	r, url := startRelay(t, Config{Now: clk.Now, EventsPerMinute: 3})
	c := dial(t, url)
	for i := range 3 {
		if ok, reason := c.publish(announcement(t, nostr.GeneratePrivateKey(), "r", clk.Now())); !ok {
			t.Fatalf("event %d: %q", i, reason)
		}
	}
	ev := announcement(t, nostr.GeneratePrivateKey(), "r", clk.Now())
	if ok, reason := c.publish(ev); ok || !strings.HasPrefix(reason, "rate-limited:") {
		t.Fatalf("fourth event: %v %q", ok, reason)
	}
	// Another connection has its own budget.
	if ok, reason := dial(t, url).publish(ev); !ok {
		t.Fatalf("other connection: %q", reason)
	}
	clk.Advance(19 * time.Second) // not yet a token (one every 20 s)
	if ok, _ := c.publish(announcement(t, nostr.GeneratePrivateKey(), "r", clk.Now())); ok {
		t.Fatal("accepted before a token was due")
	}
	clk.Advance(time.Second)
	if ok, reason := c.publish(announcement(t, nostr.GeneratePrivateKey(), "r", clk.Now())); !ok {
		t.Fatalf("after 20 s: %q", reason)
	}
	if st := r.Stats(); st.Accepted != 5 || st.Rejected != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestSubscriptionLimits(t *testing.T) {
	clk := newClock()
	_, url := startRelay(t, Config{Now: clk.Now, MaxSubscriptions: 2, MaxFilters: 2})
	c := dial(t, url)
	f := map[string]any{"kinds": []int{KindAnnouncement}}
	if _, closed := c.req("a", f, f, f); !strings.HasPrefix(closed, "invalid: at most 2 filters") {
		t.Fatalf("three filters: %q", closed)
	}
	for _, id := range []string{"a", "b", "b"} { // re-opening b replaces it
		if _, closed := c.req(id, f, f); closed != "" {
			t.Fatalf("REQ %s: %q", id, closed)
		}
	}
	if _, closed := c.req("c", f); !strings.HasPrefix(closed, "blocked: at most 2") {
		t.Fatalf("third subscription: %q", closed)
	}
	c.send("CLOSE", "a")
	if _, closed := c.req("c", f); closed != "" {
		t.Fatalf("after CLOSE: %q", closed)
	}
	c.send("REQ", strings.Repeat("x", 65), f)
	if m := c.recv(); str(t, m[0]) != "NOTICE" || !strings.HasPrefix(str(t, m[1]), "invalid:") {
		t.Fatalf("a subscription id over 64 characters: %s", m)
	}
}

// TestMessageSizeLimit: a message over the websocket limit closes the
// connection with 1009.
func TestMessageSizeLimit(t *testing.T) {
	r, url := startRelay(t, Config{MaxEventSize: 1024})
	c := dial(t, url)
	c.sendRaw(`["EVENT",{"content":"` + strings.Repeat("x", r.readLimit()) + `"}]`)
	if code, _ := c.closeCode(); code != websocket.CloseMessageTooBig {
		t.Fatalf("close code %d, want %d", code, websocket.CloseMessageTooBig)
	}
}

func TestConnectionLimit(t *testing.T) {
	r, url := startRelay(t, Config{MaxConnections: 2})
	a := dial(t, url)
	dial(t, url)
	_, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("third connection: %v %v", err, resp)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "too many connections") {
		t.Fatalf("refusal body %q", body)
	}
	a.ws.Close()
	eventually(t, "a slot to free", func() bool { return r.Stats().Connections == 1 })
	dial(t, url)
	eventually(t, "the new connection", func() bool { return r.Stats().Connections == 2 })
	if st := r.Stats(); st.Refused != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBoundedStore: when full, the event expiring first makes room.
func TestBoundedStore(t *testing.T) {
	clk := newClock()
	r, url := startRelay(t, Config{Now: clk.Now, MaxEvents: 3})
	c := dial(t, url)
	now := clk.Now()
	var evs []nostr.Event
	for _, ttl := range []time.Duration{5, 2, 9, 7} { // minutes
		ev := event(t, nostr.GeneratePrivateKey(), KindAnnouncement, "r", now, now.Add(ttl*time.Minute), "x")
		c.publish(ev)
		evs = append(evs, ev)
	}
	ids, _ := c.req("s", map[string]any{})
	if len(ids) != 3 || contains(ids, evs[1].ID) {
		t.Fatalf("stored %v; want all but the one expiring first (%s)", ids, evs[1].ID)
	}
	if r.Stats().Events != 3 {
		t.Fatal("store over its bound")
	}
}

// TestExpiry: an event is not served once expired, even before the purge
// removes it.
func TestExpiry(t *testing.T) {
	clk := newClock()
	r, url := startRelay(t, Config{Now: clk.Now})
	c := dial(t, url)
	now := clk.Now()
	short := event(t, nostr.GeneratePrivateKey(), KindAnnouncement, "r", now, now.Add(time.Minute), "x")
	long := event(t, nostr.GeneratePrivateKey(), KindAnnouncement, "r", now, now.Add(time.Hour), "x")
	c.publish(short)
	c.publish(long)
	clk.Advance(time.Minute)
	ids, _ := c.req("s", map[string]any{"#d": []string{"r"}, "kinds": []int{KindAnnouncement}})
	if len(ids) != 1 || ids[0] != long.ID {
		t.Fatalf("served %v after the first expired", ids)
	}
	// Storing purges the expired first.
	c.send("CLOSE", "s")
	c.publish(event(t, nostr.GeneratePrivateKey(), KindAnnouncement, "r", clk.Now(), clk.Now().Add(time.Minute), "x"))
	if n := r.Stats().Events; n != 2 {
		t.Fatalf("%d events stored, want 2", n)
	}
}

func TestInfoDocument(t *testing.T) {
	r, url := startRelay(t, Config{MaxSubscriptions: 7})
	httpURL := "http" + strings.TrimPrefix(url, "ws")
	req, _ := http.NewRequest("GET", httpURL, nil)
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Name          string         `json:"name"`
		SupportedNIPs []int          `json:"supported_nips"`
		Limitation    map[string]any `json:"limitation"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("Content-Type") != "application/nostr+json" || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("headers %v", resp.Header)
	}
	if doc.Name == "" || !containsInt(doc.SupportedNIPs, 1) || !containsInt(doc.SupportedNIPs, 11) || !containsInt(doc.SupportedNIPs, 40) {
		t.Fatalf("document %+v", doc)
	}
	if doc.Limitation["max_subscriptions"] != 7.0 || doc.Limitation["max_message_length"] != float64(r.readLimit()) ||
		doc.Limitation["restricted_writes"] != true {
		t.Fatalf("limitation %v", doc.Limitation)
	}
	plain, err := http.Get(httpURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(plain.Body)
	plain.Body.Close()
	if !strings.Contains(string(body), "websocket") {
		t.Fatalf("plain GET: %q", body)
	}
	post, err := http.Post(httpURL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", post.StatusCode)
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// TestSlowReader: a subscriber that does not read is disconnected when its
// write queue fills; the publisher and a reading subscriber are not held up.
func TestSlowReader(t *testing.T) {
	t.Run("messages", func(t *testing.T) { testSlowReader(t, Config{WriteQueue: 8}) })
	t.Run("bytes", func(t *testing.T) { testSlowReader(t, Config{WriteQueue: 100000, WriteQueueBytes: 1}) })
}

func testSlowReader(t *testing.T, cfg Config) {
	clk := newClock()
	cfg.Now, cfg.EventsPerMinute = clk.Now, 100000
	r, url := startRelay(t, cfg)
	slow, fast, pub := dial(t, url), dial(t, url), dial(t, url)
	f := map[string]any{"#d": []string{"r"}, "kinds": []int{KindAnnouncement}}
	slow.req("s", f)
	fast.req("s", f)
	content := strings.Repeat("x", 15<<10)
	key := nostr.GeneratePrivateKey()
	// 16 KiB events until the slow reader's socket buffers and queue are
	// full; the fast subscriber reads each one as it comes.
	for i := 0; r.Stats().Dropped == 0; i++ {
		if i == 5000 {
			t.Fatal("the slow reader was never dropped")
		}
		ev := event(t, key, KindAnnouncement, "r", clk.Now().Add(time.Duration(i-5000)*time.Second), clk.Now().Add(time.Minute), content)
		if ok, reason := pub.publish(ev); !ok {
			t.Fatalf("event %d: %q", i, reason)
		}
		var got nostr.Event
		if m := fast.recv(); str(t, m[0]) != "EVENT" || json.Unmarshal(m[2], &got) != nil || got.ID != ev.ID {
			t.Fatalf("the reading subscriber got %.40s for event %d", m, i)
		}
	}
	if code, _ := slow.closeCode(); code != websocket.ClosePolicyViolation && code != -1 {
		t.Fatalf("slow reader closed with %d", code)
	}
	eventually(t, "the slow connection to end", func() bool { return r.Stats().Connections == 2 })
	if st := r.Stats(); st.Dropped != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestCloseLeavesNothing: Close ends every connection with a going-away
// frame and returns once the relay's goroutines have ended.
func TestCloseLeavesNothing(t *testing.T) {
	r, url := startRelay(t, Config{})
	a, b := dial(t, url), dial(t, url)
	a.req("s", map[string]any{})
	eventually(t, "two connections", func() bool { return r.Stats().Connections == 2 })
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client{a, b} {
		if code, _ := c.closeCode(); code != websocket.CloseGoingAway {
			t.Fatalf("close code %d, want going away", code)
		}
	}
	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "nostrrelay.(*") {
		t.Fatalf("relay goroutines left after Close:\n%s", stacks)
	}
	if _, resp, err := websocket.DefaultDialer.Dial(url, nil); err == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("dial after Close: %v", err)
	}
}

// wrapped is a middleware's ResponseWriter: no Hijack, but Unwrap.
type wrapped struct{ http.ResponseWriter }

func (w wrapped) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestBehindMiddleware: a websocket through a wrapping ResponseWriter.
func TestBehindMiddleware(t *testing.T) {
	r := New(Config{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.ServeHTTP(wrapped{w}, req)
	}))
	defer srv.Close()
	defer r.Close()
	c := dial(t, "ws"+strings.TrimPrefix(srv.URL, "http"))
	if _, closed := c.req("s", map[string]any{}); closed != "" {
		t.Fatal(closed)
	}
}

// TestLargeAnswer: stored events of more bytes than the write queue holds
// reach a client that reads them (the reader waits for the writer).
func TestLargeAnswer(t *testing.T) {
	clk := newClock()
	r, url := startRelay(t, Config{Now: clk.Now, WriteQueueBytes: 1})
	c := dial(t, url)
	content := strings.Repeat("x", 15<<10)
	const n = 40 // 600 KiB, the queue holds 80 KiB
	for i := range n {
		if ok, reason := c.publish(event(t, nostr.GeneratePrivateKey(), KindAnnouncement, "r", clk.Now(), clk.Now().Add(time.Minute), content)); !ok {
			t.Fatalf("event %d: %q", i, reason)
		}
	}
	if ids, closed := c.req("s", map[string]any{}); len(ids) != n || closed != "" {
		t.Fatalf("got %d of %d events, %q", len(ids), n, closed)
	}
	if st := r.Stats(); st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}
