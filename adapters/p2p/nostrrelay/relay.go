//go:build !js

package nostrrelay

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// KindAnnouncement is the kind the relay accepts by default: 30078, the
// kind of a discovery announcement (discovery.KindAnnouncement; this
// package does not import discovery so that discovery's tests can run
// against this relay).
const KindAnnouncement = 30078

// DefaultMaxExpiry is how far ahead an event's expiration may lie by
// default: discovery.MaxTTL, the longest life of an announcement.
const DefaultMaxExpiry = time.Hour

const (
	// clockSkew is the tolerance for the clocks of publishers that run
	// ahead of the relay's: an expiration may lie MaxExpiry plus this
	// ahead, a created_at this far in the future.
	clockSkew = time.Minute
	// envelopeOverhead is what the websocket message limit allows beyond
	// MaxEventSize for the ["EVENT", ...] envelope (and a REQ's filters).
	envelopeOverhead = 4 << 10
	purgeInterval    = time.Minute
	pingInterval     = 30 * time.Second
	idleTimeout      = 2 * time.Minute // no frame, not even a pong, for this long: drop
	writeTimeout     = 10 * time.Second
	closeGrace       = time.Second
)

// Config configures a Relay. The zero value means the defaults in the
// comments.
type Config struct {
	Name             string        // the NIP-11 name; "": "livesync-go discovery relay"
	Kinds            []int         // the only event kinds accepted; nil: KindAnnouncement
	MaxEvents        int           // events stored; 0: 10000
	MaxEventSize     int           // bytes of an event's JSON; 0: 16 KiB
	EventsPerMinute  int           // EVENT messages per connection (and as many REQ/CLOSE); 0: 120
	MaxSubscriptions int           // open subscriptions per connection; 0: 16
	MaxFilters       int           // filters per REQ; 0: 8
	MaxConnections   int           // websocket connections at once; 0: 512
	MaxExpiry        time.Duration // how far ahead an expiration may lie; 0: DefaultMaxExpiry
	WriteQueue       int           // messages queued per connection before it counts as too slow; 0: 256
	WriteQueueBytes  int           // bytes queued per connection, likewise; 0: 1 MiB (at least 4 of the largest messages)
	Logger           *slog.Logger  // nil discards
	Now              func() time.Time
	// ForwardEphemeral also accepts events of the ephemeral kinds
	// 20000-29999, whatever Kinds says and without an expiration tag, and
	// forwards them to the live subscriptions they match without storing
	// them (NIP-01 ephemeral events). Trystero's Nostr signalling, which
	// LiveSync's P2P mode uses, publishes its announcements, offers,
	// answers and ICE candidates this way. The same size, rate and
	// signature checks apply. false: only Kinds.
	ForwardEphemeral bool
}

// Validate reports a configuration value out of range.
func (c Config) Validate() error {
	for name, v := range map[string]int{
		"MaxEvents": c.MaxEvents, "MaxEventSize": c.MaxEventSize, "EventsPerMinute": c.EventsPerMinute,
		"MaxSubscriptions": c.MaxSubscriptions, "MaxFilters": c.MaxFilters,
		"MaxConnections": c.MaxConnections, "WriteQueue": c.WriteQueue, "WriteQueueBytes": c.WriteQueueBytes,
	} {
		if v < 0 {
			return fmt.Errorf("nostrrelay: %s is negative", name)
		}
	}
	if c.MaxExpiry < 0 {
		return errors.New("nostrrelay: MaxExpiry is negative")
	}
	for _, k := range c.Kinds {
		if k < 0 || k > 65535 {
			return fmt.Errorf("nostrrelay: kind %d out of range", k)
		}
	}
	return nil
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxEvents, 10000)
	def(&c.MaxEventSize, 16<<10)
	def(&c.EventsPerMinute, 120)
	def(&c.MaxSubscriptions, 16)
	def(&c.MaxFilters, 8)
	def(&c.MaxConnections, 512)
	def(&c.WriteQueue, 256)
	def(&c.WriteQueueBytes, 1<<20)
	c.WriteQueueBytes = max(c.WriteQueueBytes, 4*(c.MaxEventSize+envelopeOverhead))
	if c.Name == "" {
		c.Name = "livesync-go discovery relay"
	}
	if c.Kinds == nil {
		c.Kinds = []int{KindAnnouncement}
	}
	c.Kinds = slices.Clone(c.Kinds)
	if c.MaxExpiry <= 0 {
		c.MaxExpiry = DefaultMaxExpiry
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Stats is a snapshot of a relay's counters.
type Stats struct {
	Connections int    // open websocket connections
	Events      int    // events stored
	Accepted    uint64 // EVENTs answered OK true since New
	Rejected    uint64 // EVENTs answered OK false since New
	Refused     uint64 // connections refused because MaxConnections were open
	Dropped     uint64 // connections closed because they did not read their answers
}

// Relay is an in-process Nostr relay; see the package documentation. It
// is safe for concurrent use.
type Relay struct {
	cfg      Config
	log      *slog.Logger
	upgrader websocket.Upgrader
	quit     chan struct{}
	wg       sync.WaitGroup // connection handlers, their writers, the purge loop

	mu      sync.Mutex
	closed  bool
	pending int // connections being upgraded
	conns   map[*conn]struct{}
	store   *store

	accepted, rejected, refused, dropped atomic.Uint64
}

// New returns a running relay; Close stops it. cfg must be valid
// (Config.Validate); out-of-range values are replaced by the defaults.
func New(cfg Config) *Relay {
	cfg = cfg.withDefaults()
	r := &Relay{
		cfg:   cfg,
		log:   cfg.Logger,
		quit:  make(chan struct{}),
		conns: map[*conn]struct{}{},
		store: newStore(cfg.MaxEvents),
	}
	r.upgrader = websocket.Upgrader{
		ReadBufferSize:  4 << 10,
		WriteBufferSize: 4 << 10,
		// Nostr relays are public: web clients connect from any origin.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	r.wg.Add(1)
	go r.purgeLoop()
	return r
}

// readLimit is the largest websocket message accepted.
func (r *Relay) readLimit() int { return r.cfg.MaxEventSize + envelopeOverhead }

func (r *Relay) purgeLoop() {
	defer r.wg.Done()
	t := time.NewTicker(purgeInterval)
	defer t.Stop()
	for {
		select {
		case <-r.quit:
			return
		case <-t.C:
			r.mu.Lock()
			n := r.store.purge(r.cfg.Now().Unix())
			r.mu.Unlock()
			if n > 0 {
				r.log.Debug("nostr relay: purged expired events", "events", n)
			}
		}
	}
}

// Stats returns the relay's counters.
func (r *Relay) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Stats{
		Connections: len(r.conns),
		Events:      r.store.len(),
		Accepted:    r.accepted.Load(),
		Rejected:    r.rejected.Load(),
		Refused:     r.refused.Load(),
		Dropped:     r.dropped.Load(),
	}
}

// Close closes every connection (with a going-away close frame), stops
// the relay and waits for its goroutines. Later requests get 503.
func (r *Relay) Close() error {
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
	close(r.quit)
	for _, c := range conns {
		c.kill(websocket.CloseGoingAway, "relay shutting down")
	}
	r.wg.Wait()
	return nil
}

// ServeHTTP serves NIP-01 over a websocket, and the NIP-11 document to a
// plain GET that accepts application/nostr+json.
func (r *Relay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if !websocket.IsWebSocketUpgrade(req) {
		r.serveInfo(w, req)
		return
	}
	if ok, why := r.reserve(); !ok {
		w.Header().Set("Retry-After", "60")
		http.Error(w, "nostr relay: "+why, http.StatusServiceUnavailable)
		return
	}
	defer r.wg.Done()
	ws, err := r.upgrader.Upgrade(hijacker(w), req, nil) // on failure it has answered
	c := (*conn)(nil)
	if err == nil {
		c = newConn(r, ws, req.RemoteAddr)
	}
	if !r.admit(c) {
		if ws != nil {
			_ = ws.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseGoingAway, "relay shutting down"), time.Now().Add(closeGrace))
			_ = ws.Close()
		}
		return
	}
	c.serve()
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

// hijacker returns w, or the writer it wraps (through Unwrap, the
// http.ResponseController convention) that can take over the connection,
// so that a middleware recording the status does not break websockets.
func hijacker(w http.ResponseWriter) http.ResponseWriter {
	for {
		if _, ok := w.(http.Hijacker); ok {
			return w
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

// reserve books a connection slot before the upgrade.
func (r *Relay) reserve() (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false, "shutting down"
	}
	if len(r.conns)+r.pending >= r.cfg.MaxConnections {
		r.refused.Add(1)
		r.log.Debug("nostr relay: connection refused", "reason", "too many connections")
		return false, "too many connections, try again later"
	}
	r.pending++
	r.wg.Add(1)
	return true, ""
}

// admit turns the reservation into an open connection (c nil: the
// upgrade failed); false if there is none.
func (r *Relay) admit(c *conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending--
	if c == nil || r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

// info is the NIP-11 relay information document.
type info struct {
	Name          string      `json:"name"`
	Description   string      `json:"description"`
	Software      string      `json:"software"`
	SupportedNIPs []int       `json:"supported_nips"`
	Limitation    limitation  `json:"limitation"`
	Retention     []retention `json:"retention"`
}

type limitation struct {
	MaxMessageLength     int   `json:"max_message_length"`
	MaxSubscriptions     int   `json:"max_subscriptions"`
	MaxFilters           int   `json:"max_filters"`
	MaxLimit             int   `json:"max_limit"`
	MaxSubIDLength       int   `json:"max_subid_length"`
	MaxEventTags         int   `json:"max_event_tags"`
	MaxContentLength     int   `json:"max_content_length"`
	AuthRequired         bool  `json:"auth_required"`
	PaymentRequired      bool  `json:"payment_required"`
	RestrictedWrites     bool  `json:"restricted_writes"`
	CreatedAtUpperLimit  int64 `json:"created_at_upper_limit"`
	EventsPerMinute      int   `json:"events_per_minute"`
	MaxEventSize         int   `json:"max_event_size"`
	MaxExpirationSeconds int64 `json:"max_expiration_seconds"`
}

type retention struct {
	Kinds []int `json:"kinds"`
	Time  int64 `json:"time"`
	Count int   `json:"count"`
}

func (r *Relay) info() info {
	maxExp := int64((r.cfg.MaxExpiry + clockSkew) / time.Second)
	return info{
		Name: r.cfg.Name,
		Description: "Peer discovery for livesync-go: accepts only kinds " + kindList(r.cfg.Kinds) +
			" with an NIP-40 expiration at most " + r.cfg.MaxExpiry.String() + " ahead" + ephemeralNote(r.cfg.ForwardEphemeral) + ".",
		Software:      "https://github.com/livesync-go/livesync-go",
		SupportedNIPs: []int{1, 11, 33, 40},
		Limitation: limitation{
			MaxMessageLength: r.readLimit(), MaxSubscriptions: r.cfg.MaxSubscriptions,
			MaxFilters: r.cfg.MaxFilters, MaxLimit: maxLimit, MaxSubIDLength: maxSubIDLen,
			MaxEventTags: maxTags, MaxContentLength: r.cfg.MaxEventSize,
			RestrictedWrites: true, CreatedAtUpperLimit: int64(clockSkew / time.Second),
			EventsPerMinute: r.cfg.EventsPerMinute, MaxEventSize: r.cfg.MaxEventSize,
			MaxExpirationSeconds: maxExp,
		},
		Retention: []retention{{Kinds: r.cfg.Kinds, Time: maxExp, Count: r.cfg.MaxEvents}},
	}
}

func ephemeralNote(on bool) string {
	if !on {
		return ""
	}
	return ", and forwards ephemeral kinds 20000-29999 to live subscribers without storing them"
}

func kindList(kinds []int) string {
	s := make([]string, len(kinds))
	for i, k := range kinds {
		s[i] = strconv.Itoa(k)
	}
	return strings.Join(s, ", ")
}

func (r *Relay) serveInfo(w http.ResponseWriter, req *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Headers", "Accept")
	h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
	switch req.Method {
	case http.MethodOptions:
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodGet, http.MethodHead:
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if strings.Contains(req.Header.Get("Accept"), "application/nostr+json") {
		h.Set("Content-Type", "application/nostr+json")
		_ = json.NewEncoder(w).Encode(r.info())
		return
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintf(w, "%s: a Nostr relay (NIP-01) for peer discovery; connect with a websocket.\n", r.cfg.Name)
}

// expiration reads the NIP-40 expiration tag (unix seconds).
func expiration(ev *nostr.Event) (int64, error) {
	tag := ev.Tags.GetFirst([]string{"expiration"})
	if tag == nil {
		return 0, errors.New("an expiration tag (NIP-40) is required")
	}
	if len(*tag) < 2 {
		return 0, errors.New("malformed expiration tag")
	}
	exp, err := strconv.ParseInt((*tag)[1], 10, 64)
	if err != nil || exp < 0 {
		return 0, errors.New("malformed expiration tag")
	}
	return exp, nil
}

// check applies the relay's policy to a well-formed event of size bytes
// and verifies its id and signature. It returns the event's expiration,
// or the refusal with its NIP-01 prefix.
func (r *Relay) check(ev *nostr.Event, size int, now time.Time) (int64, string) {
	if size > r.cfg.MaxEventSize {
		return 0, fmt.Sprintf("invalid: event larger than %d bytes", r.cfg.MaxEventSize)
	}
	ephemeral := r.cfg.ForwardEphemeral && ev.IsEphemeral()
	if !ephemeral && !slices.Contains(r.cfg.Kinds, ev.Kind) {
		return 0, fmt.Sprintf("blocked: this relay accepts only kinds %s", kindList(r.cfg.Kinds))
	}
	exp, err := expiration(ev)
	if ephemeral && ev.Tags.GetFirst([]string{"expiration"}) == nil {
		// Never stored, so an expiration is not needed; one that is
		// given is still checked.
		exp, err = now.Add(clockSkew).Unix(), nil
	}
	switch {
	case err != nil:
		return 0, "invalid: " + err.Error()
	case exp <= now.Unix():
		return 0, "invalid: event has expired"
	case exp > now.Add(r.cfg.MaxExpiry+clockSkew).Unix():
		return 0, fmt.Sprintf("invalid: expiration more than %s ahead", r.cfg.MaxExpiry)
	case int64(ev.CreatedAt) > now.Add(clockSkew).Unix():
		return 0, "invalid: created_at is in the future"
	case !ev.CheckID():
		return 0, "invalid: id is not the hash of the event"
	}
	if ok, _ := ev.CheckSignature(); !ok {
		return 0, "invalid: bad signature"
	}
	return exp, ""
}

// publish checks ev and stores it, delivering it to the matching
// subscriptions; it returns the answer for the OK message.
func (r *Relay) publish(ev *nostr.Event, size int) (bool, string) {
	now := r.cfg.Now()
	exp, refusal := r.check(ev, size, now)
	if refusal != "" {
		r.rejected.Add(1)
		return false, refusal
	}
	evJSON, err := ev.MarshalJSON()
	if err != nil {
		r.rejected.Add(1)
		return false, "error: could not encode the event"
	}
	result := putStored
	r.mu.Lock()
	if !ev.IsEphemeral() {
		result, _ = r.store.put(ev, evJSON, exp, now.Unix())
	}
	var to []target
	if result == putStored {
		to = r.targets(ev)
	}
	r.mu.Unlock()
	r.accepted.Add(1)
	for _, t := range to {
		t.c.offer(eventMessage(t.subID, evJSON))
	}
	switch result {
	case putDuplicate:
		return true, "duplicate: already have this event"
	case putOlder:
		return true, "duplicate: a newer version of this event is stored"
	}
	return true, ""
}

type target struct {
	c     *conn
	subID string
}

// targets lists the subscriptions ev matches. r.mu is held.
func (r *Relay) targets(ev *nostr.Event) []target {
	var to []target
	for c := range r.conns {
		for id, filters := range c.subs {
			if filters.Match(ev) {
				to = append(to, target{c, id})
			}
		}
	}
	return to
}

// subscribe opens (or replaces) subscription id of c and returns the JSON
// of the stored events it matches, or a refusal for the CLOSED message.
func (r *Relay) subscribe(c *conn, id string, filters nostr.Filters) ([][]byte, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, open := c.subs[id]; !open && len(c.subs) >= r.cfg.MaxSubscriptions {
		return nil, fmt.Sprintf("blocked: at most %d open subscriptions per connection", r.cfg.MaxSubscriptions)
	}
	c.subs[id] = filters
	return r.store.query(filters, r.cfg.Now().Unix()), ""
}

func (r *Relay) unsubscribe(c *conn, id string) {
	r.mu.Lock()
	delete(c.subs, id)
	r.mu.Unlock()
}
