package couchapi

import (
	"context"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/livesync-go/livesync-go/engine/store"
)

// CORS answers, as LiveSync provisions CouchDB (engine/FORMAT.md §5.1).
const (
	corsMethods       = "GET, PUT, POST, HEAD, DELETE"
	corsHeaders       = "accept, authorization, content-type, origin, referer"
	corsExposeHeaders = "content-type, cache-control, accept-ranges, etag, server, x-couch-request-id, x-couch-update-newrev, x-couchdb-body-time"
	corsMaxAge        = "3600"
)

// serverHeader is the Server header: LiveSync's wizard reads the CouchDB
// version from it.
const serverHeader = "CouchDB/" + CouchDBVersion + " (livesync-relay)"

// Server serves the CouchDB-protocol API over a Databases. It is an
// http.Handler, safe for concurrent use.
type Server struct {
	cfg            Config
	dbs            Databases
	log            *slog.Logger
	auth           *authenticator
	uuid           string
	maxReq         int64
	maxDoc         int64
	changesTimeout time.Duration
	bodyTimeout    time.Duration
	corsAll        bool
	corsOrigins    map[string]bool

	ctx    context.Context // cancelled by Close: ends feeds
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	feeds  sync.WaitGroup

	localSeed  maphash.Seed
	localLocks [64]sync.Mutex // serialise _local writes per (db, id) hash
}

// New returns a Server for cfg. Plaintext passwords are hashed here
// (PasswordIterations rounds of PBKDF2 each).
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	auth, err := newAuthenticator(cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, dbs: cfg.Databases, log: cfg.Log, auth: auth, uuid: cfg.UUID,
		maxReq: cfg.maxRequestBytes(), maxDoc: cfg.maxDocumentBytes(), changesTimeout: cfg.changesTimeout(),
		bodyTimeout: cfg.bodyTimeout(), corsOrigins: map[string]bool{}, localSeed: maphash.MakeSeed(),
	}
	auth.crossSite = s.crossSite
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.uuid == "" {
		s.uuid = hex.EncodeToString(randomBytes(16))
	}
	for _, o := range cfg.CORSOrigins {
		if o == "*" {
			s.corsAll = true
		}
		s.corsOrigins[strings.TrimSuffix(o, "/")] = true
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Close ends every longpoll and continuous feed (each is closed like a
// timed-out feed, with its last_seq) and waits for them; later requests
// are answered 503. It does not close the Databases. Call it before
// http.Server.Shutdown, whose wait would otherwise never see the feeds go
// idle (http.Server.RegisterOnShutdown does that).
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.feeds.Wait()
	return nil
}

// beginFeed registers a long-running feed; false after Close.
func (s *Server) beginFeed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.feeds.Add(1)
	return true
}

// access is what a route needs from the caller.
type access int

const (
	accPublic     access = iota // anyone
	accServer                   // a valid user, or anonymous when anonymous reads are allowed
	accRead                     // read the database
	accWrite                    // write documents of the database
	accDBAdmin                  // create the database: a server admin or a user it is listed for
	accDBMaintain               // compact or configure the database: as accDBAdmin, with the store open
	accDBDestroy                // delete the database: server admins only
)

// request is one request being served.
type request struct {
	w    *respWriter
	r    *http.Request
	id   identity
	db   string
	st   store.Store
	rest []string // path segments after the database name
}

type handler func(s *Server, q *request) *apiError

type op struct {
	h   handler
	acc access
}

// endpoint is a resolved path: its route template for metrics and the
// operations per method.
type endpoint struct {
	tmpl string
	db   string // "" for server routes
	rest []string
	ops  map[string]op
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rw := &respWriter{ResponseWriter: w, head: r.Method == http.MethodHead, compress: s.cfg.Compression == CompressionGzip}
	rw.gzipOK = rw.compress && acceptsGzip(r.Header.Values("Accept-Encoding"))
	tmpl := "unknown"
	defer s.finish(rw, r, &tmpl, start)
	h := rw.Header()
	h.Set("Server", serverHeader)
	h.Set("Cache-Control", "must-revalidate")
	h.Set("X-Couch-Request-Id", hex.EncodeToString(randomBytes(5)))
	if s.ctx.Err() != nil {
		writeError(rw, errShuttingDown)
		return
	}
	if s.cors(rw, r) {
		tmpl = "preflight"
		return
	}
	ep, ae := s.resolve(r)
	if ep != nil {
		tmpl = ep.tmpl
	}
	if ae != nil {
		refuseBody(rw, r)
		writeError(rw, ae)
		return
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	o, ok := ep.ops[method]
	if !ok {
		refuseMethod(rw, r, ep)
		return
	}
	q := &request{w: rw, r: r, db: ep.db, rest: ep.rest}
	if o.acc != accPublic && !s.admit(rw, q, o.acc, tmpl) {
		return
	}
	if !s.acceptBody(rw, q.r, o.acc, tmpl) {
		return
	}
	if ep.db != "" && o.acc != accDBAdmin && o.acc != accDBDestroy { // create and delete need no open store
		st, err := s.dbs.Open(q.r.Context(), ep.db)
		if err != nil {
			ae := asAPIError(err)
			if ae == errMissing {
				ae = errDBMissing
			}
			s.fail(rw, q, ae)
			return
		}
		q.st = st
	}
	if ae := o.h(s, q); ae != nil {
		s.fail(rw, q, ae)
	}
}

// finish ends a request ServeHTTP served, deferred: it turns a panic of a
// handler into a 500 (or, once the answer began, an aborted connection,
// so a half-sent answer never looks complete), completes the answer and
// reports it to the request hook.
func (s *Server) finish(rw *respWriter, r *http.Request, tmpl *string, start time.Time) {
	if p := recover(); p != nil {
		if p == http.ErrAbortHandler {
			s.hook(*tmpl, rw, start)
			panic(p)
		}
		s.log.Error("panic while serving a request", "route", *tmpl, "method", r.Method,
			"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		if !rw.wrote {
			writeError(rw, errorf(http.StatusInternalServerError, "internal_server_error", "The server could not complete the request."))
		} else {
			s.hook(*tmpl, rw, start)
			panic(http.ErrAbortHandler) // a half-sent answer must not look complete
		}
	}
	rw.finish()
	s.hook(*tmpl, rw, start)
}

// refuseMethod answers a method the route does not serve: 405 with the
// methods it does serve in Allow.
func refuseMethod(rw *respWriter, r *http.Request, ep *endpoint) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete} {
		if _, ok := ep.ops[m]; ok || (m == http.MethodHead && ep.ops[http.MethodGet].h != nil) {
			allowed = append(allowed, m)
		}
	}
	rw.Header().Set("Allow", strings.Join(allowed, ", "))
	refuseBody(rw, r)
	writeError(rw, methodNotAllowed(strings.Join(allowed, ",")))
}

// admit checks the credentials of a request to a route that needs them,
// before a byte of its body is read (a refused request's body is never
// waited for), and whether the caller may use the route: false when it
// answered the refusal. An admitted user's name is in q.r's context.
func (s *Server) admit(rw *respWriter, q *request, acc access, tmpl string) bool {
	r := q.r
	id, ae := s.auth.identify(rw, r)
	if ae != nil {
		s.loginFailed(r, tmpl, "", ae)
		refuseBody(rw, r)
		s.unauthorized(rw, ae)
		return false
	}
	q.id = id
	if ae := s.authorize(q, acc); ae != nil {
		refuseBody(rw, r)
		if ae.status == http.StatusUnauthorized {
			s.unauthorized(rw, ae)
		} else {
			writeError(rw, ae)
		}
		return false
	}
	if id.acc != nil { // stores may count writes per user (UserFrom)
		q.r = r.WithContext(withUser(r.Context(), id.acc.name))
	}
	return true
}

// acceptBody checks a request's size and content type and bounds the
// reading of its body (time and size, decompressed): false when it
// answered the refusal.
func (s *Server) acceptBody(rw *respWriter, r *http.Request, acc access, tmpl string) bool {
	maxBody := s.maxReq
	if acc == accPublic {
		maxBody = min(maxBody, maxPublicBody) // a login form, from anyone
	}
	refuse := refuseBody
	if acc != accPublic {
		refuse = s.refuseAuthenticatedBody
	}
	if r.ContentLength > maxBody {
		refuse(rw, r)
		writeError(rw, errTooLarge)
		return false
	}
	if ae := checkContentType(r, tmpl == "/_session"); ae != nil {
		refuse(rw, r)
		writeError(rw, ae)
		return false
	}
	if hasBody(r) {
		s.bodyDeadline(rw, r)
		r.Body = http.MaxBytesReader(rw, r.Body, maxBody)
	}
	if ae := s.decodeBody(r); ae != nil {
		refuse(rw, r)
		writeError(rw, ae)
		return false
	}
	return true
}

func (s *Server) hook(tmpl string, rw *respWriter, start time.Time) {
	if s.cfg.Hooks.OnRequest != nil {
		status := rw.status
		if !rw.wrote {
			status = http.StatusOK
		}
		s.cfg.Hooks.OnRequest(tmpl, status, time.Since(start))
	}
}

// fail answers ae if nothing has been sent yet, and logs server errors.
func (s *Server) fail(w *respWriter, q *request, ae *apiError) {
	if ae.status >= 500 && ae.cause != nil {
		s.log.Error("request failed", "method", q.r.Method, "db", q.db, "status", ae.status, "err", ae.cause)
	}
	if w.wrote {
		panic(http.ErrAbortHandler)
	}
	writeError(w, ae)
}

// unauthorized answers a refused login: 401 (with WWW-Authenticate if
// configured) or 429 with Retry-After.
func (s *Server) unauthorized(w http.ResponseWriter, ae *apiError) {
	if s.cfg.WWWAuthenticate != "" && ae.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", s.cfg.WWWAuthenticate)
	}
	writeError(w, ae)
}

// authorize checks q's identity against what the route needs.
func (s *Server) authorize(q *request, acc access) *apiError {
	u := q.id.acc
	anon := func(write bool) bool {
		return (!write && s.cfg.AllowAnonymousRead) || (write && s.cfg.AllowAnonymousWrite)
	}
	switch acc {
	case accPublic:
		return nil
	case accServer:
		if u != nil || s.cfg.AllowAnonymousRead || s.cfg.AllowAnonymousWrite {
			return nil
		}
		return errAuthRequired
	case accRead, accWrite:
		write := acc == accWrite
		if u != nil && (u.admin || u.dbs[q.db]) || anon(write) {
			return nil
		}
		if u == nil {
			return errorf(http.StatusUnauthorized, "unauthorized", "You are not authorized to access this db.")
		}
		return errDBForbidden
	case accDBAdmin, accDBMaintain, accDBDestroy:
		// Deleting a database takes a server admin, as in CouchDB: a
		// user listed for a database (a device's credentials) must not
		// be able to destroy the vault and its history. Listed users may
		// create their database (the relay's configuration already names
		// it for them), compact and configure it.
		if u != nil && (u.admin || acc != accDBDestroy && u.dbs[q.db]) {
			return nil
		}
		if u == nil {
			return errorf(http.StatusUnauthorized, "unauthorized", "You are not a server admin.")
		}
		return errNotAdmin
	}
	return errNotAdmin
}

// loginFailed logs a refused login. A 429 is logged at debug level: a
// guessing client would fill the log.
func (s *Server) loginFailed(r *http.Request, route, user string, ae *apiError) {
	lvl := slog.LevelInfo
	if ae.status == http.StatusTooManyRequests {
		lvl = slog.LevelDebug
	}
	args := []any{"route", route, "remote", r.RemoteAddr, "status", ae.status, "reason", ae.reason}
	if user != "" {
		args = append(args, "user", user)
	}
	s.log.Log(r.Context(), lvl, "authentication failed", args...)
}

// crossSite reports whether r comes from a browser origin that CORS
// allows and that is not the server's own (see authenticator.sameSite).
func (s *Server) crossSite(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if !s.originAllowed(origin) {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return !strings.EqualFold(origin, scheme+"://"+r.Host)
}

// originAllowed reports whether a browser origin may call the server.
func (s *Server) originAllowed(origin string) bool {
	return origin != "" && (s.corsAll || s.corsOrigins[origin])
}

// cors adds CORS headers for an allowed origin and answers a preflight
// request (reporting true when it did).
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if !s.originAllowed(origin) {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Credentials", "true")
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		return false
	}
	h.Set("Access-Control-Allow-Methods", corsMethods)
	h.Set("Access-Control-Allow-Headers", corsHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
	return true
}

// pathSegments splits the escaped path into unescaped segments, so that
// "%2F" inside a document id stays part of it.
func pathSegments(r *http.Request) ([]string, *apiError) {
	p := strings.TrimPrefix(r.URL.EscapedPath(), "/")
	if p == "" {
		return nil, nil
	}
	raw := strings.Split(p, "/")
	if len(raw) > 1 && raw[len(raw)-1] == "" {
		raw = raw[:len(raw)-1] // "/db/" is "/db"
	}
	segs := make([]string, len(raw))
	for i, s := range raw {
		u, err := url.PathUnescape(s)
		if err != nil || !utf8.ValidString(u) {
			return nil, badRequest("The request path is not valid (bad escape or invalid UTF-8).")
		}
		segs[i] = u
	}
	return segs, nil
}

// resolve maps a path to its endpoint.
func (s *Server) resolve(r *http.Request) (*endpoint, *apiError) {
	segs, ae := pathSegments(r)
	if ae != nil {
		return nil, ae
	}
	get := func(h handler, acc access) map[string]op { return map[string]op{http.MethodGet: {h, acc}} }
	if len(segs) == 0 {
		return &endpoint{tmpl: "/", ops: get((*Server).welcome, accPublic)}, nil
	}
	first := segs[0]
	if strings.HasPrefix(first, "_") {
		switch {
		case first == "_up" && len(segs) == 1:
			return &endpoint{tmpl: "/_up", ops: get((*Server).up, accPublic)}, nil
		case first == "_all_dbs" && len(segs) == 1:
			return &endpoint{tmpl: "/_all_dbs", ops: get((*Server).allDBs, accServer)}, nil
		case first == "_uuids" && len(segs) == 1:
			return &endpoint{tmpl: "/_uuids", ops: get((*Server).uuids, accServer)}, nil
		case first == "_session" && len(segs) == 1:
			return &endpoint{tmpl: "/_session", ops: map[string]op{
				http.MethodGet:    {(*Server).getSession, accPublic},
				http.MethodPost:   {(*Server).postSession, accPublic},
				http.MethodDelete: {(*Server).deleteSession, accPublic},
			}}, nil
		case first == "_node" && len(segs) >= 3 && (segs[1] == "_local" || segs[1] == "nonode@nohost") && segs[2] == "_config" && len(segs) <= 5:
			ro := (*Server).configReadOnly
			return &endpoint{tmpl: "/_node/{node}/_config", rest: segs[3:], ops: map[string]op{
				http.MethodGet:    {(*Server).config, accServer},
				http.MethodPut:    {ro, accServer},
				http.MethodDelete: {ro, accServer},
				http.MethodPost:   {ro, accServer},
			}}, nil
		}
		return &endpoint{tmpl: "unknown"}, errNotFoundRoute
	}
	db := first
	if !ValidDatabaseName(db) {
		return &endpoint{tmpl: "/{db}"}, illegalDBName(db)
	}
	rest := segs[1:]
	ep := &endpoint{db: db, rest: rest}
	if len(rest) == 0 {
		ep.tmpl = "/{db}"
		ep.ops = map[string]op{
			http.MethodGet:    {(*Server).dbInfo, accRead},
			http.MethodPut:    {(*Server).createDB, accDBAdmin},
			http.MethodDelete: {(*Server).deleteDB, accDBDestroy},
			http.MethodPost:   {(*Server).postDoc, accWrite},
		}
		return ep, nil
	}
	switch name := rest[0]; {
	case name == "_changes" && len(rest) == 1:
		ep.tmpl = "/{db}/_changes"
		ep.ops = map[string]op{http.MethodGet: {(*Server).changes, accRead}, http.MethodPost: {(*Server).changes, accRead}}
	case name == "_revs_diff" && len(rest) == 1:
		ep.tmpl = "/{db}/_revs_diff"
		ep.ops = map[string]op{http.MethodPost: {(*Server).revsDiff, accRead}}
	case name == "_bulk_docs" && len(rest) == 1:
		ep.tmpl = "/{db}/_bulk_docs"
		ep.ops = map[string]op{http.MethodPost: {(*Server).bulkDocs, accWrite}}
	case name == "_bulk_get" && len(rest) == 1:
		ep.tmpl = "/{db}/_bulk_get"
		ep.ops = map[string]op{http.MethodPost: {(*Server).bulkGet, accRead}}
	case name == "_all_docs" && len(rest) == 1:
		ep.tmpl = "/{db}/_all_docs"
		ep.ops = map[string]op{http.MethodGet: {(*Server).allDocs, accRead}, http.MethodPost: {(*Server).allDocs, accRead}}
	case name == "_compact" && len(rest) == 1:
		ep.tmpl = "/{db}/_compact"
		ep.ops = map[string]op{http.MethodPost: {(*Server).compact, accDBMaintain}}
	case name == "_revs_limit" && len(rest) == 1:
		ep.tmpl = "/{db}/_revs_limit"
		ep.ops = map[string]op{http.MethodGet: {(*Server).getRevsLimit, accRead}, http.MethodPut: {(*Server).putRevsLimit, accDBMaintain}}
	case name == "_ensure_full_commit" && len(rest) == 1:
		ep.tmpl = "/{db}/_ensure_full_commit"
		ep.ops = map[string]op{http.MethodPost: {(*Server).ensureFullCommit, accWrite}}
	case name == "_local" && len(rest) >= 2:
		ep.tmpl = "/{db}/_local/{id}"
		ep.rest = []string{strings.Join(rest[1:], "/")}
		ep.ops = map[string]op{
			http.MethodGet:    {(*Server).getLocal, accRead},
			http.MethodPut:    {(*Server).putLocal, accWrite},
			http.MethodDelete: {(*Server).deleteLocal, accWrite},
		}
	case name == "_design" && len(rest) == 2:
		ep.tmpl = "/{db}/_design/{ddoc}"
		ep.rest = []string{"_design/" + rest[1]}
		ep.ops = docOps()
	case strings.HasPrefix(name, "_"):
		// Views, _find, _security, attachments of design documents…: not served.
		ep.tmpl = "/{db}/_unknown"
		return ep, errNotFoundRoute
	case len(rest) == 1:
		ep.tmpl = "/{db}/{docid}"
		ep.ops = docOps()
	default:
		ep.tmpl = "/{db}/{docid}/{attachment}"
		return ep, errorf(http.StatusNotFound, "not_found", "Attachments are not served by this server.")
	}
	return ep, nil
}

func docOps() map[string]op {
	return map[string]op{
		http.MethodGet:    {(*Server).getDoc, accRead},
		http.MethodPut:    {(*Server).putDoc, accWrite},
		http.MethodDelete: {(*Server).deleteDoc, accWrite},
	}
}

// localLock returns the lock that serialises writes of one _local
// document (CouchDB's "0-N" revision check is read-then-write).
func (s *Server) localLock(db, id string) *sync.Mutex {
	return &s.localLocks[maphash.String(s.localSeed, db+"\x00"+id)%uint64(len(s.localLocks))]
}

// feedContext is the context of a long-running feed: it ends when the
// client goes away or the server closes.
func (s *Server) feedContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}
