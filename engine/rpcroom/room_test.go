package rpcroom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf16"
)

// sent is one message on the fake network.
type sent struct {
	from, to string
	at       time.Time
	msg      string
}

// network connects Rooms in memory, delivering each message at once to
// the addressee's Receive. drop, if set, decides whether a message is
// lost.
type network struct {
	mu    sync.Mutex
	rooms map[string]*Room
	log   []sent
	drop  func(s sent) bool
}

type endpoint struct {
	n    *network
	self string
}

func (e endpoint) Send(ctx context.Context, peer string, msg []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := sent{e.self, peer, time.Now(), string(msg)}
	e.n.mu.Lock()
	e.n.log = append(e.n.log, s)
	r := e.n.rooms[peer]
	lost := e.n.drop != nil && e.n.drop(s)
	e.n.mu.Unlock()
	if r == nil {
		return errors.New("no such peer")
	}
	if !lost {
		r.Receive(e.self, msg)
	}
	return nil
}

// messages returns the logged messages from one peer to another.
func (n *network) messages(from, to string) []sent {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []sent
	for _, s := range n.log {
		if s.from == from && s.to == to {
			out = append(out, s)
		}
	}
	return out
}

// warnings collects what a Room reports through OnWarning.
type warnings struct {
	mu   sync.Mutex
	errs []error
}

func (w *warnings) add(_ string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, err)
}

func (w *warnings) count(target error) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, e := range w.errs {
		if errors.Is(e, target) {
			n++
		}
	}
	return n
}

// pair returns Rooms "A" and "B" wired together; edit adjusts B's Config.
func pair(t *testing.T, edit func(*Config)) (a, b *Room, n *network, wb *warnings) {
	t.Helper()
	n = &network{rooms: map[string]*Room{}}
	wb = &warnings{}
	var err error
	if a, err = New(Config{Transport: endpoint{n, "A"}}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Transport: endpoint{n, "B"}, OnWarning: wb.add}
	if edit != nil {
		edit(&cfg)
	}
	if b, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	n.rooms["A"], n.rooms["B"] = a, b
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b, n, wb
}

func echo(_ context.Context, _ string, args []json.RawMessage) (any, error) {
	return args, nil
}

func TestCallEcho(t *testing.T) {
	a, b, _, _ := pair(t, nil)
	b.Handle("test.echo", echo)
	got, err := a.Call(t.Context(), "B", "test.echo", "hi", 1, map[string]bool{"x": true})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `["hi",1,{"x":true}]` {
		t.Errorf("got %s", got)
	}
}

// TestRequestEnvelopeOnTheWire pins the request as it crosses: a raw
// wire message whose envelope has commonlib's keys and a request id
// "req-<Date.now() in base 36>-<8 base-36 characters>".
func TestRequestEnvelopeOnTheWire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, n, _ := pair(t, nil)
		b.Handle("db.info", func(context.Context, string, []json.RawMessage) (any, error) {
			return json.RawMessage(`{"db_name":"v-livesync-v2"}`), nil
		})
		if _, err := a.Call(t.Context(), "B", "db.info"); err != nil {
			t.Fatal(err)
		}
		req := n.messages("A", "B")[0].msg
		ms := strconv.FormatInt(time.Now().UnixMilli(), 36)
		re := regexp.MustCompile(`^\{"wire":"raw","payload":"\{\\"kind\\":\\"request\\",\\"requestId\\":\\"(req-` + ms +
			`-[0-9a-z]{8})\\",\\"method\\":\\"db.info\\",\\"args\\":\[\]\}"\}$`)
		m := re.FindStringSubmatch(req)
		if m == nil {
			t.Fatalf("request %s", req)
		}
		want := `{"wire":"raw","payload":"{\"kind\":\"response\",\"requestId\":\"` + m[1] +
			`\",\"ok\":true,\"data\":{\"db_name\":\"v-livesync-v2\"}}"}`
		if got := n.messages("B", "A")[0].msg; got != want {
			t.Errorf("response %s\nwant     %s", got, want)
		}
	})
}

// bigString returns UTF-16 units over 15360 UTF-8 bytes. Two runs of
// emoji, separated by one ASCII character, make one of the first two
// chunk boundaries (at 7680 and 15360 units, whatever the envelope's
// prefix) fall inside a surrogate pair; a lone high surrogate of its own
// sits in the middle.
func bigString() []uint16 {
	u := utf16.Encode([]rune("x" + strings.Repeat("😀", 4000) + "y" + strings.Repeat("😀", 4000)))
	u = append(u, 0xD83D) // lone, as a JavaScript string may hold
	return append(u, utf16.Encode([]rune("漢字"+strings.Repeat("😀", 1000)))...)
}

// TestLargeEnvelopeChunked: an envelope above 15360 bytes crosses as
// chunks in both directions, pairs split between chunks re-form, and a
// lone surrogate survives bit for bit.
func TestLargeEnvelopeChunked(t *testing.T) {
	synctest.Test(t, testLargeEnvelopeChunked)
}

func testLargeEnvelopeChunked(t *testing.T) {
	a, b, n, _ := pair(t, nil)
	b.Handle("test.echo", func(_ context.Context, _ string, args []json.RawMessage) (any, error) {
		return args[0], nil
	})
	units := bigString()
	got, err := a.Call(t.Context(), "B", "test.echo", json.RawMessage(QuoteUTF16(units)))
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnquoteUTF16(got)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back, units) {
		t.Fatalf("echo differs: %d units back, %d sent", len(back), len(units))
	}
	synctest.Wait()
	for _, dir := range [][2]string{{"A", "B"}, {"B", "A"}} {
		chunks, splitPair := 0, false
		for _, s := range n.messages(dir[0], dir[1]) {
			if strings.HasPrefix(s.msg, `{"wire":"chunk",`) {
				chunks++
				splitPair = splitPair || strings.HasSuffix(s.msg, `\ud83d"}`)
				if len(s.msg) > DefaultMaxWirePayloadBytes+200 {
					t.Errorf("chunk of %d bytes", len(s.msg))
				}
			}
		}
		if chunks < 2 || !splitPair {
			t.Errorf("%s->%s: %d chunks, split pair %v", dir[0], dir[1], chunks, splitPair)
		}
		done := 0
		for _, s := range n.messages(dir[1], dir[0]) {
			if strings.HasPrefix(s.msg, `{"wire":"chunk-ack"`) && strings.HasSuffix(s.msg, `"missing":[]}`) {
				done++
			}
		}
		if done != 1 {
			t.Errorf("%s->%s: %d empty chunk-acks, want 1", dir[1], dir[0], done)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.out) != 0 || len(a.in) != 0 {
		t.Errorf("A still holds %d outgoing, %d incoming streams", len(a.out), len(a.in))
	}
}

// TestMissingChunkRetry: a lost part is asked for with a chunk-ack
// listing it, 150 ms after the last part arrived, and resent.
func TestMissingChunkRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, n, _ := pair(t, nil)
		b.Handle("test.echo", echo)
		dropped := false
		n.drop = func(s sent) bool {
			if !dropped && s.from == "A" && strings.Contains(s.msg, `"index":1,`) {
				dropped = true
				return true
			}
			return false
		}
		start := time.Now()
		if _, err := a.Call(t.Context(), "B", "test.echo", json.RawMessage(QuoteUTF16(bigString()))); err != nil {
			t.Fatal(err)
		}
		var asks []sent
		for _, s := range n.messages("B", "A") {
			if strings.HasPrefix(s.msg, `{"wire":"chunk-ack"`) && !strings.HasSuffix(s.msg, `[]}`) {
				asks = append(asks, s)
			}
		}
		if len(asks) != 1 || !strings.HasSuffix(asks[0].msg, `"missing":[1]}`) {
			t.Fatalf("asks for missing parts: %v", asks)
		}
		if d := asks[0].at.Sub(start); d != DefaultChunkMissingRetry {
			t.Errorf("asked after %v, want %v", d, DefaultChunkMissingRetry)
		}
	})
}

// TestTimeouts: a peer that never answers makes a call fail with TIMEOUT
// after the method's timeout; methods without one wait until the peer
// leaves.
func TestTimeouts(t *testing.T) {
	for _, tt := range []struct {
		method string
		want   time.Duration
	}{
		{"db.info", 30 * time.Second},
		{"db.bulkGet", 40 * time.Second},
		{"legacy/!reqAuth", 20 * time.Second},
		{"legacy/getTweakSettings", 5 * time.Second},
		{"legacy/onProgressAcknowledged", 500 * time.Millisecond},
	} {
		synctest.Test(t, func(t *testing.T) {
			a, _, _, _ := pair(t, func(c *Config) {
				c.CanAccept = func(context.Context, string, string) bool { return false }
			})
			start := time.Now()
			_, err := a.Call(t.Context(), "B", tt.method)
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("%s: err %v, want TIMEOUT", tt.method, err)
			}
			if d := time.Since(start); d != tt.want {
				t.Errorf("%s timed out after %v, want %v", tt.method, d, tt.want)
			}
		})
	}
	for _, method := range []string{"legacy/reqSync", "legacy/onProgress", "legacy/getAllConfig",
		"legacy/requestBroadcasting", "legacy/getIsBroadcasting"} {
		synctest.Test(t, func(t *testing.T) {
			a, _, _, _ := pair(t, func(c *Config) {
				c.CanAccept = func(context.Context, string, string) bool { return false }
			})
			done := make(chan error, 1)
			go func() { _, err := a.Call(t.Context(), "B", method); done <- err }()
			time.Sleep(24 * time.Hour)
			synctest.Wait()
			select {
			case err := <-done:
				t.Fatalf("%s ended after a day: %v", method, err)
			default:
			}
			a.PeerLeft("B")
			if err := <-done; !errors.Is(err, ErrNotConnected) {
				t.Errorf("%s after PeerLeft: %v, want NOT_CONNECTED", method, err)
			}
		})
	}
}

func TestMethodTimeout(t *testing.T) {
	for method, want := range map[string]time.Duration{
		"db.changes": 30 * time.Second, "db.bulkGet": 40 * time.Second, "legacy/!reqAuth": 20 * time.Second,
		"legacy/reqSync": 0, "pdb.bulkGet": 40 * time.Second, "legacy/getTweakSettings": 5 * time.Second,
	} {
		if got := MethodTimeout(method); got != want {
			t.Errorf("MethodTimeout(%q) = %v, want %v", method, got, want)
		}
	}
}

// TestCancel: cancelling the caller's context sends a cancel envelope;
// the handler's context ends and the callee answers CANCELLED, as
// commonlib's runner does.
func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, n, _ := pair(t, nil)
		var handlerErr error
		b.Handle("test.wait", func(ctx context.Context, _ string, _ []json.RawMessage) (any, error) {
			<-ctx.Done()
			handlerErr = ctx.Err()
			return "late", nil
		})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := a.Call(ctx, "B", "test.wait")
		if !errors.Is(err, ErrCancelled) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want CANCELLED wrapping the deadline", err)
		}
		synctest.Wait()
		if handlerErr == nil {
			t.Error("handler context did not end")
		}
		toB, toA := n.messages("A", "B"), n.messages("B", "A")
		if !strings.Contains(toB[len(toB)-1].msg, `{\"kind\":\"cancel\",\"requestId\":\"req-`) {
			t.Errorf("last message to B %s, want a cancel", toB[len(toB)-1].msg)
		}
		if !strings.Contains(toA[len(toA)-1].msg, `\"ok\":false,\"error\":{\"code\":\"CANCELLED\",\"message\":\"Invocation cancelled\"}`) {
			t.Errorf("last message to A %s, want CANCELLED", toA[len(toA)-1].msg)
		}
	})
}

func TestErrors(t *testing.T) {
	a, b, n, _ := pair(t, nil)
	b.Handle("test.fail", func(context.Context, string, []json.RawMessage) (any, error) {
		return nil, errors.New("boom")
	})
	b.Handle("db.get", func(context.Context, string, []json.RawMessage) (any, error) {
		return nil, &Error{Code: CodeRemoteError, Message: "missing", Details: json.RawMessage(`{"status":404,"name":"not_found","reason":"missing"}`)}
	})
	b.Handle("test.panic", func(context.Context, string, []json.RawMessage) (any, error) { panic("oops") })
	b.Handle("test.undefined", func(context.Context, string, []json.RawMessage) (any, error) { return nil, nil })
	ctx := t.Context()
	var e *Error
	if _, err := a.Call(ctx, "B", "test.fail"); !errors.As(err, &e) || e.Code != CodeRemoteError || e.Message != "boom" {
		t.Errorf("test.fail: %v", err)
	}
	if _, err := a.Call(ctx, "B", "db.get", "doc"); !errors.As(err, &e) || e.Message != "missing" ||
		string(e.Details) != `{"status":404,"name":"not_found","reason":"missing"}` {
		t.Errorf("db.get: %v", err)
	}
	if _, err := a.Call(ctx, "B", "test.panic"); !errors.Is(err, ErrRemote) {
		t.Errorf("test.panic: %v", err)
	}
	if _, err := a.Call(ctx, "B", "test.none"); !errors.Is(err, &Error{Code: CodeRemoteError, Message: "Method not found: test.none"}) {
		t.Errorf("test.none: %v", err)
	}
	if data, err := a.Call(ctx, "B", "test.undefined"); err != nil || data != nil {
		t.Errorf("test.undefined: %s, %v", data, err)
	}
	before := len(n.messages("A", "B"))
	if _, err := a.Call(ctx, "B", "flat"); !errors.Is(err, ErrProtocol) {
		t.Errorf("flat method: %v", err)
	}
	if len(n.messages("A", "B")) != before {
		t.Error("a flat method was sent")
	}
	if err := b.Handle("flat", echo); !errors.Is(err, ErrProtocol) {
		t.Errorf("Handle(flat): %v", err)
	}
}

func TestHandshake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, n, wb := pair(t, nil)
		a.PeerJoined("B")
		synctest.Wait()
		want := `{"wire":"raw","payload":"{\"kind\":\"handshake\",\"versionMajor\":1,\"versionMinor\":0}"}`
		if got := n.messages("A", "B"); len(got) != 1 || got[0].msg != want {
			t.Fatalf("sent %v, want %s", got, want)
		}
		b.Handle("test.echo", echo)
		if _, err := a.Call(t.Context(), "B", "test.echo"); err != nil {
			t.Fatal(err)
		}
		b.Receive("A", []byte(`{"wire":"raw","payload":"{\"kind\":\"handshake\",\"versionMajor\":2,\"versionMinor\":0}"}`))
		if wb.count(ErrVersion) != 1 {
			t.Errorf("%d version warnings", wb.count(ErrVersion))
		}
		_, err := a.Call(t.Context(), "B", "test.echo")
		if !errors.Is(err, &Error{Code: CodeRemoteError, Message: "RPC major mismatch: local=1, remote=2"}) {
			t.Errorf("after a v2 handshake: %v", err)
		}
	})
}

// TestMalformedEnvelopes: a request with a requestId but no args is
// answered PROTOCOL_ERROR; envelopes without one are dropped with a
// warning; a refused peer's requests get no answer at all.
func TestMalformedEnvelopes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, b, n, wb := pair(t, nil)
		b.Receive("A", EncodeRaw(utf16.Encode([]rune(`{"kind":"request","requestId":"req-1","method":"test.echo"}`))))
		for _, env := range []string{`{"kind":"request","method":"x.y","args":[]}`, `{"kind":"what"}`, `[1]`, `{`,
			`{"kind":"response","requestId":"r"}`, `{"kind":"handshake"}`} {
			b.Receive("A", EncodeRaw(utf16.Encode([]rune(env))))
		}
		synctest.Wait()
		got := n.messages("B", "A")
		if len(got) != 1 || !strings.Contains(got[0].msg, `\"requestId\":\"req-1\",\"ok\":false,\"error\":{\"code\":\"PROTOCOL_ERROR\"`) {
			t.Errorf("answers %v, want one PROTOCOL_ERROR", got)
		}
		if c := wb.count(ErrMalformed); c != 6 {
			t.Errorf("%d malformed warnings, want 6", c)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		var (
			mu    sync.Mutex
			asked []string
		)
		a, b, n, _ := pair(t, func(c *Config) {
			c.CanAccept = func(_ context.Context, peer, method string) bool {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, peer+" "+method)
				return method == "legacy/!reqAuth"
			}
		})
		b.Handle("legacy/!reqAuth", func(context.Context, string, []json.RawMessage) (any, error) { return true, nil })
		b.Handle("db.info", echo)
		if got, err := a.Call(t.Context(), "B", "legacy/!reqAuth", "A"); err != nil || string(got) != "true" {
			t.Fatalf("!reqAuth: %s %v", got, err)
		}
		if _, err := a.Call(t.Context(), "B", "db.info"); !errors.Is(err, ErrTimeout) {
			t.Errorf("refused db.info: %v", err)
		}
		if got := n.messages("B", "A"); len(got) != 1 {
			t.Errorf("B answered %d times, want once", len(got))
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(asked, []string{"A legacy/!reqAuth", "A db.info"}) {
			t.Errorf("CanAccept asked %v", asked)
		}
	})
}

// chunkMsg builds a chunk wire message from text.
func chunkMsg(stream string, index, total int, text string) []byte {
	return EncodeChunk(stream, index, total, utf16.Encode([]rune(text)))
}

// TestHostileStreams: streams beyond the limits are dropped and
// reported; duplicate parts, even after completion, deliver an envelope
// once; an incomplete stream is asked about once and dropped when idle.
func TestHostileStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, b, n, wb := pair(t, func(c *Config) {
			c.MaxParts, c.MaxStreamsPerPeer, c.MaxMessageBytes = 100, 2, 1000
		})
		calls := 0
		b.Handle("test.count", func(context.Context, string, []json.RawMessage) (any, error) { calls++; return calls, nil })
		b.Receive("A", chunkMsg("s-huge", 0, 101, "x"))
		b.Receive("A", chunkMsg("s-big", 0, 2, strings.Repeat("x", 600)))
		b.Receive("A", chunkMsg("s-big", 1, 2, strings.Repeat("x", 600)))
		if c := wb.count(ErrLimit); c != 2 {
			t.Errorf("%d limit warnings after huge total and oversize, want 2", c)
		}
		b.Receive("A", chunkMsg("s1", 0, 3, "x"))
		b.Receive("A", chunkMsg("s2", 0, 3, "x"))
		b.Receive("A", chunkMsg("s3", 0, 3, "x"))
		if c := wb.count(ErrLimit); c != 3 {
			t.Errorf("%d limit warnings after a third open stream, want 3", c)
		}
		b.Receive("A", chunkMsg("s1", 1, 4, "x"))
		if c := wb.count(ErrMalformed); c != 1 {
			t.Errorf("%d malformed warnings after a changed total, want 1", c)
		}
		start := time.Now()
		time.Sleep(DefaultStreamIdleTimeout)
		synctest.Wait()
		if c := wb.count(ErrStale); c != 2 {
			t.Errorf("%d stale warnings, want 2", c)
		}
		var asks []sent
		for _, s := range n.messages("B", "A") {
			asks = append(asks, s)
			if s.at.Sub(start) != DefaultChunkMissingRetry {
				t.Errorf("ask at %v", s.at.Sub(start))
			}
		}
		if len(asks) != 2 || !strings.HasSuffix(asks[0].msg, `"missing":[1,2]}`) {
			t.Errorf("asks %v, want one [1,2] per stream", asks)
		}
		env := `{"kind":"request","requestId":"req-9","method":"test.count","args":[]}`
		parts := []string{env[:20], env[20:]}
		for _, i := range []int{0, 0, 1, 1, 0} {
			b.Receive("A", chunkMsg("s-dup", i, 2, parts[i]))
		}
		synctest.Wait()
		if calls != 1 {
			t.Errorf("duplicated stream served %d times", calls)
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.in) != 0 || len(b.inPerPeer) != 0 || len(b.inBytes) != 0 {
			t.Errorf("B still holds %d streams", len(b.in))
		}
	})
}

// TestClose: waiting calls fail NOT_CONNECTED, handlers' contexts end,
// and Close returns once they have.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, _, _ := pair(t, nil)
		returned := false
		b.Handle("test.wait", func(ctx context.Context, _ string, _ []json.RawMessage) (any, error) {
			<-ctx.Done()
			time.Sleep(time.Second)
			returned = true
			return nil, ctx.Err()
		})
		done := make(chan error, 1)
		go func() { _, err := a.Call(t.Context(), "B", "test.wait"); done <- err }()
		synctest.Wait()
		b.Close()
		if !returned {
			t.Error("Close returned before the handler")
		}
		a.Close()
		if err := <-done; !errors.Is(err, &Error{Code: CodeNotConnected, Message: "Room closed"}) {
			t.Errorf("call after Close: %v", err)
		}
		if _, err := a.Call(t.Context(), "B", "test.wait"); !errors.Is(err, ErrNotConnected) {
			t.Errorf("call on a closed Room: %v", err)
		}
	})
}

// FuzzReceive feeds arbitrary messages to a Room: it must neither panic
// nor answer anything but a response or a chunk-ack.
func FuzzReceive(f *testing.F) {
	f.Add([]byte(`{"wire":"raw","payload":"{\"kind\":\"request\",\"requestId\":\"r\",\"method\":\"t.e\",\"args\":[\"\\ud83d\"]}"}`))
	f.Add([]byte(`{"wire":"chunk","streamId":"s","index":0,"total":1,"payload":"{\"kind\":\"cancel\",\"requestId\":\"r\"}"}`))
	f.Add([]byte(`{"wire":"chunk-ack","streamId":"s","missing":[0,0,5]}`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		n := &network{rooms: map[string]*Room{}}
		r, err := New(Config{Transport: endpoint{n, "B"}})
		if err != nil {
			t.Fatal(err)
		}
		r.Handle("t.e", echo)
		r.Receive("A", msg)
		r.Close()
		for _, s := range n.log {
			if !strings.HasPrefix(s.msg, `{"wire":"raw","payload":"{\"kind\":\"response\"`) &&
				!strings.HasPrefix(s.msg, `{"wire":"chunk-ack"`) {
				t.Fatalf("sent %s", s.msg)
			}
		}
	})
}

func ExampleRoom() {
	n := &network{rooms: map[string]*Room{}}
	server, _ := New(Config{Transport: endpoint{n, "server"}})
	client, _ := New(Config{Transport: endpoint{n, "client"}})
	n.rooms["server"], n.rooms["client"] = server, client
	defer server.Close()
	defer client.Close()
	server.Handle("legacy/!reqAuth", func(_ context.Context, peer string, args []json.RawMessage) (any, error) {
		return peer == "client", nil
	})
	ok, err := client.Call(context.Background(), "server", "legacy/!reqAuth", "client")
	fmt.Println(string(ok), err)
	// Output: true <nil>
}

// TestOutgoingStreamsForgotten: a chunked envelope is kept for
// retransmission only until the receiver acknowledges it, the peer
// leaves, or StreamIdleTimeout passes without an ack.
func TestOutgoingStreamsForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, n, _ := pair(t, nil)
		b.Handle("test.echo", echo)
		n.drop = func(s sent) bool { return s.from == "B" } // no acks, no answers
		big := json.RawMessage(QuoteUTF16(bigString()))
		outs := func() int {
			a.mu.Lock()
			defer a.mu.Unlock()
			return len(a.out)
		}
		go a.CallTimeout(t.Context(), "B", "test.echo", 0, big)
		synctest.Wait()
		if outs() != 1 {
			t.Fatalf("%d outgoing streams after sending, want 1", outs())
		}
		time.Sleep(DefaultStreamIdleTimeout - time.Millisecond)
		synctest.Wait()
		if outs() != 1 {
			t.Fatalf("stream forgotten before the idle timeout")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if outs() != 0 {
			t.Errorf("%d outgoing streams after the idle timeout, want 0", outs())
		}
		go a.CallTimeout(t.Context(), "B", "test.echo", 0, big)
		synctest.Wait()
		a.PeerLeft("B")
		if outs() != 0 {
			t.Errorf("%d outgoing streams after PeerLeft, want 0", outs())
		}
	})
}

// TestMaxWirePayloadBytes: a setting in [800, 15360] is used, any other
// means 15360 (LiveSync's normaliseP2PMaxWirePayloadBytes).
func TestMaxWirePayloadBytes(t *testing.T) {
	for _, tt := range []struct {
		setting int
		chunked bool
	}{{0, false}, {500, false}, {20000, false}, {2048, true}, {800, true}} {
		synctest.Test(t, func(t *testing.T) {
			n := &network{rooms: map[string]*Room{}}
			a, _ := New(Config{Transport: endpoint{n, "A"}, MaxWirePayloadBytes: tt.setting})
			defer a.Close()
			a.CallTimeout(t.Context(), "B", "test.x", 0, strings.Repeat("a", 3000))
			first := n.messages("A", "B")[0].msg
			if got := strings.HasPrefix(first, `{"wire":"chunk"`); got != tt.chunked {
				t.Errorf("setting %d: 3 KB envelope chunked %v, want %v", tt.setting, got, tt.chunked)
			}
		})
	}
}
