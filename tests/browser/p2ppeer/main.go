// Command p2ppeer runs native LiveSync P2P peers (adapters/p2p/trysteronet
// rooms with engine/livesyncrpc attached, each over an in-memory
// engine/store replica holding documents in the plugin's plaintext local
// form) for the Chromium interop test, tests/browser/p2p.test.mjs. It is a
// test program, not a product.
//
// It serves a Nostr relay (adapters/p2p/nostrrelay with ForwardEphemeral,
// so it carries Trystero's signalling) on loopback unless -relay names
// one, and a control API on loopback: POST a JSON object to
// /open, /state, /docs, /put, /pull, /sync, /call, /broadcast or /close
// (see the handlers). It prints one JSON line {"control","relay"} when
// ready and exits when its standard input closes.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/adapters/p2p/nostrrelay"
	"github.com/livesync-go/livesync-go/adapters/p2p/trysteronet"
	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/rpcroom"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/trystero"
)

func main() {
	relayURL := flag.String("relay", "", "Nostr relay URL (ws://…); empty serves one on loopback")
	verbose := flag.Bool("v", false, "log debug records to stderr")
	flag.Parse()
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := run(*relayURL, logger); err != nil {
		fmt.Fprintln(os.Stderr, "p2ppeer:", err)
		os.Exit(1)
	}
}

func run(relayURL string, logger *slog.Logger) error {
	if relayURL == "" {
		relay := nostrrelay.New(nostrrelay.Config{ForwardEphemeral: true, EventsPerMinute: 6000, Logger: logger})
		defer relay.Close()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		go func() { _ = http.Serve(ln, relay) }()
		relayURL = "ws://" + ln.Addr().String()
	}
	c := &controller{relay: relayURL, peers: map[string]*peer{}, logger: logger}
	defer c.closeAll()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	for path, h := range map[string]func(context.Context, json.RawMessage) (any, error){
		"/open": c.open, "/state": c.state, "/docs": c.docs, "/put": c.put, "/pull": c.pull, "/sync": c.sync,
		"/call": c.call, "/broadcast": c.broadcast, "/close": c.close,
	} {
		mux.HandleFunc("POST "+path, serveJSON(h))
	}
	go func() { _ = http.Serve(ln, mux) }()
	ready, _ := json.Marshal(map[string]string{"control": "http://" + ln.Addr().String(), "relay": relayURL})
	fmt.Println(string(ready))
	// Until the test closes our standard input (or exits).
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	return nil
}

// serveJSON answers a handler's value as JSON, its error as {"error"}.
func serveJSON(h func(context.Context, json.RawMessage) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		var v any
		if err == nil {
			v, err = h(r.Context(), body)
		}
		w.Header().Set("content-type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			v = map[string]string{"error": err.Error()}
		}
		_ = json.NewEncoder(w).Encode(v)
	}
}

type controller struct {
	relay  string
	logger *slog.Logger
	mu     sync.Mutex
	n      int
	peers  map[string]*peer
}

// peer is one Go peer in one room, with what the test inspects.
type peer struct {
	room   *trysteronet.Room
	hosted *livesyncrpc.Hosted
	st     store.Store
	cancel context.CancelFunc // ends a Broadcast

	mu         sync.Mutex
	joinErrors []string
	progress   []livesyncrpc.Progress
	warnings   []string
}

type openRequest struct {
	RoomID   string `json:"roomId"`
	Password string `json:"password"`
	// RoomPassphrase, if set, is LiveSync's P2P passphrase: the room
	// password is derived from it here, independently of the page.
	RoomPassphrase string            `json:"roomPassphrase"`
	Device         string            `json:"device"`
	Vault          string            `json:"vault"`
	Passphrase     string            `json:"passphrase"`
	AutoAccept     string            `json:"autoAccept"`
	AutoDeny       string            `json:"autoDeny"`
	Follow         string            `json:"follow"`
	Tweaks         json.RawMessage   `json:"tweaks"`
	Docs           []json.RawMessage `json:"docs"`
	MaxWire        int               `json:"maxWirePayloadBytes"`
	// SelfIDBelow and SelfIDAbove, if set, make the peer draw ids until
	// its id sorts before (after) the one given: the peer whose id sorts
	// first offers, so a test chooses which side opens the connection.
	SelfIDBelow string `json:"selfIdBelow"`
	SelfIDAbove string `json:"selfIdAbove"`
}

// open joins a room as a new peer whose replica holds docs (written
// with new_edits=false, as replication writes them).
func (c *controller) open(ctx context.Context, body json.RawMessage) (any, error) {
	var req openRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	st, err := store.NewMemory(store.Options{Name: req.Vault})
	if err != nil {
		return nil, err
	}
	if len(req.Docs) > 0 {
		if _, err := st.BulkDocs(ctx, req.Docs); err != nil {
			st.Close()
			return nil, fmt.Errorf("loading the documents: %w", err)
		}
	}
	var tweaks negotiate.TweakValues
	if len(req.Tweaks) > 0 {
		if err := json.Unmarshal(req.Tweaks, &tweaks); err != nil {
			st.Close()
			return nil, fmt.Errorf("tweaks: %w", err)
		}
	}
	if req.RoomPassphrase != "" {
		// The room password as LiveSync derives it from the P2P passphrase.
		req.Password = trystero.RoomPassword(req.RoomPassphrase)
	}
	room, err := c.newRoom(req)
	if err != nil {
		st.Close()
		return nil, err
	}
	p := &peer{room: room, st: st}
	room.OnJoinError(func(_ string, err error) {
		p.mu.Lock()
		p.joinErrors = append(p.joinErrors, err.Error())
		p.mu.Unlock()
	})
	h, err := livesyncrpc.Attach(room, livesyncrpc.Config{
		DB: st, DBName: livesyncrpc.DBName(req.Vault), DeviceName: req.Device,
		Tweaks: tweaks, Passphrase: req.Passphrase,
		AutoAccept: req.AutoAccept, AutoDeny: req.AutoDeny, Follow: req.Follow,
		OnProgress: func(pr livesyncrpc.Progress) {
			p.mu.Lock()
			p.progress = append(p.progress, pr)
			p.mu.Unlock()
		},
	}, rpcroom.Config{
		MaxWirePayloadBytes: req.MaxWire,
		OnWarning: func(peer string, err error) {
			p.mu.Lock()
			p.warnings = append(p.warnings, err.Error())
			p.mu.Unlock()
		},
	})
	if err != nil {
		_ = room.Close()
		st.Close()
		return nil, err
	}
	p.hosted = h
	if err := room.Start(ctx); err != nil {
		p.shut()
		return nil, err
	}
	c.mu.Lock()
	c.n++
	id := fmt.Sprintf("p%d", c.n)
	c.peers[id] = p
	c.mu.Unlock()
	return map[string]string{"id": id, "selfId": room.SelfID()}, nil
}

// newRoom prepares the room, drawing ids until SelfIDBelow and
// SelfIDAbove hold.
func (c *controller) newRoom(req openRequest) (*trysteronet.Room, error) {
	for range 1000 {
		room, err := trysteronet.New(trysteronet.Config{
			RoomID: req.RoomID, Password: req.Password, Relays: []string{c.relay},
			STUN: []string{}, LoopbackOnly: true, Logger: c.logger,
		})
		if err != nil {
			return nil, err
		}
		id := room.SelfID()
		if (req.SelfIDBelow == "" || id < req.SelfIDBelow) && (req.SelfIDAbove == "" || id > req.SelfIDAbove) {
			return room, nil
		}
		_ = room.Close()
	}
	return nil, errors.New("no id in the requested range")
}

func (p *peer) shut() {
	p.mu.Lock()
	cancel := p.cancel
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	_ = p.hosted.Close()
	_ = p.room.Close()
	_ = p.st.Close()
}

func (c *controller) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, p := range c.peers {
		p.shut()
		delete(c.peers, id)
	}
}

// target is the common part of the requests naming a peer of ours and,
// for some, a peer in its room.
type target struct {
	ID        string            `json:"id"`
	Peer      string            `json:"peer"`
	Method    string            `json:"method"`
	Args      []json.RawMessage `json:"args"`
	TimeoutMs int               `json:"timeoutMs"`
	Docs      []json.RawMessage `json:"docs"`
}

func (c *controller) lookup(body json.RawMessage) (*peer, target, error) {
	var t target
	if err := json.Unmarshal(body, &t); err != nil {
		return nil, t, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.peers[t.ID]
	if p == nil {
		return nil, t, fmt.Errorf("no peer %q", t.ID)
	}
	return p, t, nil
}

// state reports the room's active peers, the advertisements known, the
// join errors, the progress reports and the RPC warnings so far.
func (c *controller) state(_ context.Context, body json.RawMessage) (any, error) {
	p, _, err := c.lookup(body)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	progress := make([]map[string]any, 0, len(p.progress))
	for _, pr := range p.progress {
		progress = append(progress, map[string]any{"peer": pr.Peer, "sending": pr.Sending, "info": pr.Info})
	}
	return map[string]any{
		"selfId": p.room.SelfID(), "peers": p.room.Peers(), "known": p.hosted.Known(),
		"joinErrors": append([]string{}, p.joinErrors...), "progress": progress,
		"warnings": append([]string{}, p.warnings...),
	}, nil
}

// docs returns every live document of the replica as stored (winning
// revision, the JSON text kept as it is, so lone surrogates stay \u
// escapes).
func (c *controller) docs(ctx context.Context, body json.RawMessage) (any, error) {
	p, _, err := c.lookup(body)
	if err != nil {
		return nil, err
	}
	infos, err := p.st.AllDocs(ctx, store.AllDocsOptions{})
	if err != nil {
		return nil, err
	}
	docs := make([]json.RawMessage, 0, len(infos))
	for _, in := range infos {
		d, err := p.st.Get(ctx, in.ID, store.GetOptions{})
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	return map[string]any{"docs": docs}, nil
}

// put writes local edits (new_edits=true).
func (c *controller) put(ctx context.Context, body json.RawMessage) (any, error) {
	p, t, err := c.lookup(body)
	if err != nil {
		return nil, err
	}
	return p.st.PutBatch(ctx, t.Docs)
}

func (c *controller) pull(ctx context.Context, body json.RawMessage) (any, error) {
	return c.replicate(ctx, body, false)
}

func (c *controller) sync(ctx context.Context, body json.RawMessage) (any, error) {
	return c.replicate(ctx, body, true)
}

func (c *controller) replicate(ctx context.Context, body json.RawMessage, sync bool) (any, error) {
	p, t, err := c.lookup(body)
	if err != nil {
		return nil, err
	}
	if t.TimeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(t.TimeoutMs)*time.Millisecond)
		defer cancel()
	}
	var res livesyncrpc.Result
	if sync {
		res, err = p.hosted.Sync(ctx, t.Peer, livesyncrpc.PullOptions{})
	} else {
		res, err = p.hosted.Pull(ctx, t.Peer, livesyncrpc.PullOptions{})
	}
	if err != nil {
		kind := "other"
		switch {
		case errors.Is(err, livesyncrpc.ErrRejected):
			kind = "rejected"
		case errors.Is(err, rpcroom.ErrTimeout):
			kind = "timeout"
		}
		return map[string]any{"error": err.Error(), "kind": kind}, nil
	}
	return res, nil
}

// call makes one RPC call to a peer and returns its answer's JSON, or
// the error's code and message.
func (c *controller) call(ctx context.Context, body json.RawMessage) (any, error) {
	p, t, err := c.lookup(body)
	if err != nil {
		return nil, err
	}
	args := make([]any, len(t.Args))
	for i, a := range t.Args {
		args[i] = a
	}
	data, err := p.hosted.RPC.CallTimeout(ctx, t.Peer, t.Method, time.Duration(t.TimeoutMs)*time.Millisecond, args...)
	if err != nil {
		var re *rpcroom.Error
		if errors.As(err, &re) {
			return map[string]any{"code": re.Code, "message": re.Message}, nil
		}
		return nil, err
	}
	return map[string]any{"data": data}, nil
}

// broadcast makes the peer a broadcasting one until it closes: the
// room's accepted peers get legacy/onProgress after every change.
func (c *controller) broadcast(_ context.Context, body json.RawMessage) (any, error) {
	p, _, err := c.lookup(body)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.mu.Lock()
	if p.cancel != nil {
		p.mu.Unlock()
		cancel()
		return nil, errors.New("already broadcasting")
	}
	p.cancel = cancel
	p.mu.Unlock()
	go func() { _ = p.hosted.Broadcast(ctx) }()
	return map[string]bool{"ok": true}, nil
}

func (c *controller) close(_ context.Context, body json.RawMessage) (any, error) {
	p, t, err := c.lookup(body)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	delete(c.peers, t.ID)
	c.mu.Unlock()
	p.shut()
	return map[string]bool{"ok": true}, nil
}
