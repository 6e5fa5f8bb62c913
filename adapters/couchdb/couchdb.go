package couchdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	kivik "github.com/go-kivik/kivik/v4"
	kivikcouch "github.com/go-kivik/kivik/v4/couchdb"

	"github.com/livesync-go/livesync-go/engine"
)

// Auth selects how the client authenticates.
type Auth string

// Authentication methods.
const (
	// AuthBasic sends the user and password with every request (the
	// default, as the LiveSync plugin does).
	AuthBasic Auth = "basic"
	// AuthCookie logs in at /_session once and sends the session cookie,
	// logging in again when it expires.
	AuthCookie Auth = "cookie"
)

// Config configures a DB. URL and Database are required; the zero value of
// every other field is the documented default.
type Config struct {
	// URL is the server, e.g. "https://couch.example.com:6984" (no user
	// info, no database).
	URL string
	// Database is the database name (CouchDB's rule: ^[a-z][a-z0-9_$()+-]*$).
	Database string
	// User and Password authenticate; both empty means anonymous.
	User     string
	Password string
	// Auth is AuthBasic (default) or AuthCookie.
	Auth Auth
	// HTTPClient, if set, is the client to use; its Transport is wrapped
	// for authentication. nil means a new client with a shared
	// http.DefaultTransport clone that keeps up to 32 idle connections
	// per server.
	HTTPClient *http.Client
	// LocalChunksOnly disables fetching chunks by id (upstream's
	// useOnlyLocalChunk): the ChunkSource's CanFetchDirect reports false.
	LocalChunksOnly bool
	// NoBulkGet makes BulkGet use per-document GET ?open_revs requests
	// without trying _bulk_get first, for servers known to lack it. BulkGet
	// also switches to this by itself when _bulk_get answers 404, 405 or
	// 501.
	NoBulkGet bool
	// LongpollTimeout is the server-side timeout of one longpoll request
	// of Changes with Wait; Changes repeats the request until a change
	// arrives or ctx ends. 0 means 60 s.
	LongpollTimeout time.Duration
}

// Validate reports whether c can be used.
func (c Config) Validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("couchdb: URL must be an http(s) URL of the server")
	}
	if u.User != nil {
		return errors.New("couchdb: put the user and password in Config, not in the URL")
	}
	if c.Database == "" {
		return errors.New("couchdb: Database is required")
	}
	switch c.Auth {
	case "", AuthBasic, AuthCookie:
	default:
		return fmt.Errorf("couchdb: unknown Auth %q (want %q or %q)", c.Auth, AuthBasic, AuthCookie)
	}
	if c.LongpollTimeout < 0 {
		return errors.New("couchdb: the long-poll timeout must not be negative")
	}
	return nil
}

// DB is one database on a CouchDB server. It implements engine.Endpoint
// and is safe for concurrent use.
type DB struct {
	cfg    Config
	base   *url.URL // server URL without a trailing slash
	hc     *http.Client
	client *kivik.Client
	db     *kivik.DB

	bulkGetMissing chan struct{} // closed once _bulk_get proved absent

	localMu   sync.Mutex
	localRevs map[string]string // _local id → last _rev read or written
}

var _ engine.Endpoint = (*DB)(nil)

// New returns a DB for cfg. It does not contact the server.
func New(cfg Config) (*DB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.LongpollTimeout == 0 {
		cfg.LongpollTimeout = 60 * time.Second
	}
	base, _ := url.Parse(strings.TrimRight(cfg.URL, "/"))
	hc := &http.Client{Transport: pooled}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient // kivik wraps its Transport: keep the caller's client intact
		hc = &c
	}
	opts := []kivik.Option{
		kivikcouch.OptionHTTPClient(hc),
		kivikcouch.OptionNoRequestCompression(),
		kivikcouch.OptionUserAgent("livesync-go"),
	}
	if cfg.User != "" || cfg.Password != "" {
		if cfg.Auth == AuthCookie {
			hc.Transport = &cookieAuth{session: base.String() + "/_session", user: cfg.User, password: cfg.Password, next: hc.Transport}
		} else {
			// Basic auth wraps the shared client's transport, so kivik's
			// requests and the raw ones both carry it.
			hc.Transport = &basicAuth{user: cfg.User, password: cfg.Password, next: hc.Transport}
		}
	}
	client, err := kivik.New("couch", base.String(), opts...)
	if err != nil {
		return nil, fmt.Errorf("couchdb: %v", err)
	}
	d := &DB{cfg: cfg, base: base, hc: hc, client: client, db: client.DB(cfg.Database),
		bulkGetMissing: make(chan struct{})}
	if cfg.NoBulkGet {
		close(d.bulkGetMissing)
	}
	return d, nil
}

// Close releases the client's idle connections.
func (d *DB) Close() error {
	d.hc.CloseIdleConnections()
	return d.client.Close()
}

// Name returns the database name.
func (d *DB) Name() string { return d.cfg.Database }

// Exists reports whether the database exists.
func (d *DB) Exists(ctx context.Context) (bool, error) {
	ok, err := d.client.DBExists(ctx, d.cfg.Database)
	if err != nil {
		return false, d.kivikErr(ctx, "check database", "", err)
	}
	return ok, nil
}

// Create creates the database; it is not an error if it exists.
func (d *DB) Create(ctx context.Context) error {
	err := d.client.CreateDB(ctx, d.cfg.Database)
	if err != nil && kivik.HTTPStatus(err) != http.StatusPreconditionFailed {
		return d.kivikErr(ctx, "create database", "", err)
	}
	return nil
}

// Destroy deletes the database and everything in it.
func (d *DB) Destroy(ctx context.Context) error {
	if err := d.client.DestroyDB(ctx, d.cfg.Database); err != nil {
		return d.kivikErr(ctx, "destroy database", "", err)
	}
	return nil
}

// ThrottleKey is host:port of the server, the politeness domain of the
// chunk source.
func (d *DB) ThrottleKey() string {
	host, port := d.base.Hostname(), d.base.Port()
	if port == "" {
		port = "80"
		if d.base.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(host, port)
}

// dbURL returns the URL of path below the database; path starts with "/"
// or is empty, and its parts must already be escaped.
func (d *DB) dbURL(path string, q url.Values) string {
	u := d.base.String() + "/" + url.PathEscape(d.cfg.Database) + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// do sends a raw request through the authenticated client and decodes a
// 2xx JSON answer into out (unless out is nil; a *rawAnswer receives it
// undecoded, a rawBody is sent as it is). Other answers become errors by
// status.
func (d *DB) do(ctx context.Context, op, docID, method, u string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := encodeBody(body)
		if err != nil {
			return &engine.Error{Op: op, DocID: docID, Stage: engine.StageEncode, Err: err}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return &engine.Error{Op: op, DocID: docID, Stage: engine.StageProtocol, Err: err}
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	markReplayable(req)
	resp, err := d.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &engine.Error{Op: op, DocID: docID, Stage: engine.StageTransport, Err: redact(err)}
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
	}()
	if resp.StatusCode/100 != 2 {
		var e struct{ Error, Reason string }
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&e)
		return statusErr(op, docID, resp.StatusCode, e.Error, e.Reason)
	}
	if out == nil {
		return nil
	}
	if a, ok := out.(*rawAnswer); ok {
		return a.read(ctx, op, docID, resp)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return answerErr(ctx, op, docID, err)
	}
	return nil
}

// replayablePosts are the POSTs this package sends that have the same
// effect when sent twice: reads, and _bulk_docs with new_edits=false
// (replicated revisions, which CouchDB stores once).
var replayablePosts = []string{"/_bulk_docs", "/_bulk_get", "/_revs_diff", "/_all_docs", "/_changes"}

// markReplayable lets net/http send such a POST again on a new connection
// when a kept-alive one it reused was closed by the server before any
// answer (a proxy or server closing idle connections at the moment the
// request went out), as it does for a GET. The Idempotency-Key header
// with no value marks it and is not sent.
func markReplayable(req *http.Request) {
	if req.Method != http.MethodPost || req.GetBody == nil {
		return
	}
	for _, suffix := range replayablePosts {
		if strings.HasSuffix(req.URL.Path, suffix) {
			req.Header["Idempotency-Key"] = nil
			return
		}
	}
}

// pooled is the transport of a DB without Config.HTTPClient:
// http.DefaultTransport keeping up to 32 idle connections per server
// instead of 2. A replication has up to batches_limit requests in flight;
// with 2 kept, every burst would open (and over HTTPS, handshake) new
// connections and close them again.
var pooled = func() http.RoundTripper {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	t = t.Clone()
	t.MaxIdleConnsPerHost = 32
	return t
}()

// basicAuth adds HTTP Basic credentials to every request.
type basicAuth struct {
	user, password string
	next           http.RoundTripper
}

func (b *basicAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	next := b.next
	if next == nil {
		next = http.DefaultTransport
	}
	r := req.Clone(req.Context())
	r.SetBasicAuth(b.user, b.password)
	return next.RoundTrip(r)
}

// CloseIdleConnections passes DB.Close on to the wrapped transport, which
// http.Client only reaches through a transport that has the method.
func (b *basicAuth) CloseIdleConnections() { closeIdle(b.next) }

// closeIdle closes the idle connections of next (http.DefaultTransport
// when nil), if it keeps any.
func closeIdle(next http.RoundTripper) {
	if next == nil {
		next = http.DefaultTransport
	}
	if c, ok := next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// cookieAuth logs in at /_session and sends the AuthSession cookie,
// logging in again after a 401 (an expired session). A failed login is
// answered as the server answered it (401), without the request.
type cookieAuth struct {
	session        string
	user, password string
	next           http.RoundTripper

	mu     sync.Mutex
	cookie string // "AuthSession=…", empty before login
}

// CloseIdleConnections passes DB.Close on to the wrapped transport.
func (c *cookieAuth) CloseIdleConnections() { closeIdle(c.next) }

func (c *cookieAuth) transport() http.RoundTripper {
	if c.next == nil {
		return http.DefaultTransport
	}
	return c.next
}

func (c *cookieAuth) login(req *http.Request) (*http.Response, error) {
	body, _ := json.Marshal(map[string]string{"name": c.user, "password": c.password})
	lr, err := http.NewRequestWithContext(req.Context(), http.MethodPost, c.session, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	lr.Header.Set("Content-Type", "application/json")
	lr.Header.Set("Accept", "application/json")
	resp, err := c.transport().RoundTrip(lr)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == "AuthSession" {
			c.mu.Lock()
			c.cookie = ck.Name + "=" + ck.Value
			c.mu.Unlock()
			return nil, nil
		}
	}
	return nil, errors.New("couchdb: /_session answered without a session cookie")
}

func (c *cookieAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		cookie := c.cookie
		c.mu.Unlock()
		if cookie == "" {
			if resp, err := c.login(req); resp != nil || err != nil {
				return resp, err
			}
			c.mu.Lock()
			cookie = c.cookie
			c.mu.Unlock()
		}
		r := req.Clone(req.Context())
		if req.GetBody != nil && attempt > 0 {
			b, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r.Body = b
		}
		r.Header.Set("Cookie", cookie)
		resp, err := c.transport().RoundTrip(r)
		if err != nil || resp.StatusCode != http.StatusUnauthorized || attempt > 0 || (req.Body != nil && req.GetBody == nil) {
			return resp, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c.mu.Lock()
		if c.cookie == cookie {
			c.cookie = "" // expired: log in again
		}
		c.mu.Unlock()
	}
}

// statusError is an HTTP error answer. It keeps the status so that
// callers decide by value, never by matching messages.
type statusError struct {
	status int
	msg    string
	advice string
	wrap   error // a sentinel such as engine.ErrNotFound, or nil
}

func (e *statusError) Error() string {
	s := e.msg
	if e.advice != "" {
		s += " (" + e.advice + ")"
	}
	if e.wrap != nil {
		s += ": " + e.wrap.Error()
	}
	return s
}

func (e *statusError) Unwrap() error { return e.wrap }

// httpStatus returns the HTTP status of an error answer, 0 if err is not one.
func httpStatus(err error) int {
	var se *statusError
	if errors.As(err, &se) {
		return se.status
	}
	return 0
}

// statusErr maps an HTTP error answer to an engine error.
func statusErr(op, docID string, status int, name, reason string) error {
	se := &statusError{status: status, msg: fmt.Sprintf("couchdb: HTTP %d", status)}
	if name != "" {
		se.msg += " " + name
	}
	if reason != "" {
		se.msg += ": " + reason
	}
	stage := engine.StageProtocol
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		stage = engine.StageAuth
		se.advice = "check the user name and password, and the user's access to the database"
	case status == http.StatusNotFound:
		se.wrap = engine.ErrNotFound
	case status == http.StatusRequestEntityTooLarge:
		se.wrap = engine.ErrTooLarge
		se.advice = "send fewer or smaller documents at once, or raise the server's max_http_request_size and max_document_size"
	case status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests:
		stage = engine.StageTransport
	}
	return &engine.Error{Op: op, DocID: docID, Stage: stage, Err: se}
}

// kivikErr maps a kivik error to an engine error.
func (d *DB) kivikErr(ctx context.Context, op, docID string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	status := kivik.HTTPStatus(err)
	var ue *url.Error
	if errors.As(err, &ue) || status == http.StatusBadGateway && !strings.Contains(err.Error(), "HTTP") {
		return &engine.Error{Op: op, DocID: docID, Stage: engine.StageTransport, Err: redact(err)}
	}
	return statusErr(op, docID, status, "", redact(err).Error())
}

// redact strips user info from URLs in err's message; the client never
// puts a password in a URL, but a caller's proxy settings might.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.User != nil {
			u.User = nil
			return &url.Error{Op: ue.Op, URL: u.String(), Err: ue.Err}
		}
	}
	return err
}
