package couchapi

import (
	"crypto/pbkdf2"
	"crypto/sha1"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestAuthBasic(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	c.must(http.StatusCreated, http.MethodPut, "/b", nil)
	alice := c.as("alice", alicePass)
	for _, tc := range []struct {
		name   string
		c      *client
		method string
		path   string
		status int
		err    string
	}{
		{"anonymous, db", c.anon(), http.MethodGet, "/a", 401, "unauthorized"},
		{"anonymous, _all_dbs", c.anon(), http.MethodGet, "/_all_dbs", 401, "unauthorized"},
		{"anonymous, changes", c.anon(), http.MethodGet, "/a/_changes", 401, "unauthorized"},
		{"anonymous, create", c.anon(), http.MethodPut, "/new", 401, "unauthorized"},
		{"wrong password", c.as("alice", "nope"), http.MethodGet, "/a", 401, "unauthorized"},
		{"unknown user", c.as("mallory", alicePass), http.MethodGet, "/a", 401, "unauthorized"},
		{"wrong password, public route", c.as("alice", "nope"), http.MethodGet, "/_session", 401, "unauthorized"},
		{"alice on b", alice, http.MethodGet, "/b", 403, "forbidden"},
		{"alice writes b", alice, http.MethodPut, "/b/doc", 403, "forbidden"},
		{"alice deletes b", alice, http.MethodDelete, "/b", 403, "forbidden"},
		{"alice creates c", alice, http.MethodPut, "/c", 403, "forbidden"},
		{"alice on a", alice, http.MethodGet, "/a", 200, ""},
		{"alice writes a", alice, http.MethodPut, "/a/doc", 201, ""},
		{"public welcome", c.anon(), http.MethodGet, "/", 200, ""},
		{"public _up", c.anon(), http.MethodGet, "/_up", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.method == http.MethodPut && strings.Count(tc.path, "/") == 2 {
				body = map[string]any{"v": 1}
			}
			r := tc.c.do(tc.method, tc.path, body)
			if tc.err != "" {
				wantError(t, r, tc.status, tc.err)
			} else if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			// Never a browser login dialog.
			if h := r.header.Get("WWW-Authenticate"); h != "" {
				t.Fatalf("WWW-Authenticate %q sent", h)
			}
		})
	}
	// A user may see only its databases; an admin all.
	if l := alice.must(http.StatusOK, http.MethodGet, "/_all_dbs", nil).list(t); len(l) != 1 || l[0] != "a" {
		t.Fatalf("alice's _all_dbs %v", l)
	}
	if l := c.must(http.StatusOK, http.MethodGet, "/_all_dbs", nil).list(t); len(l) != 2 {
		t.Fatalf("admin's _all_dbs %v", l)
	}
	// Other schemes are refused with a reason, not ignored.
	r := c.anon().with(http.Header{"Authorization": {"Bearer abc"}}).do(http.MethodGet, "/a", nil)
	wantError(t, r, 401, "unauthorized")
	wantError(t, c.anon().with(http.Header{"Authorization": {"Basic !!!"}}).do(http.MethodGet, "/a", nil), 401, "unauthorized")
}

func TestAuthAnonymousAccess(t *testing.T) {
	_, c := newTestServer(t, func(cfg *Config) { cfg.AllowAnonymousRead = true })
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	c.putDoc("a", "d", map[string]any{"v": 1})
	anon := c.anon()
	anon.must(http.StatusOK, http.MethodGet, "/a/d", nil)
	anon.must(http.StatusOK, http.MethodPost, "/a/_all_docs", map[string]any{"keys": []string{"d"}})
	anon.must(http.StatusOK, http.MethodPost, "/a/_changes", "{}")
	wantError(t, anon.do(http.MethodPut, "/a/e", map[string]any{"v": 1}), 401, "unauthorized")
	wantError(t, anon.do(http.MethodPut, "/a/_local/cp", map[string]any{"v": 1}), 401, "unauthorized")
	wantError(t, anon.do(http.MethodPut, "/b", nil), 401, "unauthorized")

	_, w := newTestServer(t, func(cfg *Config) { cfg.AllowAnonymousWrite = true })
	w.must(http.StatusCreated, http.MethodPut, "/a", nil)
	w.anon().must(http.StatusCreated, http.MethodPut, "/a/e", map[string]any{"v": 1})
	wantError(t, w.anon().do(http.MethodDelete, "/a", nil), 401, "unauthorized")
}

func TestAuthPasswordHashes(t *testing.T) {
	// A hash made the way CouchDB 3.5 makes it, and the legacy SHA-1 form.
	salt := "5f4dcc3b5aa765d61d8327deb882cf99"
	k256, _ := pbkdf2.Key(sha256New, "pw256", []byte(salt), 10, 32)
	k1, _ := pbkdf2.Key(sha1.New, "pw1", []byte(salt), 10, 20)
	_, c := newTestServer(t, func(cfg *Config) {
		cfg.Users = append(cfg.Users,
			User{Name: "h256", Password: "-pbkdf2:sha256-" + hex.EncodeToString(k256) + "," + salt + ",10", Admin: true},
			User{Name: "h1", Password: "-pbkdf2-" + hex.EncodeToString(k1) + "," + salt + ",10", Admin: true})
	})
	c.as("h256", "pw256").must(http.StatusOK, http.MethodGet, "/_all_dbs", nil)
	c.as("h1", "pw1").must(http.StatusOK, http.MethodGet, "/_all_dbs", nil)
	wantError(t, c.as("h256", "-pbkdf2:sha256-"+hex.EncodeToString(k256)+","+salt+",10").do(http.MethodGet, "/_all_dbs", nil), 401, "unauthorized")
	for _, bad := range []string{"-pbkdf2:md5-aa,b,1", "-pbkdf2:sha256-zz,b,1", "-pbkdf2:sha256-aa,b,0", "-pbkdf2:sha256-aa,b", "-hashed-aa,b"} {
		cfg := testConfig(NewMemoryDatabases())
		cfg.Users = []User{{Name: "x", Password: bad}}
		if err := cfg.Validate(); err == nil {
			t.Errorf("password %q accepted", bad)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	base := testConfig(NewMemoryDatabases())
	for name, mod := range map[string]func(*Config){
		"no databases":      func(c *Config) { c.Databases = nil },
		"nobody":            func(c *Config) { c.Users = nil },
		"empty name":        func(c *Config) { c.Users = []User{{Password: "x"}} },
		"colon in name":     func(c *Config) { c.Users = []User{{Name: "a:b", Password: "x"}} },
		"no password":       func(c *Config) { c.Users = []User{{Name: "a"}} },
		"twice":             func(c *Config) { c.Users = append(c.Users, c.Users[0]) },
		"bad db name":       func(c *Config) { c.Users = []User{{Name: "a", Password: "x", Databases: []string{"A"}}} },
		"bad origin":        func(c *Config) { c.CORSOrigins = []string{"obsidian.md"} },
		"origin with path":  func(c *Config) { c.CORSOrigins = []string{"http://x/y"} },
		"negative size":     func(c *Config) { c.MaxRequestBytes = -1 },
		"short secret":      func(c *Config) { c.CookieSecret = []byte("short") },
		"negative timeout":  func(c *Config) { c.CookieTimeout = -time.Second },
		"header injection":  func(c *Config) { c.WWWAuthenticate = "Basic\r\nX: y" },
		"negative changes":  func(c *Config) { c.ChangesTimeout = -1 },
		"negative doc size": func(c *Config) { c.MaxDocumentBytes = -1 },
	} {
		cfg := base
		cfg.Users = append([]User(nil), base.Users...)
		mod(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted", name)
		}
	}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestSessionCookie(t *testing.T) {
	s, c := newTestServer(t, func(cfg *Config) { cfg.CookieTimeout = 10 * time.Minute })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.auth.now = func() time.Time { return now }
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	anon := c.anon()

	// Anonymous session info.
	m := anon.must(http.StatusOK, http.MethodGet, "/_session", nil).json(t)
	if uc := m["userCtx"].(map[string]any); uc["name"] != nil {
		t.Fatalf("anonymous session %v", m)
	}
	// Wrong password: 401, no cookie.
	r := anon.do(http.MethodPost, "/_session", map[string]string{"name": "alice", "password": "nope"})
	wantError(t, r, 401, "unauthorized")
	if r.header.Get("Set-Cookie") != "" {
		t.Fatal("cookie for a failed login")
	}
	// JSON login.
	r = anon.must(http.StatusOK, http.MethodPost, "/_session", map[string]string{"name": "alice", "password": alicePass})
	if m := r.json(t); m["ok"] != true || m["name"] != "alice" {
		t.Fatalf("login %s", r.body)
	}
	cookie := sessionFrom(t, r)
	withCookie := anon.with(http.Header{"Cookie": {sessionCookie + "=" + cookie}})
	m = withCookie.must(http.StatusOK, http.MethodGet, "/_session", nil).json(t)
	if uc := m["userCtx"].(map[string]any); uc["name"] != "alice" || m["info"].(map[string]any)["authenticated"] != "cookie" {
		t.Fatalf("session %v", m)
	}
	withCookie.must(http.StatusOK, http.MethodGet, "/a", nil)
	// Early in its life the cookie is not refreshed; after a tenth it is.
	now = now.Add(30 * time.Second)
	if r := withCookie.must(http.StatusOK, http.MethodGet, "/a", nil); r.header.Get("Set-Cookie") != "" {
		t.Fatal("refreshed too early")
	}
	now = now.Add(2 * time.Minute)
	r = withCookie.must(http.StatusOK, http.MethodGet, "/a", nil)
	fresh := sessionFrom(t, r)
	// The old cookie expires 10 minutes after it was issued; the fresh one later.
	now = now.Add(8 * time.Minute)
	wantError(t, withCookie.do(http.MethodGet, "/a", nil), 401, "unauthorized")
	anon.with(http.Header{"Cookie": {sessionCookie + "=" + fresh}}).must(http.StatusOK, http.MethodGet, "/a", nil)
	// Form login; a tampered cookie is anonymous.
	form := anon.with(http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	r = form.must(http.StatusOK, http.MethodPost, "/_session", []byte(url.Values{"name": {"admin"}, "password": {adminPass}}.Encode()))
	adminCookie := sessionFrom(t, r)
	tampered := []byte(adminCookie)
	tampered[len(tampered)-2] ^= 1
	wantError(t, anon.with(http.Header{"Cookie": {sessionCookie + "=" + string(tampered)}}).do(http.MethodGet, "/a", nil), 401, "unauthorized")
	// A cookie signed for alice cannot be replayed as admin.
	forged := strings.Replace(string(mustB64Decode(t, cookie)), "alice:", "admin:", 1)
	wantError(t, anon.with(http.Header{"Cookie": {sessionCookie + "=" + b64(forged)}}).do(http.MethodGet, "/b", nil), 401, "unauthorized")
	// Logout clears the cookie.
	r = withCookie.must(http.StatusOK, http.MethodDelete, "/_session", nil)
	if sc := r.header.Get("Set-Cookie"); !strings.Contains(sc, sessionCookie+"=;") || !strings.Contains(sc, "Max-Age=0") {
		t.Fatalf("logout cookie %q", sc)
	}
	// A second server with another secret does not accept the cookies.
	_, other := newTestServer(t, nil)
	other.must(http.StatusCreated, http.MethodPut, "/a", nil)
	wantError(t, other.anon().with(http.Header{"Cookie": {sessionCookie + "=" + fresh}}).do(http.MethodGet, "/a", nil), 401, "unauthorized")
}

func TestSessionCookieSecretSurvivesRestart(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	dbs := NewMemoryDatabases()
	defer dbs.Close()
	cfg := testConfig(dbs)
	cfg.CookieSecret = secret
	s1, _ := New(cfg)
	s2, _ := New(cfg)
	c1 := &client{t: t, h: s1}
	c2 := &client{t: t, h: s2}
	cookie := sessionFrom(t, c1.must(http.StatusOK, http.MethodPost, "/_session", map[string]string{"name": "admin", "password": adminPass}))
	m := c2.with(http.Header{"Cookie": {sessionCookie + "=" + cookie}}).must(http.StatusOK, http.MethodGet, "/_session", nil).json(t)
	if m["userCtx"].(map[string]any)["name"] != "admin" {
		t.Fatalf("cookie from the first server: %v", m)
	}
}

func TestWWWAuthenticateOptIn(t *testing.T) {
	_, c := newTestServer(t, func(cfg *Config) { cfg.WWWAuthenticate = `Basic realm="couchdb"` })
	r := c.anon().do(http.MethodGet, "/_all_dbs", nil)
	if r.status != 401 || r.header.Get("WWW-Authenticate") != `Basic realm="couchdb"` {
		t.Fatalf("status %d, header %q", r.status, r.header.Get("WWW-Authenticate"))
	}
}

func TestCORS(t *testing.T) {
	_, c := newTestServer(t, nil)
	c.must(http.StatusCreated, http.MethodPut, "/a", nil)
	pre := c.anon().with(http.Header{"Origin": {"app://obsidian.md"}, "Access-Control-Request-Method": {"POST"},
		"Access-Control-Request-Headers": {"authorization, content-type"}})
	r := pre.do(http.MethodOptions, "/a/_bulk_docs", nil)
	h := r.header
	if r.status != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "app://obsidian.md" ||
		h.Get("Access-Control-Allow-Credentials") != "true" || h.Get("Access-Control-Allow-Methods") != corsMethods ||
		h.Get("Access-Control-Allow-Headers") != corsHeaders {
		t.Fatalf("preflight %d %v", r.status, h)
	}
	// A request from an allowed origin carries the CORS answer, also on errors.
	r = c.with(http.Header{"Origin": {"capacitor://localhost"}}).do(http.MethodGet, "/a", nil)
	if r.header.Get("Access-Control-Allow-Origin") != "capacitor://localhost" || r.header.Get("Access-Control-Allow-Credentials") != "true" ||
		!strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "etag") {
		t.Fatalf("CORS headers %v", r.header)
	}
	r = c.anon().with(http.Header{"Origin": {"http://localhost"}}).do(http.MethodGet, "/a", nil)
	if r.status != 401 || r.header.Get("Access-Control-Allow-Origin") != "http://localhost" {
		t.Fatalf("401 without CORS headers: %v", r.header)
	}
	// Other origins get nothing.
	r = c.anon().with(http.Header{"Origin": {"https://evil.example"}, "Access-Control-Request-Method": {"GET"}}).do(http.MethodOptions, "/a", nil)
	if r.header.Get("Access-Control-Allow-Origin") != "" || r.status == http.StatusNoContent {
		t.Fatalf("foreign origin: %d %v", r.status, r.header)
	}
	// "*" echoes the origin (credentials forbid a literal *).
	_, all := newTestServer(t, func(cfg *Config) { cfg.CORSOrigins = []string{"*"} })
	r = all.anon().with(http.Header{"Origin": {"https://x.example"}}).do(http.MethodGet, "/", nil)
	if r.header.Get("Access-Control-Allow-Origin") != "https://x.example" {
		t.Fatalf("* origin: %v", r.header)
	}
	// Without origins, no CORS at all.
	_, none := newTestServer(t, func(cfg *Config) { cfg.CORSOrigins = nil })
	if r := none.with(http.Header{"Origin": {"app://obsidian.md"}}).do(http.MethodGet, "/", nil); r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatal("CORS headers without configured origins")
	}
}
