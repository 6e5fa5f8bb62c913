package trysteronet

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"

	"github.com/livesync-go/livesync-go/engine/trystero"
)

// Errors of this package.
var (
	// ErrNotConnected means a Send named a peer that is not an active
	// member of the room (unknown, still in its handshake, or gone).
	ErrNotConnected = errors.New("trysteronet: peer is not connected")
	// ErrClosed means the room has been left.
	ErrClosed  = errors.New("trysteronet: room closed")
	errNoRelay = errors.New("trysteronet: relay not connected")
)

// ActionHandler receives one complete action message from an active
// peer: the body's bytes (for JSON and string messages, their text).
// It runs in the peer's receiving goroutine and must return quickly.
type ActionHandler = func(peer string, body []byte)

// Room is one joined Trystero room; see the package documentation.
// Its methods are safe for concurrent use.
type Room struct {
	cfg       Config
	log       *slog.Logger
	rand      io.Reader
	selfID    string
	rootTopic string
	selfTopic string
	token     string
	key       []byte
	nostr     nostrKey
	relays    []*relayClient
	reasm     *trystero.Reassembler

	sendMu sync.Mutex
	sender trystero.Sender

	hmu      sync.RWMutex
	actions  map[string]ActionHandler
	onJoin   []func(peer string)
	onLeave  []func(peer string)
	onErrors []func(peer string, err error)

	mu      sync.Mutex
	started bool
	closed  bool
	active  map[string]*conn
	conns   map[*conn]struct{}

	// The event loop: signalling and connection lifecycle run one at a
	// time in loop, in the order posted. Only loop touches states.
	qmu    sync.Mutex
	queue  []func()
	wake   chan struct{}
	states map[string]*peerState

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New prepares a room without joining it: register handlers, then
// Start. Join does both.
func New(cfg Config) (*Room, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	rnd := cfg.Rand
	if rnd == nil {
		rnd = rand.Reader
	}
	nk, err := newNostrKey(rnd)
	if err != nil {
		return nil, fmt.Errorf("trysteronet: nostr key: %w", err)
	}
	r := &Room{
		cfg: cfg, log: cfg.Logger, rand: rnd,
		selfID:    trystero.NewSelfID(rnd),
		rootTopic: trystero.RootTopic(cfg.AppID, cfg.RoomID),
		token:     trystero.RoomToken(cfg.AppID, cfg.RoomID),
		key:       trystero.SDPKey(cfg.Password, cfg.AppID, cfg.RoomID),
		nostr:     nk,
		reasm:     trystero.NewReassembler(trystero.ReassemblerConfig{MaxMessageBytes: cfg.MaxMessageBytes}),
		actions:   map[string]ActionHandler{},
		active:    map[string]*conn{},
		conns:     map[*conn]struct{}{},
		wake:      make(chan struct{}, 1),
		states:    map[string]*peerState{},
	}
	r.selfTopic = trystero.SelfTopic(cfg.AppID, cfg.RoomID, r.selfID)
	for i, u := range cfg.Relays {
		r.relays = append(r.relays, &relayClient{r: r, idx: i, url: u, subID: trystero.NewID(rnd, trystero.SubscriptionIDLen)})
	}
	return r, nil
}

// Join prepares the room and joins it at once. Handlers registered after
// Join may miss the first peers; use New, the On methods, then Start.
func Join(ctx context.Context, cfg Config) (*Room, error) {
	r, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// Start joins the room: it connects to the relays, subscribes and
// announces. ctx bounds nothing but the start; the room stays until
// Close.
func (r *Room) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.started {
		return errors.New("trysteronet: room already started")
	}
	r.started = true
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.wg.Add(1 + len(r.relays))
	go func() { defer r.wg.Done(); r.loop() }()
	for _, c := range r.relays {
		go func() { defer r.wg.Done(); c.run(r.ctx) }()
	}
	return nil
}

// SelfID returns this peer's trystero id.
func (r *Room) SelfID() string { return r.selfID }

// OnAction sets the handler of an action (one per action; nil removes).
func (r *Room) OnAction(action string, fn ActionHandler) {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if fn == nil {
		delete(r.actions, action)
		return
	}
	r.actions[action] = fn
}

// OnPeerJoin adds a function called when a peer becomes active (its
// handshake passed). It runs in the peer's receiving goroutine.
func (r *Room) OnPeerJoin(fn func(peer string)) {
	r.hmu.Lock()
	r.onJoin = append(r.onJoin, fn)
	r.hmu.Unlock()
}

// OnPeerLeave adds a function called when an active peer leaves or its
// connection ends.
func (r *Room) OnPeerLeave(fn func(peer string)) {
	r.hmu.Lock()
	r.onLeave = append(r.onLeave, fn)
	r.hmu.Unlock()
}

// OnJoinError adds a function told of trystero's join errors: sealed
// signalling that does not open and failed password handshakes (both
// match trystero.ErrIncorrectPassword), and connections that could not
// be made.
func (r *Room) OnJoinError(fn func(peer string, err error)) {
	r.hmu.Lock()
	r.onErrors = append(r.onErrors, fn)
	r.hmu.Unlock()
}

// Peers returns the active peers' ids, sorted.
func (r *Room) Peers() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.active))
	for id := range r.active {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Send sends body as a JSON message (body is its JSON text) on action to
// an active peer, as trystero sends an object or a number.
func (r *Room) Send(ctx context.Context, peer, action string, body []byte) error {
	return r.SendKind(ctx, peer, action, trystero.BodyJSON, body)
}

// SendKind is Send with the body's kind: a string (its UTF-8), JSON text
// or binary.
func (r *Room) SendKind(ctx context.Context, peer, action string, kind trystero.BodyKind, body []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	c, closed := r.active[peer], r.closed
	r.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if c == nil {
		return ErrNotConnected
	}
	return c.sendAction(action, kind, body)
}

// Close leaves the room: it sends @_leave to every connected peer, waits
// trystero's 99 ms, closes the connections and the relays, and waits for
// every goroutine it started.
func (r *Room) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	conns := make([]*conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	sent := false
	for _, c := range conns {
		if c.sendLeave() {
			sent = true
		}
	}
	if sent {
		sleep(trystero.LeaveDelay)
	}
	if r.cancel != nil {
		r.cancel()
	}
	for _, c := range conns {
		c.close(false)
	}
	r.wg.Wait()
	return nil
}

// post queues fn for the event loop; it never blocks.
func (r *Room) post(fn func()) {
	r.qmu.Lock()
	r.queue = append(r.queue, fn)
	r.qmu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Room) loop() {
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.wake:
		}
		for {
			r.qmu.Lock()
			if len(r.queue) == 0 {
				r.qmu.Unlock()
				break
			}
			fn := r.queue[0]
			r.queue[0] = nil
			r.queue = r.queue[1:]
			r.qmu.Unlock()
			if r.ctx.Err() != nil {
				return
			}
			fn()
		}
	}
}

// joinError tells the OnJoinError functions.
func (r *Room) joinError(peer string, err error) {
	r.log.Debug("trysteronet: join error", "peer", peer, "err", err)
	r.hmu.RLock()
	fns := slices.Clone(r.onErrors)
	r.hmu.RUnlock()
	for _, fn := range fns {
		fn(peer, err)
	}
}

func (r *Room) handler(action string) ActionHandler {
	r.hmu.RLock()
	defer r.hmu.RUnlock()
	return r.actions[action]
}

func (r *Room) joinFns() []func(string) {
	r.hmu.RLock()
	defer r.hmu.RUnlock()
	return slices.Clone(r.onJoin)
}

func (r *Room) leaveFns() []func(string) {
	r.hmu.RLock()
	defer r.hmu.RUnlock()
	return slices.Clone(r.onLeave)
}
