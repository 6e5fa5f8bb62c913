package couchapi

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The API under hostile clients (login budgets, JSON-only writes,
// session cookies, since and nesting).

// TestLimiterBudgets: a budget of failures per address and per known
// user, spent before a check, given back on success, one back per
// interval, with the wait to the next one.
func TestLimiterBudgets(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lm := newLimiter(LoginLimits{FailuresPerAddress: 3, FailuresPerUser: 5, FailureInterval: 10 * time.Second})
	for i := range 3 {
		if _, _, ok := lm.reserve("a", "alice", true, t0); !ok {
			t.Fatalf("failure %d refused within the budget of 3", i+1)
		}
	}
	if _, wait, ok := lm.reserve("a", "alice", true, t0); ok || wait != 10*time.Second {
		t.Fatalf("4th failure: ok %v, wait %s; want refused, 10s", ok, wait)
	}
	if _, wait, ok := lm.reserve("a", "alice", true, t0.Add(4*time.Second)); ok || wait != 6*time.Second {
		t.Fatalf("after 4 s: ok %v, wait %s; want refused, 6s", ok, wait)
	}
	res, _, ok := lm.reserve("a", "alice", true, t0.Add(10*time.Second))
	if !ok {
		t.Fatal("one failure is given back per interval")
	}
	lm.refund(res) // that login succeeded
	if _, _, ok := lm.reserve("a", "alice", true, t0.Add(10*time.Second)); !ok {
		t.Fatal("a successful login's reservation was not given back")
	}
	// alice's budget: 5, 3 spent at t0, one back at 10 s, one spent:
	// two more from any address, then none.
	for _, addr := range []string{"b", "c"} {
		if _, _, ok := lm.reserve(addr, "alice", true, t0.Add(10*time.Second)); !ok {
			t.Fatalf("alice's failure from %s refused within her budget", addr)
		}
		lm.failed(addr, "alice", t0.Add(10*time.Second))
	}
	if _, wait, ok := lm.reserve("b", "alice", true, t0.Add(10*time.Second)); ok || wait != 10*time.Second {
		t.Fatalf("alice past her budget, from an address that failed as her: ok %v wait %s, want refused, 10s", ok, wait)
	}
	// Past her budget, an address that did not fail as alice is still
	// checked (guessers must not lock her out), spending only
	// its own budget: e has 3.
	for i := range 3 {
		if _, _, ok := lm.reserve("e", "alice", true, t0.Add(10*time.Second)); !ok {
			t.Fatalf("alice past her budget, from a fresh address, check %d: refused", i+1)
		}
	}
	if _, _, ok := lm.reserve("e", "alice", true, t0.Add(10*time.Second)); ok {
		t.Fatal("e past its own budget")
	}
	// A refused reservation spends nothing: address d still has 3, and
	// unknown names spend only the address's budget.
	for i := range 3 {
		if _, _, ok := lm.reserve("d", "nobody", false, t0.Add(10*time.Second)); !ok {
			t.Fatalf("unknown name %d from d refused", i)
		}
	}
	if _, _, ok := lm.reserve("d", "nobody", false, t0.Add(10*time.Second)); ok {
		t.Fatal("d past its budget")
	}
	// Negative limits are off.
	off := newLimiter(LoginLimits{FailuresPerAddress: -1, FailuresPerUser: -1})
	for range 100 {
		if _, _, ok := off.reserve("a", "alice", true, t0); !ok {
			t.Fatal("a limit turned off refused")
		}
	}
}

// Guessers from several addresses who keep a user's budget empty do
// not lock the user out. After 72 wrong passwords from 6
// addresses (the user's budget of 30 spent, and one guess every 6 s
// keeping it empty), the right password is checked and accepted from a
// fresh address and from one that logged in before from a guessing
// address (it shares it), while a guesser's address gets no further
// check until the user's budget would have refilled.
func TestLoginGuessersDoNotLockOut(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lm := newLimiter(LoginLimits{})
	lm.succeeded("10.0.0.1", "admin", t0.Add(-24*time.Hour)) // a device that synced yesterday
	guessers := []string{"192.0.2.10", "192.0.2.11", "192.0.2.12", "192.0.2.13", "192.0.2.14", "192.0.2.15"}
	now := t0
	refused := 0
	for i := range 72 {
		addr := guessers[i%len(guessers)]
		if _, _, ok := lm.reserve(addr, "admin", true, now); ok {
			lm.failed(addr, "admin", now)
		} else {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("72 guesses from 6 addresses: none refused")
	}
	for _, g := range guessers {
		if _, _, ok := lm.reserve(g, "admin", true, now); ok {
			t.Fatalf("guesser %s checked again with the user's budget empty", g)
		}
	}
	// One guess every 6 s keeps the user's budget empty.
	for i := range 10 {
		now = now.Add(DefaultFailureInterval)
		if _, _, ok := lm.reserve(guessers[i%6], "admin", true, now); ok {
			lm.failed(guessers[i%6], "admin", now)
		}
	}
	for _, addr := range []string{"198.51.100.2", "10.0.0.1"} {
		res, wait, ok := lm.reserve(addr, "admin", true, now)
		if !ok {
			t.Fatalf("the right password from %s: refused (wait %s) because of other addresses' failures", addr, wait)
		}
		lm.refund(res)
		lm.succeeded(addr, "admin", now)
	}
	// A guesser's address is checked again once the user's budget would
	// have refilled: one guess per refill time, not one per interval.
	later := now.Add(DefaultFailuresPerUser * DefaultFailureInterval)
	if _, _, ok := lm.reserve(guessers[0], "admin", true, later); !ok {
		t.Fatal("a guesser's address refused after the refill time")
	}
}

func TestClientAddress(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.1:1234":             "192.0.2.1",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443": "2001:db8:1:2::/64",
		"[::ffff:192.0.2.7]:80":      "192.0.2.7",
		"not an address":             "not an address",
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = addr
		if got := clientAddress(r); got != want {
			t.Errorf("clientAddress(%q) = %q, want %q", addr, got, want)
		}
	}
}

// Wrong Basic credentials are failed logins; past the
// address's budget they are answered 429 with Retry-After without a
// check, while a password verified before still passes at once.
func TestLoginBudgetOverHTTP(t *testing.T) {
	s, c := newTestServer(t, func(cfg *Config) {
		cfg.Login = LoginLimits{FailuresPerAddress: 4, FailureInterval: time.Minute}
		cfg.Users = append(cfg.Users, User{Name: "bob", Password: "bob-secret", Databases: []string{"a"}})
	})
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.auth.now = func() time.Time { return now }
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	alice := c.as("alice", alicePass)
	alice.must(http.StatusOK, http.MethodGet, "/a", nil) // verified, cached
	guess := c.as("alice", "guess")
	for range 4 {
		wantError(t, guess.do(http.MethodGet, "/a", nil), http.StatusUnauthorized, "unauthorized")
	}
	for _, r := range []resp{
		guess.do(http.MethodGet, "/a", nil),
		c.anon().do(http.MethodPost, "/_session", map[string]string{"name": "mallory", "password": "x"}),
	} {
		wantError(t, r, http.StatusTooManyRequests, "too_many_requests")
		if ra := r.header.Get("Retry-After"); ra != "60" {
			t.Fatalf("Retry-After %q, want 60", ra)
		}
		if r.header.Get("WWW-Authenticate") != "" {
			t.Fatal("WWW-Authenticate with a 429")
		}
	}
	alice.must(http.StatusOK, http.MethodGet, "/a", nil)
	c.must(http.StatusOK, http.MethodGet, "/a", nil) // admin too (verified creating /a)
	// bob was never verified: refused like a guess until a failure is
	// given back.
	bob := c.as("bob", "bob-secret")
	wantError(t, bob.do(http.MethodGet, "/a", nil), http.StatusTooManyRequests, "too_many_requests")
	now = now.Add(time.Minute)
	bob.must(http.StatusOK, http.MethodGet, "/a", nil)
	// Another address has its own budget.
	other := c.as("admin", "wrong")
	req := httptest.NewRequest(http.MethodGet, "/a", nil)
	req.RemoteAddr = "198.51.100.9:5555"
	req.SetBasicAuth(other.user, other.pass)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("a wrong password from another address: %d, want 401", rec.Code)
	}
}

// The cache holds one password per user and checks it in constant time;
// a cached password stays cached while it is used.
func TestVerifiedCacheSlides(t *testing.T) {
	s, c := newTestServer(t, nil)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.auth.now = func() time.Time { return now }
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	acc := s.auth.users["admin"]
	if !s.auth.cached(acc, s.auth.cacheID("admin", adminPass), now) {
		t.Fatal("a verified password is not cached")
	}
	if s.auth.cached(acc, s.auth.cacheID("admin", adminPass+"x"), now) {
		t.Fatal("another password hits the cache")
	}
	for range 3 {
		now = now.Add(verifiedTTL - time.Second)
		c.must(http.StatusOK, http.MethodGet, "/a", nil)
	}
	if !s.auth.cached(acc, s.auth.cacheID("admin", adminPass), now) {
		t.Fatal("a password in use left the cache")
	}
	if s.auth.cached(acc, s.auth.cacheID("admin", adminPass), now.Add(verifiedTTL)) {
		t.Fatal("an unused password stayed cached past its TTL")
	}
}

// POST and PUT bodies must be JSON (CouchDB's 415
// bad_content_type), except the login form; nothing is stored.
func TestJSONOnlyWrites(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	for _, tc := range []struct {
		method, path, ct, body string
		status                 int
	}{
		{http.MethodPost, "/a/_bulk_docs", "text/plain", `{"docs":[{"_id":"x"}]}`, 415},
		{http.MethodPost, "/a/_bulk_docs", "application/x-www-form-urlencoded", `{"docs":[{"_id":"x"}]}`, 415},
		{http.MethodPost, "/a/_bulk_docs", "multipart/form-data; boundary=b", `{"docs":[{"_id":"x"}]}`, 415},
		{http.MethodPost, "/a/_bulk_docs", "", `{"docs":[{"_id":"x"}]}`, 415},
		{http.MethodPost, "/a/_bulk_docs", "application/json;;", `{"docs":[{"_id":"x"}]}`, 415},
		{http.MethodPost, "/a", "text/plain", `{"_id":"x"}`, 415},
		{http.MethodPut, "/a/x", "text/plain", `{}`, 415},
		{http.MethodPut, "/a/_local/x", "text/plain", `{}`, 415},
		{http.MethodPost, "/a/_revs_diff", "text/plain", `{}`, 415},
		{http.MethodPost, "/a/_bulk_get", "text/plain", `{"docs":[]}`, 415},
		{http.MethodPost, "/a/_all_docs", "text/plain", `{"keys":[]}`, 415},
		{http.MethodPost, "/a/_changes", "text/plain", `{}`, 415},
		{http.MethodPost, "/_session", "text/plain", `name=admin&password=` + adminPass, 415},
		{http.MethodPost, "/_session", "application/x-www-form-urlencoded", `name=admin&password=` + adminPass, 200},
		{http.MethodPost, "/a/_bulk_docs", "application/json; charset=utf-8", `{"docs":[{"_id":"y"}]}`, 201},
		{http.MethodPost, "/a/_ensure_full_commit", "", ``, 201}, // no body: not checked
	} {
		h := http.Header{"Content-Type": {tc.ct}}
		if tc.ct == "" {
			h = http.Header{"Content-Type": nil}
		}
		var body any
		if tc.body != "" {
			body = tc.body
		}
		r := c.with(h).do(tc.method, tc.path, body)
		if r.status != tc.status {
			t.Fatalf("%s %s as %q: %d %s, want %d", tc.method, tc.path, tc.ct, r.status, r.body, tc.status)
		}
		if tc.status == 415 {
			wantError(t, r, 415, "bad_content_type")
			if r.header.Get("Connection") != "close" {
				t.Fatalf("%s %s: a refused body's connection is kept", tc.method, tc.path)
			}
		}
	}
	c.must(http.StatusNotFound, http.MethodGet, "/a/x", nil)
	c.must(http.StatusNotFound, http.MethodGet, "/a/_local/x", nil)
}

// A request refused before its body is read closes its connection, so
// that Go's server does not wait for the body.
func TestRefusedBodyClosesConnection(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	for name, r := range map[string]resp{
		"anonymous":      c.anon().do(http.MethodPost, "/a/_bulk_docs", `{"docs":[]}`),
		"wrong password": c.as("alice", "nope").do(http.MethodPost, "/a/_bulk_docs", `{"docs":[]}`),
		"forbidden":      c.as("alice", alicePass).do(http.MethodPost, "/b/_bulk_docs", `{"docs":[]}`),
	} {
		if r.status < 400 || r.header.Get("Connection") != "close" {
			t.Fatalf("%s: %d, Connection %q; want an error and close", name, r.status, r.header.Get("Connection"))
		}
	}
	if r := c.anon().do(http.MethodGet, "/a", nil); r.header.Get("Connection") != "" {
		t.Fatal("a bodyless refusal closes the connection")
	}
}

// The session cookie is SameSite=Lax; None (with
// Secure) only for a CORS origin other than the server's own, over TLS.
func TestSessionCookieSameSite(t *testing.T) {
	s, c := newTestServer(t, nil)
	login := func(origin string, tlsOn bool) string {
		req := httptest.NewRequest(http.MethodPost, "http://relay.example/_session", strings.NewReader(`{"name":"alice","password":"`+alicePass+`"}`))
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if tlsOn {
			req.TLS = &tls.ConnectionState{}
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("login: %d %s", rec.Code, rec.Body)
		}
		return rec.Header().Get("Set-Cookie")
	}
	for _, tc := range []struct {
		origin string
		tls    bool
		want   []string
		not    []string
	}{
		{"", false, []string{"SameSite=Lax", "HttpOnly"}, []string{"Secure", "SameSite=None"}},
		{"app://obsidian.md", false, []string{"SameSite=Lax"}, []string{"Secure", "SameSite=None"}},
		{"", true, []string{"SameSite=Lax", "Secure"}, []string{"SameSite=None"}},
		{"https://relay.example", true, []string{"SameSite=Lax", "Secure"}, []string{"SameSite=None"}},
		{"https://evil.example", true, []string{"SameSite=Lax", "Secure"}, []string{"SameSite=None"}},
		{"app://obsidian.md", true, []string{"SameSite=None", "Secure"}, []string{"SameSite=Lax"}},
		{"capacitor://localhost", true, []string{"SameSite=None", "Secure"}, nil},
	} {
		got := login(tc.origin, tc.tls)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("origin %q tls %v: cookie %q lacks %s", tc.origin, tc.tls, got, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("origin %q tls %v: cookie %q has %s", tc.origin, tc.tls, got, n)
			}
		}
	}
	r := c.must(http.StatusOK, http.MethodDelete, "/_session", nil)
	if sc := r.header.Get("Set-Cookie"); !strings.Contains(sc, "SameSite=Lax") {
		t.Fatalf("logout cookie %q", sc)
	}
}

// An AuthSession cookie with added `==` padding is refused: a session
// cookie has one spelling.
func TestSessionCookieOneSpelling(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	cookie := sessionFrom(t, c.anon().must(http.StatusOK, http.MethodPost, "/_session", map[string]string{"name": "alice", "password": alicePass}))
	with := func(v string) *client { return c.anon().with(http.Header{"Cookie": {sessionCookie + "=" + v}}) }
	with(cookie).must(http.StatusOK, http.MethodGet, "/a", nil)
	for _, v := range []string{cookie + "=", cookie + "==", cookie + "%3D%3D"} {
		wantError(t, with(v).do(http.MethodGet, "/a", nil), http.StatusUnauthorized, "unauthorized")
	}
}

// since=abc is refused without internal error text in the reason, and
// since=9223372036854775807 is not echoed back as last_seq.
func TestChangesSinceHostile(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	c.putDoc("a", "d1", map[string]any{"v": 1})
	c.putDoc("a", "d2", map[string]any{"v": 2})
	for _, since := range []string{"abc", "-1", "1.5", "99999999999999999999", "2-g1AAAA"} {
		r := c.do(http.MethodGet, "/a/_changes?since="+since, nil)
		wantError(t, r, http.StatusBadRequest, "bad_request")
		if reason := str(r.json(t)["reason"]); reason != "Malformed sequence supplied in 'since' parameter." {
			t.Fatalf("since=%s: reason %q", since, reason)
		}
	}
	for _, feed := range []string{"normal", "longpoll"} {
		m := c.must(http.StatusOK, http.MethodGet, "/a/_changes?feed="+feed+"&timeout=1&since=9223372036854775807", nil).json(t)
		if m["last_seq"] != "2" || len(m["results"].([]any)) != 0 {
			t.Fatalf("feed=%s since beyond the end: %v, want no results and last_seq 2", feed, m)
		}
	}
	if m := c.must(http.StatusOK, http.MethodGet, "/a/_changes?since=1", nil).json(t); m["last_seq"] != "2" || len(m["results"].([]any)) != 1 {
		t.Fatalf("since=1: %v", m)
	}
}

// 100k-deep JSON is refused for its nesting, not with the misleading
// reason "invalid UTF-8 JSON".
func TestDeepJSONReason(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	deep := `{"docs":[{"_id":"deep","v":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}]}`
	for _, path := range []string{"/a/_bulk_docs", "/a/_all_docs"} {
		r := c.do(http.MethodPost, path, deep)
		wantError(t, r, http.StatusBadRequest, "bad_request")
		if reason := str(r.json(t)["reason"]); !strings.Contains(reason, "nested more than 10000 levels") {
			t.Fatalf("%s: reason %q", path, reason)
		}
	}
	r := c.do(http.MethodPut, "/a/deep", `{"v":`+strings.Repeat("[", 100_000)+`}`)
	if reason := str(r.json(t)["reason"]); !strings.Contains(reason, "nested") {
		t.Fatalf("PUT: reason %q", reason)
	}
	// Brackets in strings do not count; bad JSON keeps CouchDB's reason.
	if jsonDeeper([]byte(`{"a":"`+strings.Repeat("[", 20_000)+`"}`), maxJSONDepth) {
		t.Fatal("brackets inside a string counted")
	}
	r = c.do(http.MethodPost, "/a/_bulk_docs", `{"docs":[}`)
	if reason := str(r.json(t)["reason"]); reason != "invalid UTF-8 JSON" {
		t.Fatalf("bad JSON: reason %q", reason)
	}
}

// FuzzJSONDeeper: JSON that encoding/json accepts is never reported as
// too deep (its limit is maxJSONDepth), and a document nested one level
// more always is.
func FuzzJSONDeeper(f *testing.F) {
	for _, s := range []string{`{}`, `[[["a"]]]`, `{"a":"[[[\"\\"}`, `"\\\""`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if json.Valid(b) && jsonDeeper(b, maxJSONDepth) {
			t.Fatalf("valid JSON reported deeper than %d", maxJSONDepth)
		}
		deeper := append([]byte(strings.Repeat("[", maxJSONDepth+1)), b...)
		if !jsonDeeper(deeper, maxJSONDepth) {
			t.Fatal(strconv.Quote(string(deeper[:20])) + "… not reported too deep")
		}
	})
}
