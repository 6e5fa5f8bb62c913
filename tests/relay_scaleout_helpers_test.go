package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// The helpers of the scale-out tests: several livesync-relay processes
// whose database "vault" is one database on the CouchDB-protocol test
// server ([databases.store] kind = "couchdb"), with no data folder of
// their own, coordinated through that database (the shared hold-back and
// the hunt's lease).

// soTTL and soRefresh are the relays' lease TTL and refresh period: short,
// so that a takeover and an adoption happen within seconds.
const (
	soTTL     = 2 * time.Second
	soRefresh = 300 * time.Millisecond
)

// soRelay is one running relay of a scale-out test.
type soRelay struct {
	name     string
	p        *relayProcess
	url      string
	password string      // the admin's
	db       *couchdb.DB // a client of "vault" through this relay, as the admin
	wd       string      // its working folder (read-only while it runs)
}

// soSetup says how the relays of a test are configured.
type soSetup struct {
	couchURL string // the server as the relays reach it; "" means the test server
	database string // the database on that server
	// global is TOML before [[databases]] ([purgatory], [hunt], ...).
	global string
	// upstreams is TOML after the database's store table (its
	// [[databases.upstreams]]).
	upstreams string
	env       []string // more environment (the upstreams' secrets)
}

// soConfig is the relay's configuration file for s: an admin from
// [[users]], no data_dir, and "vault" stored in s.database on the
// server.
func soConfig(e couchEnv, s soSetup) string {
	couchURL := s.couchURL
	if couchURL == "" {
		couchURL = e.url
	}
	return fmt.Sprintf("[[users]]\nname = \"admin\"\npassword_env = \"LSGO_SO_ADMIN\"\nadmin = true\n\n%s\n\n"+
		"[[databases]]\nname = \"vault\"\npassphrase_env = \"LSGO_SO_PASSPHRASE\"\n\n"+
		"[databases.store]\nkind = \"couchdb\"\nurl = %q\ndatabase = %q\nuser = %q\npassword_env = \"LSGO_SO_COUCH\"\n"+
		"lease_ttl = %q\nrefresh = %q\n\n%s",
		s.global, couchURL, s.database, e.user, soTTL.String(), soRefresh.String(), s.upstreams)
}

// soStart starts one relay named name for s. Its working folder holds only
// the configuration and is read-only while it runs: a relay whose every
// database is on CouchDB keeps nothing local. The cleanup stops it with
// SIGTERM (it releases the lease) and checks that it wrote no file.
func soStart(t *testing.T, bin, name string, s soSetup) *soRelay {
	t.Helper()
	e := couchServer(t)
	wd := t.TempDir()
	conf := filepath.Join(wd, "relay.toml")
	if err := os.WriteFile(conf, []byte(soConfig(e, s)), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(wd, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(wd, 0o755) })
	r := &soRelay{name: name, password: hexToken(t), wd: wd}
	env := append([]string{"LSGO_SO_ADMIN=" + r.password, "LSGO_SO_PASSPHRASE=" + upPassphrase, "LSGO_SO_COUCH=" + e.password}, s.env...)
	r.p = startRelayOpts(t, bin, wd, relayStart{env: env, args: []string{"--config", conf, "--listen", "127.0.0.1:0"}, maxLine: 1 << 20, graceful: true})
	r.url = r.p.url
	t.Cleanup(func() {
		if ents, _ := os.ReadDir(wd); len(ents) != 1 {
			t.Errorf("relay %s wrote into its working folder: %v", name, ents)
		}
	})
	db, err := couchdb.New(couchdb.Config{URL: r.url, Database: "vault", User: "admin", Password: r.password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r.db = db
	return r
}

// soStartAll starts one relay per name for s.
func soStartAll(t *testing.T, bin string, s soSetup, names ...string) []*soRelay {
	t.Helper()
	var rs []*soRelay
	start := time.Now()
	for _, n := range names {
		rs = append(rs, soStart(t, bin, n, s))
	}
	t.Logf("%d relays started in %v", len(rs), time.Since(start).Round(time.Millisecond))
	return rs
}

// soVault creates a fresh database on the test server and runs a LiveSync
// handshake on it directly (the vault's salt and milestone, as a vault
// that already lives on CouchDB has them). It returns a client of the
// database on the server and the vault's codec.
func soVault(t *testing.T) (*couchdb.DB, *livesync.Codec) {
	t.Helper()
	db := freshDB(t, couchServer, nil)
	return db, soHandshake(t, db, "scaleout-setup")
}

// soVaultLike is soVault with the salt of src: a second database of the
// same vault (an upstream whose documents cross unchanged).
func soVaultLike(t *testing.T, src *couchdb.DB) (*couchdb.DB, *livesync.Codec) {
	t.Helper()
	db := freshDB(t, couchServer, nil)
	raw, _, err := src.Read(ctxT(t), negotiate.RecordSyncParameters)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Write(ctxT(t), negotiate.RecordSyncParameters, raw, ""); err != nil {
		t.Fatal(err)
	}
	return db, soHandshake(t, db, "scaleout-setup")
}

// soHandshake runs the LiveSync handshake on db as node and returns the
// vault's codec.
func soHandshake(t *testing.T, db *couchdb.DB, node string) *livesync.Codec {
	t.Helper()
	salt, _, err := db.Handshake(ctxT(t), couchdb.HandshakeOptions{NodeID: node, Settings: upSettings.TweakValues()})
	if err != nil {
		t.Fatalf("handshake as %s: %v", node, err)
	}
	codec, err := livesync.New(livesync.Config{Settings: upSettings, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	return codec
}

// soNote is a LiveSync note in the remote form: metadata and chunks with
// their first revisions.
type soNote struct {
	id, rev, text string
	meta          json.RawMessage
	chunks        []json.RawMessage
	chunkIDs      []string
}

func soMakeNote(t *testing.T, codec *livesync.Codec, path, text string) soNote {
	t.Helper()
	meta, chunks, m, _ := upRemoteNote(t, codec, path, text)
	return soNote{id: m.ID, rev: m.Rev, text: text, meta: meta, chunks: chunks, chunkIDs: m.Children}
}

// soHTTP sends a request with basic auth and returns the status and body;
// code 0 means no answer (err says why).
func soHTTP(method, rawURL, user, password string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// soSide is a place a test reads the vault from: a relay's "vault" or the
// database on the server.
type soSide struct {
	name, base, user, password string // base: the database's URL
}

func (r *soRelay) side() soSide {
	return soSide{name: "relay " + r.name, base: r.url + "/vault", user: "admin", password: r.password}
}

func soServerSide(t *testing.T, db *couchdb.DB) soSide {
	e := couchServer(t)
	return soSide{name: "the server", base: e.url + "/" + db.Name(), user: e.user, password: e.password}
}

// get reads path under the database (path starts with "/" or "?"; "" is
// the database itself).
func (s soSide) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	code, b, err := soHTTP("GET", s.base+path, s.user, s.password, nil)
	if err != nil {
		t.Fatalf("GET %s%s: %v", s.name, path, err)
	}
	return code, b
}

// getOK is get that wants 200 and decodes the body into v.
func (s soSide) getOK(t *testing.T, path string, v any) {
	t.Helper()
	code, b := s.get(t, path)
	if code != 200 {
		t.Fatalf("GET %s %s: %d %s", s.name, path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s %s: %v: %s", s.name, path, err, b)
	}
}

// allDocs returns _all_docs as id → winning revision.
func (s soSide) allDocs(t *testing.T) map[string]string {
	t.Helper()
	var a struct {
		Rows []struct {
			ID    string `json:"id"`
			Value struct {
				Rev string `json:"rev"`
			} `json:"value"`
		} `json:"rows"`
	}
	s.getOK(t, "/_all_docs", &a)
	out := map[string]string{}
	for _, r := range a.Rows {
		out[r.ID] = r.Value.Rev
	}
	return out
}

// changes returns the whole _changes feed (style=all_docs) as id → its
// leaf revisions, sorted, with "deleted" appended for a deleted one.
func (s soSide) changes(t *testing.T) map[string]string {
	t.Helper()
	var c struct {
		Results []struct {
			ID      string `json:"id"`
			Deleted bool   `json:"deleted"`
			Changes []struct {
				Rev string `json:"rev"`
			} `json:"changes"`
		} `json:"results"`
	}
	s.getOK(t, "/_changes?style=all_docs", &c)
	out := map[string]string{}
	for _, r := range c.Results {
		var revs []string
		for _, ch := range r.Changes {
			revs = append(revs, ch.Rev)
		}
		sort.Strings(revs)
		if r.Deleted {
			revs = append(revs, "deleted")
		}
		out[r.ID] = strings.Join(revs, ",")
	}
	return out
}

// docCode is the status of GET on one document.
func (s soSide) docCode(t *testing.T, id string) int {
	t.Helper()
	code, _ := s.get(t, "/"+url.PathEscape(id))
	return code
}

// soHidden checks that the note id is nowhere on the sides: 404 on GET,
// absent from _all_docs and _changes.
func soHidden(t *testing.T, id string, sides ...soSide) {
	t.Helper()
	for _, s := range sides {
		if code := s.docCode(t, id); code != 404 {
			t.Errorf("%s: GET of the held note: %d, want 404", s.name, code)
		}
		if _, ok := s.allDocs(t)[id]; ok {
			t.Errorf("%s: the held note is in _all_docs", s.name)
		}
		if _, ok := s.changes(t)[id]; ok {
			t.Errorf("%s: the held note is in _changes", s.name)
		}
	}
}

// soWaitVisible polls (every 50 ms, until timeout) until every side
// serves every note at its revision; it returns how long that took.
func soWaitVisible(t *testing.T, timeout time.Duration, notes []soNote, sides ...soSide) time.Duration {
	t.Helper()
	start := time.Now()
	for _, s := range sides {
		for _, n := range notes {
			var last string
			for {
				code, b := s.get(t, "/"+url.PathEscape(n.id))
				var head struct {
					Rev string `json:"_rev"`
				}
				json.Unmarshal(b, &head)
				if code == 200 && head.Rev == n.rev {
					break
				}
				last = fmt.Sprintf("%d %.200s", code, b)
				if time.Since(start) > timeout {
					t.Fatalf("%s: %s not served at %s within %v: %s", s.name, n.id, n.rev, timeout, last)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	return time.Since(start)
}

// soPush writes docs through db (new_edits=false) and wants all accepted.
func soPush(t *testing.T, db *couchdb.DB, docs ...json.RawMessage) {
	t.Helper()
	upPush(t, db, docs)
}

// soStatus is the part of a relay's /status these tests read.
type soStatus struct {
	Databases []soDBStatus `json:"databases"`
}

type soDBStatus struct {
	Name   string `json:"name"`
	Store  string `json:"store"`
	Shared *struct {
		Leader     bool       `json:"leader"`
		Holder     string     `json:"holder"`
		LeaseUntil *time.Time `json:"lease_until"`
		Takeovers  uint64     `json:"takeovers"`
		Refreshes  uint64     `json:"refreshes"`
		Arrivals   uint64     `json:"arrivals"`
		LastError  string     `json:"last_error"`
	} `json:"shared"`
	Held []struct {
		Doc string `json:"doc"`
	} `json:"held"`
	Holdback struct {
		Holds    uint64 `json:"holds"`
		Released uint64 `json:"released"`
	} `json:"holdback"`
	Purgatory struct {
		Releases uint64 `json:"releases"`
	} `json:"purgatory"`
	Upstreams []upUpstream `json:"upstreams"`
}

// status reads the relay's /status for "vault"; ok false (and the body in
// raw) when it did not answer 200 with it.
func (r *soRelay) status() (s soDBStatus, raw string, ok bool) {
	code, b, err := soHTTP("GET", r.url+"/status", "admin", r.password, nil)
	if err != nil || code != 200 {
		return s, fmt.Sprintf("%d %s %v", code, b, err), false
	}
	var all soStatus
	if err := json.Unmarshal(b, &all); err != nil {
		return s, string(b), false
	}
	for _, d := range all.Databases {
		if d.Name == "vault" {
			return d, string(b), true
		}
	}
	return s, string(b), false
}

// mustStatus is status that fails the test when /status does not answer.
func (r *soRelay) mustStatus(t *testing.T) soDBStatus {
	t.Helper()
	s, raw, ok := r.status()
	if !ok {
		t.Fatalf("relay %s: /status: %s", r.name, raw)
	}
	return s
}

// soFirstLeader polls the relays' /status (every 50 ms, until timeout)
// until one of them says it is the leader, and returns it.
func soFirstLeader(t *testing.T, timeout time.Duration, rs ...*soRelay) *soRelay {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var seen []string
		for _, r := range rs {
			s, raw, ok := r.status()
			if ok && s.Shared != nil && s.Shared.Leader {
				return r
			}
			seen = append(seen, fmt.Sprintf("%s: %.300s", r.name, raw))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader within %v:\n%s", timeout, strings.Join(seen, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// soTCPProxy forwards TCP connections to a server. stop closes its port
// (connections are refused) and cuts the open connections; start listens
// again on the same port: the server went away and came back.
type soTCPProxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
}

func newSoTCPProxy(t *testing.T, target string) *soTCPProxy {
	t.Helper()
	p := &soTCPProxy{addr: "127.0.0.1:0", target: target, conns: map[net.Conn]bool{}}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	p.addr = p.ln.Addr().String()
	t.Cleanup(p.stop)
	return p
}

func (p *soTCPProxy) url() string { return "http://" + p.addr }

// start listens on the proxy's address (retrying for a few seconds while
// the port is still taken) and forwards what it accepts.
func (p *soTCPProxy) start() error {
	var ln net.Listener
	var err error
	for range 100 {
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go p.serve(ln)
	return nil
}

func (p *soTCPProxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.ln != ln { // stopped meanwhile
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns[c], p.conns[s] = true, true
		p.mu.Unlock()
		go func() { io.Copy(s, c); s.Close() }()
		go func() { io.Copy(c, s); c.Close() }()
	}
}

func (p *soTCPProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// soHuntLog is an HTTP proxy in front of an upstream CouchDB-protocol
// server that records the hunt's chunk requests (POST …/_all_docs): when
// each arrived and how many were in flight at once, across every relay
// that asks it.
type soHuntLog struct {
	mu          sync.Mutex
	arrivals    []time.Time
	inFlight    int
	maxInFlight int
	arrived     chan int // receives the count after each arrival
}

func newSoHuntLog(t *testing.T, target string) (*soHuntLog, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	l := &soHuntLog{arrived: make(chan int, 1000)}
	// The requests of a killed relay end in errors: not logged.
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = u.Host },
		ErrorLog: log.New(io.Discard, "", 0)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/_all_docs") {
			l.mu.Lock()
			l.arrivals = append(l.arrivals, time.Now())
			l.inFlight++
			l.maxInFlight = max(l.maxInFlight, l.inFlight)
			n := len(l.arrivals)
			l.mu.Unlock()
			select {
			case l.arrived <- n:
			default:
			}
			defer func() { l.mu.Lock(); l.inFlight--; l.mu.Unlock() }()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return l, srv.URL
}

// snapshot returns the arrivals so far and the most in flight at once.
func (l *soHuntLog) snapshot() ([]time.Time, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.arrivals), l.maxInFlight
}

// soMaxInWindow is the most arrivals within any span shorter than window
// by slack (requests start at the relay a little before they arrive).
func soMaxInWindow(arrivals []time.Time, window, slack time.Duration) (most int, at time.Time) {
	span := window - slack
	j := 0
	for i, a := range arrivals {
		for arrivals[j].Add(span).Before(a) || arrivals[j].Add(span).Equal(a) {
			j++
		}
		if n := i - j + 1; n > most {
			most, at = n, arrivals[j]
		}
	}
	return most, at
}
