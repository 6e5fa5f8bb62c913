package tests

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi/boltdir"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

// relay is the relay's CouchDB-protocol API served in-process on
// 127.0.0.1 over bbolt databases in a temporary directory.
type relay struct {
	env couchEnv
	dbs *boltdir.Databases
	srv *httptest.Server

	mu  sync.Mutex
	cfg couchapi.Config
	api *couchapi.Server
}

// liveSyncOrigins are the origins LiveSync's CouchDB setup allows.
var liveSyncOrigins = []string{"app://obsidian.md", "capacitor://localhost", "http://localhost"}

// startRelay starts a relay with one admin user (a random password,
// hashed with the default PBKDF2 cost) and LiveSync's CORS origins, cfg
// adjusted by mod. Everything stops when the test ends.
func startRelay(t *testing.T, mod func(*couchapi.Config)) *relay {
	t.Helper()
	dbs, err := boltdir.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbs.Close() })
	pass := make([]byte, 12)
	_, _ = rand.Read(pass)
	r := &relay{dbs: dbs, env: couchEnv{user: "admin", password: hex.EncodeToString(pass)}}
	r.cfg = couchapi.Config{
		Databases:   dbs,
		Users:       []couchapi.User{{Name: r.env.user, Password: r.env.password, Admin: true}},
		CORSOrigins: liveSyncOrigins,
		Log:         slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if mod != nil {
		mod(&r.cfg)
	}
	if r.api, err = couchapi.New(r.cfg); err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(r) // listens on 127.0.0.1
	t.Cleanup(r.srv.Close)
	t.Cleanup(func() { r.current().Close() }) // first: end feeds so Close does not wait for them
	r.env.url = r.srv.URL
	return r
}

// server is the factory of r's server, for the tests that take one.
func (r *relay) server() couchFactory { return fixedServer(r.env) }

func (r *relay) current() *couchapi.Server {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.api
}

// ServeHTTP serves the relay's API. The relay's configuration is
// read-only over HTTP; to run the suites that lower the server's size
// limits (TestCouchDBTooLarge, TestFaultPushTooLarge) against it, an
// admin's PUT of couchdb/max_document_size or chttpd/max_http_request_size
// restarts the API with the new limit over the same databases, as an
// operator would.
func (r *relay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodPut {
		if key, ok := strings.CutPrefix(req.URL.Path, "/_node/_local/_config/"); ok {
			if u, p, _ := req.BasicAuth(); u == r.env.user && p == r.env.password && r.reconfigure(w, req, key) {
				return
			}
		}
	}
	r.current().ServeHTTP(w, req)
}

func (r *relay) reconfigure(w http.ResponseWriter, req *http.Request, key string) bool {
	var v string
	if json.NewDecoder(req.Body).Decode(&v) != nil {
		return false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return false
	}
	r.mu.Lock()
	cfg := r.cfg
	var old int64
	switch key {
	case "couchdb/max_document_size":
		old, cfg.MaxDocumentBytes = cfg.MaxDocumentBytes, n
	case "chttpd/max_http_request_size":
		old, cfg.MaxRequestBytes = cfg.MaxRequestBytes, n
	default:
		r.mu.Unlock()
		return false
	}
	api, err := couchapi.New(cfg)
	if err != nil {
		r.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return true
	}
	prev := r.api
	r.cfg, r.api = cfg, api
	r.mu.Unlock()
	prev.Close()
	if old == 0 {
		old = map[string]int64{"couchdb/max_document_size": couchapi.DefaultMaxDocumentBytes, "chttpd/max_http_request_size": couchapi.DefaultMaxRequestBytes}[key]
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(strconv.FormatInt(old, 10))
	return true
}

// testWriter sends the relay's log lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// relaySuite lists the CouchDB-protocol tests that run unchanged against
// the relay: the engine's adapter (endpoint, handshake, interop, faults),
// kivik, and the PouchDB 9 client. Each also runs against the server the
// environment names (express-pouchdb in CI).
var relaySuite = []struct {
	name string
	fn   func(*testing.T, couchFactory)
}{
	{"TestCouchDBInfoAndChangesPaging", testCouchDBInfoAndChangesPaging},
	{"TestCouchDBChangesSelector", testCouchDBChangesSelector},
	{"TestCouchDBChangesWait", testCouchDBChangesWait},
	{"TestCouchDBRevsDiffAndBulkGet", testCouchDBRevsDiffAndBulkGet},
	{"TestCouchDBLocalDocs", testCouchDBLocalDocs},
	{"TestCouchDBMissingDatabase", testCouchDBMissingDatabase},
	{"TestCouchDBWrongPassword", testCouchDBWrongPassword},
	{"TestCouchDBCookieAuth", testCouchDBCookieAuth},
	{"TestCouchDBTooLarge", testCouchDBTooLarge},
	{"TestCouchDBPutLocalRemembersRev", testCouchDBPutLocalRemembersRev},
	{"TestHandshakeFreshDatabaseCreatesSaltOnce", testHandshakeFreshDatabaseCreatesSaltOnce},
	{"TestHandshakeMissingDatabase", testHandshakeMissingDatabase},
	{"TestHandshakeFailedReadNeverCreatesSalt", testHandshakeFailedReadNeverCreatesSalt},
	{"TestHandshakeKeepsExistingSalt", testHandshakeKeepsExistingSalt},
	{"TestHandshakeLockedRemote", testHandshakeLockedRemote},
	{"TestHandshakeTweakMismatch", testHandshakeTweakMismatch},
	{"TestInteropVaultDumpE2EE", testInteropVaultDumpE2EE},
	{"TestChunkSourceFoundMissing", testChunkSourceFoundMissing},
	{"TestInteropPullE2EE", testInteropPullE2EE},
	{"TestInteropPullChunksOnline", testInteropPullChunksOnline},
	{"TestInteropPushE2EE", testInteropPushE2EE},
	{"TestFaultServerCutMidPull", testFaultServerCutMidPull},
	{"TestFaultWrongPassphrase", testFaultWrongPassphrase},
	{"TestFaultLockedRemote", testFaultLockedRemote},
	{"TestFaultPushTooLarge", testFaultPushTooLarge},
	{"TestKivikDocuments", testKivikDocuments},
	{"TestKivikChangesAndAllDocs", testKivikChangesAndAllDocs},
	{"TestKivikReplicationCalls", testKivikReplicationCalls},
	{"TestKivikSessions", testKivikSessions},
	{"TestPouchDBInteropE2EE", testPouchDBInteropE2EE},
	{"TestPouchDBLiveSyncRoundTrip", testPouchDBLiveSyncRoundTrip},
	{"TestPouchDBLiveReplication", testPouchDBLiveReplication},
}

// TestRelayConformance runs relaySuite against an in-process relay: the
// same tests, the same assertions as against express-pouchdb.
func TestRelayConformance(t *testing.T) {
	t.Parallel()
	srv := startRelay(t, nil).server()
	for _, tc := range relaySuite {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, srv) })
	}
}
