package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi/couchdir"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// readOnlyDir is an empty folder the relay may not write to (mode 0555;
// root may write anyway, so the tests also check it stays empty).
func readOnlyDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(d, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(d, 0o700) })
	return d
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the relay wrote to %s: %v", dir, names)
	}
}

// writeConfig writes a configuration file in a folder of its own.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "relay.toml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeCouchServers makes the relays of a test share one couchServer
// (memory databases) instead of a CouchDB server.
func fakeCouchServers(t *testing.T) *memCouch {
	t.Helper()
	srv := &memCouch{MemoryDatabases: couchapi.NewMemoryDatabases(), uuid: "0123456789abcdef0123456789abcdef"}
	prev := openCouchServer
	openCouchServer = func(_ context.Context, cfg couchdir.Config) (couchServer, error) {
		if cfg.Server.Password != "couch-secret" || cfg.Names["vault"] != "shared-vault" {
			return nil, fmt.Errorf("unexpected server configuration: user %q, names %v", cfg.Server.User, cfg.Names)
		}
		return srv, nil
	}
	t.Cleanup(func() { openCouchServer = prev })
	return srv
}

// noDataConfig keeps "vault" on a CouchDB server, with short
// coordination periods.
const noDataConfig = `
[[databases]]
name = "vault"
[databases.store]
kind = "couchdb"
url = "http://couch.invalid:5984"
database = "shared-vault"
user = "admin"
password_env = "COUCH_PW"
lease_ttl = "2s"
refresh = "200ms"
`

// startNoData starts a relay of noDataConfig with its data_dir on dir.
func startNoData(t *testing.T, cfg, dir string) *running {
	t.Helper()
	rn := start(t, []string{"--config", cfg, "--data-dir", dir}, map[string]string{"COUCH_PW": "couch-secret", envAdminPassword: "relay-admin"})
	rn.user, rn.pass = defaultAdminName, "relay-admin"
	return rn
}

// TestRelayWithoutDataFolder: with every database on CouchDB the relay
// writes nothing locally (a read-only data_dir stays empty), takes its
// uuid from the server, serves only its configured database, and two
// relays over the same database elect one leader, which /status and
// /metrics show.
func TestRelayWithoutDataFolder(t *testing.T) {
	fakeCouchServers(t)
	dir := readOnlyDir(t)
	cfg := writeConfig(t, noDataConfig)
	a := startNoData(t, cfg, dir)
	b := startNoData(t, cfg, dir)

	var root struct {
		UUID string `json:"uuid"`
	}
	json.Unmarshal(a.admin("GET", "/", nil, 200), &root)
	if root.UUID != "0123456789abcdef0123456789abcdef" {
		t.Errorf("uuid %q, want the CouchDB server's", root.UUID)
	}
	a.admin("PUT", "/vault/doc1", map[string]string{"text": "hello"}, 201)
	if got := b.admin("GET", "/vault/doc1", nil, 200); !strings.Contains(string(got), "hello") {
		t.Errorf("relay b: %s", got)
	}
	code, body := a.do("PUT", "/other", a.user, a.pass, nil)
	if code != 403 || !strings.Contains(string(body), "serves only the databases of its configuration") {
		t.Errorf("creating an unconfigured database: %d %s", code, body)
	}

	leader, follower := waitLeader(t, a, b)
	ls, fs := leader.status().db(t, "vault"), follower.status().db(t, "vault")
	if ls.Store != storeCouch || ls.StoreLocation != "http://couch.invalid:5984/shared-vault" || ls.StoreBytes != 0 {
		t.Errorf("leader's store: %q %q %d", ls.Store, ls.StoreLocation, ls.StoreBytes)
	}
	if ls.Shared.Holder == "" || ls.Shared.Self != ls.Shared.Holder || fs.Shared.Holder != ls.Shared.Holder || fs.Shared.Self == ls.Shared.Self || ls.Shared.LeaseUntil == nil || ls.Shared.Takeovers < 1 || fs.Shared.Takeovers != 0 {
		t.Errorf("leader %+v, follower %+v", *ls.Shared, *fs.Shared)
	}
	metrics := string(leader.admin("GET", "/metrics", nil, 200))
	for _, want := range []string{`livesync_relay_lease_leader{db="vault"} 1`, `livesync_relay_lease_takeovers_total{db="vault"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("leader's /metrics lacks %s", want)
		}
	}
	if m := string(follower.admin("GET", "/metrics", nil, 200)); !strings.Contains(m, `livesync_relay_lease_leader{db="vault"} 0`) {
		t.Error("follower's /metrics lacks livesync_relay_lease_leader 0")
	}

	// The leader stops (and releases the lease): the follower takes it
	// at its next lease attempt.
	stopped := time.Now()
	leader.stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := follower.status().db(t, "vault")
		if s.Shared.Leader && s.Shared.Takeovers == 1 {
			t.Logf("the follower led %v after the leader's stop began", time.Since(stopped).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower did not take over: %+v", *s.Shared)
		}
		time.Sleep(50 * time.Millisecond)
	}
	follower.stop()
	assertEmpty(t, dir)
}

// waitLeader waits until exactly one of a and b leads "vault" and the
// other names it as the holder.
func waitLeader(t *testing.T, a, b *running) (leader, follower *running) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sa, sb := a.status().db(t, "vault"), b.status().db(t, "vault")
		if sa.Shared == nil || sb.Shared == nil {
			t.Fatalf("no shared status: %+v %+v", sa, sb)
		}
		switch {
		case sa.Shared.Leader && !sb.Shared.Leader && sb.Shared.Holder == sa.Shared.Holder:
			return a, b
		case sb.Shared.Leader && !sa.Shared.Leader && sa.Shared.Holder == sb.Shared.Holder:
			return b, a
		}
		if time.Now().After(deadline) {
			t.Fatalf("no single leader: a %+v, b %+v", *sa.Shared, *sb.Shared)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Without a data folder a generated admin password could not be kept:
// the relay refuses to start without an admin from the configuration or
// the environment, before it connects anywhere.
func TestRelayWithoutDataFolderNeedsAdmin(t *testing.T) {
	fakeCouchServers(t)
	dir := readOnlyDir(t)
	cfg := writeConfig(t, noDataConfig)
	rn, code := launch(t, []string{"--config", cfg, "--data-dir", dir}, map[string]string{"COUCH_PW": "couch-secret"})
	if rn != nil || code != exitUsage {
		t.Fatalf("started without an admin (exit %d)", code)
	}
	// With an admin in [[users]] it starts.
	cfg = writeConfig(t, noDataConfig+"\n[[users]]\nname = \"boss\"\npassword_env = \"BOSS_PW\"\nadmin = true\n")
	rn = start(t, []string{"--config", cfg, "--data-dir", dir}, map[string]string{"COUCH_PW": "couch-secret", "BOSS_PW": "pw"})
	rn.user, rn.pass = "boss", "pw"
	if s := rn.status().db(t, "vault"); s.Store != storeCouch {
		t.Errorf("store %q", s.Store)
	}
	rn.stop()
	assertEmpty(t, dir)
}

// envCouchServer is the CouchDB-protocol test server the environment
// names (tests/run.sh and /tmp-style wrappers start tests/couchserver).
// Without one the test fails under CI and skips otherwise.
func envCouchServer(t *testing.T) (url, user, password string) {
	t.Helper()
	url = os.Getenv("LIVESYNC_TEST_COUCHDB_URL")
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("LIVESYNC_TEST_COUCHDB_URL is not set but CI is: the relay's CouchDB store tests must run in CI")
		}
		t.Skip("LIVESYNC_TEST_COUCHDB_URL not set; run tests/run.sh")
	}
	return strings.TrimSuffix(url, "/"), os.Getenv("LIVESYNC_TEST_COUCHDB_USER"), os.Getenv("LIVESYNC_TEST_COUCHDB_PASSWORD")
}

// couchCall sends one request to the CouchDB server itself.
func couchCall(t *testing.T, method, url, user, password string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// tcpProxy forwards connections on addr to target; stop closes the
// listener and every connection, as a CouchDB that went away.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, addr, target string) *tcpProxy {
	t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port was just free; a closing socket may hold it for a moment
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.pipe(c) })
		}
	})
	t.Cleanup(p.stop)
	return p
}

func (p *tcpProxy) track(c net.Conn, on bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on && p.conns == nil {
		return false
	}
	if on {
		p.conns[c] = true
	} else if p.conns != nil {
		delete(p.conns, c)
	}
	return true
}

func (p *tcpProxy) pipe(c net.Conn) {
	defer c.Close()
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer u.Close()
	if !p.track(c, true) || !p.track(u, true) {
		return
	}
	defer p.track(c, false)
	defer p.track(u, false)
	done := make(chan struct{}, 2)
	go func() { io.Copy(u, c); done <- struct{}{} }()
	go func() { io.Copy(c, u); done <- struct{}{} }()
	<-done
}

func (p *tcpProxy) stop() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// freePort returns a loopback address nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestRelayCouchDBStore runs a relay whose database is kept on the
// CouchDB-protocol test server, reached through a proxy the test stops
// and starts: the relay starts before CouchDB answers (it waits, saying
// so), writes nothing locally, has the server's uuid, stores documents
// in the CouchDB database, answers 503 while CouchDB is away (while
// /healthz stays 200) and recovers when it is back.
func TestRelayCouchDBStore(t *testing.T) {
	couchURL, user, password := envCouchServer(t)
	target := strings.TrimPrefix(strings.TrimPrefix(couchURL, "http://"), "https://")
	db := "lsgo-relay-" + strings.ToLower(rand.Text()[:10])
	t.Cleanup(func() { couchCall(t, "DELETE", couchURL+"/"+db, user, password) })
	addr := freePort(t)
	dir := readOnlyDir(t)
	cfg := writeConfig(t, fmt.Sprintf("[[databases]]\nname = \"vault\"\n[databases.store]\nkind = \"couchdb\"\nurl = \"http://%s/%s\"\n"+
		"user = %q\npassword_env = \"COUCH_PW\"\nlease_ttl = \"2s\"\nrefresh = \"200ms\"\n", addr, db, user))

	ctx, cancel := context.WithCancel(context.Background())
	rn := &running{t: t, out: &syncBuffer{}, cancel: cancel, done: make(chan int, 1), user: defaultAdminName, pass: "relay-admin"}
	ready := make(chan *relay, 1)
	env := map[string]string{"COUCH_PW": password, envAdminPassword: "relay-admin"}
	go func() {
		rn.done <- run(ctx, []string{"--listen", "127.0.0.1:0", "--config", cfg, "--data-dir", dir}, envOf(env), rn.out, func(r *relay) { ready <- r })
	}()
	t.Cleanup(func() { rn.stop() })
	waitFor(t, 15*time.Second, "the relay to say CouchDB cannot be reached", func() bool {
		return strings.Contains(rn.out.String(), "CouchDB cannot be reached")
	})
	proxy := startProxy(t, addr, target)
	back := time.Now()
	select {
	case r := <-ready:
		rn.r, rn.url = r, r.url
		t.Logf("the relay served %v after CouchDB answered", time.Since(back).Round(time.Millisecond))
	case code := <-rn.done:
		t.Fatalf("the relay exited with %d:\n%s", code, rn.out)
	case <-time.After(60 * time.Second):
		t.Fatalf("the relay did not start once CouchDB answered:\n%s", rn.out)
	}

	var relayRoot, couchRoot struct {
		UUID string `json:"uuid"`
	}
	json.Unmarshal(rn.admin("GET", "/", nil, 200), &relayRoot)
	_, b := couchCall(t, "GET", couchURL+"/", user, password)
	json.Unmarshal(b, &couchRoot)
	if relayRoot.UUID == "" || relayRoot.UUID != couchRoot.UUID {
		t.Errorf("relay uuid %q, CouchDB server's %q", relayRoot.UUID, couchRoot.UUID)
	}
	rn.admin("PUT", "/vault/doc1", map[string]string{"text": "kept on CouchDB"}, 201)
	if code, b := couchCall(t, "GET", couchURL+"/"+db+"/doc1", user, password); code != 200 || !strings.Contains(string(b), "kept on CouchDB") {
		t.Errorf("the document on the CouchDB server: %d %s", code, b)
	}
	if code, b := rn.do("DELETE", "/vault", rn.user, rn.pass, nil); code != 403 || !strings.Contains(string(b), "delete it on the CouchDB server") {
		t.Errorf("deleting a database kept on CouchDB: %d %s", code, b)
	}
	if s := rn.status().db(t, "vault"); s.Store != storeCouch || s.Shared == nil || !strings.HasSuffix(s.StoreLocation, "/"+db) {
		t.Errorf("/status: store %q at %q, shared %v", s.Store, s.StoreLocation, s.Shared)
	}

	proxy.stop()
	gone := time.Now()
	waitFor(t, 15*time.Second, "503 while CouchDB is away", func() bool {
		code, _ := rn.do("GET", "/vault/doc1", rn.user, rn.pass, nil)
		return code == 503
	})
	t.Logf("503 %v after CouchDB went away", time.Since(gone).Round(time.Millisecond))
	if code, _ := rn.do("PUT", "/vault/doc2", rn.user, rn.pass, map[string]string{"text": "x"}); code != 503 {
		t.Errorf("a write while CouchDB is away: %d, want 503", code)
	}
	if code, _ := rn.do("GET", "/healthz", "", "", nil); code != 200 {
		t.Errorf("/healthz while CouchDB is away: %d, want 200 (the process serves)", code)
	}
	waitFor(t, 15*time.Second, "/status to show the outage in shared.last_error", func() bool {
		s := rn.status().db(t, "vault")
		return s.Shared != nil && s.Shared.LastError != "" && s.Shared.LastErrorAt != nil
	})
	startProxy(t, addr, target)
	back = time.Now()
	waitFor(t, 15*time.Second, "recovery once CouchDB is back", func() bool {
		code, _ := rn.do("GET", "/vault/doc1", rn.user, rn.pass, nil)
		return code == 200
	})
	t.Logf("200 again %v after CouchDB came back", time.Since(back).Round(time.Millisecond))
	rn.admin("PUT", "/vault/doc2", map[string]string{"text": "after"}, 201)
	if code := rn.stop(); code != exitOK {
		t.Errorf("exit %d:\n%s", code, rn.out)
	}
	assertEmpty(t, dir)

	// Wrong credentials are no outage: the relay stops at once and says
	// what to check.
	rn2, code := launch(t, []string{"--config", cfg, "--data-dir", dir}, map[string]string{"COUCH_PW": "wrong", envAdminPassword: "x"})
	if rn2 != nil || code != exitFailure {
		t.Fatalf("started with a wrong CouchDB password (exit %d)", code)
	}
}

// waitFor polls cond every 50 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// At start the relay waits for a CouchDB server it cannot reach (logging
// each attempt) and serves once it answers; a refusal of the credentials
// is no outage and stops the start at once, saying what to check.
func TestRelayWaitsForCouchDBAtStart(t *testing.T) {
	fakeCouchServers(t)
	fake := openCouchServer
	var mu sync.Mutex
	attempts := 0
	openCouchServer = func(ctx context.Context, cfg couchdir.Config) (couchServer, error) {
		mu.Lock()
		attempts++
		n := attempts
		mu.Unlock()
		if n == 1 {
			return nil, fmt.Errorf("GET http://couch.invalid:5984/: %w", store.ErrUnavailable)
		}
		return fake(ctx, cfg)
	}
	dir := readOnlyDir(t)
	rn := startNoData(t, writeConfig(t, noDataConfig), dir)
	if !strings.Contains(rn.out.String(), "CouchDB cannot be reached") || attempts != 2 {
		t.Errorf("%d attempts; output:\n%s", attempts, rn.out)
	}
	rn.admin("PUT", "/vault/doc", map[string]string{"a": "b"}, 201)
	rn.stop()

	openCouchServer = func(context.Context, couchdir.Config) (couchServer, error) {
		return nil, &engine.Error{Op: "GET /", Stage: engine.StageAuth, Err: errors.New("couchdb: HTTP 401 unauthorized")}
	}
	var out bytes.Buffer
	code := run(context.Background(), []string{"--listen", "127.0.0.1:0", "--config", writeConfig(t, noDataConfig), "--data-dir", dir},
		envOf(map[string]string{"COUCH_PW": "couch-secret", envAdminPassword: "x"}), &out, nil)
	if code != exitFailure || !strings.Contains(out.String(), `check user "admin" and its password`) || strings.Contains(out.String(), "couch-secret") {
		t.Errorf("wrong credentials: exit %d, %s", code, out.String())
	}
	assertEmpty(t, dir)
}

// A configuration may mix stores: the bbolt databases stay in the data
// folder (and clients may create more there), the CouchDB ones are
// shared, and /status tells them apart.
func TestRelayMixedStores(t *testing.T) {
	fakeCouchServers(t)
	dir := filepath.Join(t.TempDir(), "data")
	cfg := writeConfig(t, noDataConfig+"\n[[databases]]\nname = \"local\"\n")
	rn := startNoData(t, cfg, dir)
	rn.admin("PUT", "/local/doc", map[string]string{"a": "b"}, 201)
	rn.admin("PUT", "/vault/doc", map[string]string{"a": "b"}, 201)
	rn.admin("PUT", "/created", nil, 201)
	st := rn.status()
	if l, v := st.db(t, "local"), st.db(t, "vault"); l.Store != storeBolt || l.Shared != nil || l.StoreBytes == 0 || v.Store != storeCouch || v.Shared == nil {
		t.Errorf("local: %q shared %v, %d bytes; vault: %q shared %v", l.Store, l.Shared, l.StoreBytes, v.Store, v.Shared)
	}
	for _, f := range []string{"local.db", "created.db", "server.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the data folder lacks %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "vault.db")); err == nil {
		t.Error("the CouchDB database has a bbolt file too")
	}
}
