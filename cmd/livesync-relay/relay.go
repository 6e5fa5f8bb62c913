package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	berrors "go.etcd.io/bbolt/errors"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
)

// dbLockTimeout bounds the wait for a database file another process
// holds (another relay on the same data folder).
const dbLockTimeout = 2 * time.Second

// relay is one running relay: the listener, the databases, the
// CouchDB-protocol API and the operations endpoints.
type relay struct {
	s       *settings
	log     *slog.Logger
	ln      net.Listener
	url     string
	admin   adminAccount
	dbs     *heldDatabases
	api     *couchapi.Server
	metrics *metrics
	srv     *http.Server
	started time.Time
	uuid    string
	unlock  func() // releases the data folder's lock
	p2p     *p2pRuntime
	lsp2p   *lsp2pRuntime // the LiveSync P2P rooms (lsp2p.go)
	tls     *tlsRuntime   // ACME or self-signed HTTPS (tls_serve.go)

	stopping atomic.Bool
}

// errAddrInUse means the listen address is taken.
var errAddrInUse = errors.New("address already in use")

// splitListen checks a listen address.
func splitListen(addr string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", "", fmt.Errorf("listen address %q: want host:port, e.g. 127.0.0.1:5984 or :5984", addr)
	}
	return host, port, nil
}

// startRelay listens, opens the data folder (the built-in admin, the
// databases and their hold-back state) or, when every database is kept
// on CouchDB, none, connects to the CouchDB servers of the databases kept
// there, and builds the HTTP server. It listens first, so that a taken
// port fails before anything is written, then locks the data folder, so
// that a second relay on it stops before it writes anything. A CouchDB
// server that cannot be reached is waited for (logged at each attempt)
// until ctx ends. Nothing is served until serve is called. On error
// everything opened so far is closed again and the error says why.
func startRelay(ctx context.Context, s *settings, log *slog.Logger, getenv func(string) string) (*relay, error) {
	r := &relay{s: s, log: log, started: time.Now(), unlock: func() {}}
	var cleanup []func()
	err := func() (err error) {
		defer func() {
			// bbolt panics on some damaged files while reading them: say
			// so plainly rather than with a goroutine dump.
			if p := recover(); p != nil {
				err = fmt.Errorf("opening the data folder %s failed: %v (a damaged database file? restore it from a backup, or move it away)", s.dataDir, p)
			}
		}()
		return r.start(ctx, getenv, &cleanup)
	}()
	if err != nil {
		// Each cleanup captures what it closes (never a field of r that
		// may not be set yet).
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
		return nil, err
	}
	return r, nil
}

// start does startRelay's work, adding a cleanup for everything it opens.
func (r *relay) start(ctx context.Context, getenv func(string) string, cleanup *[]func()) error {
	s, log := r.s, r.log
	if err := r.listen(cleanup); err != nil {
		return err
	}
	if err := r.openDataDir(getenv, cleanup); err != nil {
		return err
	}
	dir, err := r.openStores(ctx, cleanup)
	if err != nil {
		return err
	}
	dbs := newHeldDatabases(dir, heldSetup{holdback: s.holdback, passphrases: s.passphrases, uuid: r.uuid,
		upstreams: withLSP2PHunts(withP2PHunts(s.upstreams, s.p2p.groups), s.p2p.livesync), hunt: s.huntConfig,
		stores: s.stores, holder: lockHolder()}, log)
	*cleanup = append(*cleanup, func() { dbs.Close() })
	r.dbs = dbs
	if err := r.openDatabases(ctx); err != nil {
		return err
	}

	r.metrics = newMetrics(r.dbs)
	if err := r.startP2P(ctx, cleanup); err != nil {
		return err
	}
	r.metrics.reg.MustRegister(&p2pCollector{rt: r.p2p})
	if err := r.startLiveSyncP2P(ctx); err != nil {
		return err
	}
	r.metrics.reg.MustRegister(&lsp2pCollector{rt: r.lsp2p})
	users := append([]couchapi.User(nil), s.users...)
	if r.admin.source != adminConfigDefined {
		users = append(users, couchapi.User{Name: r.admin.name, Password: r.admin.hash, Admin: true})
	}
	cc := couchapi.Config{
		Databases: r.dbs, Users: users, CORSOrigins: s.cors,
		MaxRequestBytes: s.maxRequestBytes, MaxDocumentBytes: s.maxDocumentBytes,
		BodyTimeout: s.bodyTimeout, Login: s.login,
		WWWAuthenticate: s.wwwAuthenticate,
		Compression:     compressionOf(s.compression),
		CookieSecret:    randomBytes(32), UUID: r.uuid, Log: log.With("component", "couchapi"),
		PasswordIterations: passwordIterations, // every password is hashed already; this is the cost of the unknown-user check
	}
	cc.Hooks.OnRequest = r.metrics.onRequest
	if r.api, err = couchapi.New(cc); err != nil {
		return err
	}
	r.srv = &http.Server{
		Handler:           r.handler(),
		ReadHeaderTimeout: s.headerTimeout,
		// No ReadTimeout or WriteTimeout: they would end longpoll and
		// continuous feeds. The API gives each body its own deadline
		// (BodyTimeout) and lifts it once the body is read.
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(log.With("component", "http").Handler(), slog.LevelWarn),
	}
	return nil
}

// listen opens the listener (with TLS if configured).
func (r *relay) listen(cleanup *[]func()) error {
	s := r.s
	ln, err := net.Listen("tcp", s.listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("cannot listen on %s: %w (another livesync-relay or a CouchDB?); choose another address with --listen or \"listen\" in the configuration file", s.listen, errAddrInUse)
		}
		return fmt.Errorf("cannot listen on %s: %w", s.listen, err)
	}
	*cleanup = append(*cleanup, func() { ln.Close() })
	scheme := "http"
	if s.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey)
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}})
		scheme = "https"
	}
	r.ln = ln
	r.url = scheme + "://" + displayAddr(ln.Addr())
	return nil
}

// openDataDir creates and locks the data folder and resolves the admin
// and the server uuid kept there. A relay that keeps every database on
// CouchDB touches no file: its admin comes from the configuration or the
// environment, its uuid from the CouchDB server (openStores).
func (r *relay) openDataDir(getenv func(string) string, cleanup *[]func()) error {
	s, log := r.s, r.log
	var err error
	if s.configAdmins {
		r.admin = adminAccount{source: adminConfigDefined}
		for _, v := range []string{envAdminUser, envAdminPassword, envAdminPasswordFile} {
			if getenv(v) != "" {
				log.Warn("the configuration lists admin users, so there is no built-in admin: ignoring the environment variable", "var", v)
			}
		}
	}
	if s.noDataDir() {
		if s.configAdmins {
			return nil
		}
		if err := checkNoDataDirAdmin(s, getenv); err != nil {
			return err
		}
		r.admin, err = builtinAdmin("", getenv, false) // from the environment: reads no file
		return err
	}
	if err := os.MkdirAll(s.dataDir, 0o700); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	unlock, err := lockDataDir(s.dataDir)
	if err != nil {
		return err
	}
	r.unlock = unlock
	*cleanup = append(*cleanup, unlock)
	if err := r.startTLS(cleanup); err != nil {
		return err
	}
	if !s.configAdmins {
		if r.admin, err = builtinAdmin(s.dataDir, getenv, s.resetAdmin); err != nil {
			return err
		}
	}
	r.uuid, err = serverUUID(s.dataDir)
	return err
}

// checkNoDataDirAdmin refuses a relay without a data folder and without
// an admin from the configuration or the environment: a generated
// password has nowhere to be kept.
func checkNoDataDirAdmin(s *settings, getenv func(string) string) error {
	if !s.noDataDir() || s.configAdmins || getenv(envAdminPassword) != "" || getenv(envAdminPasswordFile) != "" {
		return nil
	}
	return usageError{"every database is kept on CouchDB, so the relay keeps no data folder and has nowhere to store a generated admin password: " +
		"list an admin in [[users]] of the configuration (admin = true), or set " + envAdminPassword + " or " + envAdminPasswordFile}
}

// openDatabases creates the configured databases that are missing and
// opens every database now: held documents resume their timers (with the
// downtime subtracted) and are listed by /status at once.
func (r *relay) openDatabases(ctx context.Context) error {
	s, log := r.s, r.log
	for _, name := range s.databases {
		err := r.untilReachable(ctx, name, fmt.Sprintf("creating database %q", name), func(ctx context.Context) error {
			return r.dbs.Create(ctx, name)
		})
		switch {
		case err == nil:
			log.Info("database created", "db", name, "store", r.dbs.storeKind(name))
		case !errors.Is(err, couchapi.ErrExists):
			return lockedHint(fmt.Errorf("creating database %q: %w", name, err))
		}
	}
	names, err := r.dbs.List(ctx)
	if err != nil {
		return fmt.Errorf("listing the databases in %s: %w", s.dataDir, err)
	}
	for _, name := range names {
		var v *couchapi.HeldDatabase
		err := r.untilReachable(ctx, name, fmt.Sprintf("opening database %q", name), func(ctx context.Context) (err error) {
			v, err = r.dbs.OpenHeld(ctx, name)
			return err
		})
		if err != nil {
			return lockedHint(fmt.Errorf("opening database %q (%s): %w", name, r.dbs.location(name), err))
		}
		if st := v.Stats(); st.Held > 0 {
			log.Info("held documents resumed", "db", name, "revisions", st.Held, "mode", string(st.Mode))
		}
	}
	return nil
}

// lockedHint explains a database file held by another process.
func lockedHint(err error) error {
	if errors.Is(err, berrors.ErrTimeout) {
		return fmt.Errorf("%w: the database file is in use by another process (another livesync-relay with the same data folder?)", err)
	}
	return err
}

// displayAddr is the address to print for a listener: an unspecified
// host (":5984", "0.0.0.0:5984") is shown as is, since any of the
// machine's addresses reaches it.
func displayAddr(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	return net.JoinHostPort(ta.IP.String(), fmt.Sprint(ta.Port))
}

// handler routes the relay's own endpoints and passes everything else to
// the CouchDB-protocol API.
func (r *relay) handler() http.Handler {
	mux := http.NewServeMux()
	own := func(route string, h http.HandlerFunc) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			start := time.Now()
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			defer func() { r.metrics.onRequest(route, sw.status, time.Since(start)) }()
			if req.Method != http.MethodGet && req.Method != http.MethodHead {
				w.Header().Set("Allow", "GET, HEAD")
				writeJSONStatus(sw, http.StatusMethodNotAllowed, map[string]string{"error": "method_not_allowed", "reason": "Only GET, HEAD allowed"})
				return
			}
			h(sw, req)
		})
	}
	mux.Handle("/healthz", own("/healthz", r.healthz))
	mux.Handle("/metrics", own("/metrics", r.adminOnly(r.metrics.handler().ServeHTTP)))
	mux.Handle("/status", own("/status", r.adminOnly(r.status)))
	mux.Handle(backupRoute, own(backupRoute, r.backup)) // backup_http.go: admins only, even with metrics_public
	r.mountP2P(mux)
	mux.Handle("/", r.metrics.countFeeds(r.api))
	return mux
}

// statusWriter records the status sent.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func writeJSONStatus(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// healthz answers 200 while the relay serves, 503 once it shuts down.
func (r *relay) healthz(w http.ResponseWriter, _ *http.Request) {
	if r.stopping.Load() {
		writeJSONStatus(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting down"})
		return
	}
	writeJSONStatus(w, http.StatusOK, map[string]string{"status": "ok"})
}

// adminOnly lets only admin users (Basic or the AuthSession cookie)
// through, unless metrics_public is set.
func (r *relay) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if r.s.metricsPublic {
			h(w, req)
			return
		}
		switch r.isAdmin(req) {
		case http.StatusOK:
			h(w, req)
		case http.StatusForbidden:
			writeJSONStatus(w, http.StatusForbidden, map[string]string{"error": "forbidden", "reason": "You are not a server admin."})
		default:
			w.Header().Set("WWW-Authenticate", `Basic realm="livesync-relay"`)
			writeJSONStatus(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized", "reason": "Admin credentials are required (or set metrics_public = true)."})
		}
	}
}

// isAdmin checks the caller's credentials (Basic or the AuthSession
// cookie) with the API's users: 200 for an admin, 403 for another user,
// 401 for none or wrong credentials.
func (r *relay) isAdmin(req *http.Request) int {
	_, admin, ok := r.api.Authenticate(req)
	switch {
	case !ok:
		return http.StatusUnauthorized
	case admin:
		return http.StatusOK
	}
	return http.StatusForbidden
}

// serve answers requests until ctx ends or the server fails, then shuts
// down: the API ends its feeds, the HTTP server drains within the
// shutdown timeout, every database's hold-back saves its purgatory
// state and the files are closed. A nil error is a clean shutdown.
func (r *relay) serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- r.srv.Serve(r.ln) }()
	r.runTLS(ctx)
	var serveErr error
	// The groups join once the server serves: they may announce on its
	// own /_nostr.
	if err := r.joinP2P(ctx); err != nil {
		r.log.Error("peer-to-peer", "err", err)
		return errors.Join(err, r.shutdown())
	}
	r.runLiveSyncP2P()
	select {
	case <-ctx.Done():
		r.log.Info("shutting down: ending changes feeds, draining requests, saving held documents")
	case serveErr = <-errc:
		r.log.Error("the HTTP server stopped", "err", serveErr)
	}
	return errors.Join(serveErr, r.shutdown())
}

func (r *relay) shutdown() error {
	r.stopping.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), r.s.shutdownTimeout)
	defer cancel()
	feedsDone := make(chan struct{})
	go func() { r.api.Close(); close(feedsDone) }() // ends feeds; later requests get 503
	var errs []error
	// Peers stop being served before the databases close (the LiveSync
	// P2P rooms first: they may signal on /_nostr).
	r.lsp2p.close()
	if err := r.p2p.close(); err != nil {
		errs = append(errs, err)
	}
	if err := r.srv.Shutdown(sctx); err != nil {
		r.log.Warn("requests still running at the shutdown timeout were cut", "timeout", r.s.shutdownTimeout)
		r.srv.Close()
	}
	select {
	case <-feedsDone:
	case <-sctx.Done():
	}
	if err := r.dbs.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the databases: %w", err))
	}
	r.unlock()
	if len(errs) == 0 {
		r.log.Info("stopped; held documents saved")
	}
	return errors.Join(errs...)
}

// compressionOf maps the compression setting. Off by default: the relay
// mostly serves E2EE chunk ciphertext, which gzip cannot shrink, and the
// load test (tests/relay_load_pull_test.go, 20 PouchDB clients) measured
// the _all_docs p99 at about 4 times the uncompressed one with gzip on.
func compressionOf(on bool) couchapi.Compression {
	if on {
		return couchapi.CompressionGzip
	}
	return couchapi.CompressionOff
}
