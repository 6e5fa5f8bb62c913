package tests

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine"
)

// httpDo sends a request to the relay and returns status, headers and body.
func httpDo(t *testing.T, method, u string, body io.Reader, header http.Header) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func basic(user, pass string) http.Header {
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.SetBasicAuth(user, pass)
	return http.Header{"Authorization": req.Header["Authorization"]}
}

func wantAuthStage(t *testing.T, what string, err error) {
	t.Helper()
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Stage != engine.StageAuth {
		t.Fatalf("%s: %v, want an auth-stage error", what, err)
	}
}

// TestRelaySecurity: who may do what on the relay, over real HTTP, with
// the engine's adapter as the client: wrong passwords and anonymous
// requests are 401 (never with a WWW-Authenticate header), a user limited
// to one database gets 403 on another, and sessions work.
func TestRelaySecurity(t *testing.T) {
	r := startRelay(t, func(c *couchapi.Config) {
		c.Users = append(c.Users,
			couchapi.User{Name: "alice", Password: "alice pass", Databases: []string{"vault-a"}},
			couchapi.User{Name: "bob", Password: "bob pass", Databases: []string{"vault-b"}})
	})
	ctx := ctxT(t)
	open := func(name, user, pass string, auth couchdb.Auth) *couchdb.DB {
		db, err := couchdb.New(couchdb.Config{URL: r.env.url, Database: name, User: user, Password: pass, Auth: auth})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	// Users may create their own databases (LiveSync's setup creates the
	// remote database), not others.
	if err := open("vault-a", "alice", "alice pass", "").Create(ctx); err != nil {
		t.Fatalf("alice creates vault-a: %v", err)
	}
	if err := open("vault-b", "bob", "bob pass", couchdb.AuthCookie).Create(ctx); err != nil {
		t.Fatalf("bob creates vault-b with a session cookie: %v", err)
	}
	wantAuthStage(t, "alice creates vault-b", open("vault-x", "alice", "alice pass", "").Create(ctx))

	alice := open("vault-a", "alice", "alice pass", "")
	if _, err := alice.BulkDocs(ctx, []json.RawMessage{raw(`{"_id":"n","_rev":"1-a","type":"plain"}`)}); err != nil {
		t.Fatalf("alice writes vault-a: %v", err)
	}
	_, err := open("vault-b", "alice", "alice pass", "").Info(ctx)
	wantAuthStage(t, "alice reads vault-b", err)
	_, err = open("vault-a", "alice", "wrong", "").Info(ctx)
	wantAuthStage(t, "wrong password", err)
	_, err = open("vault-a", "alice", "wrong", couchdb.AuthCookie).Changes(ctx, engine.ChangesRequest{})
	wantAuthStage(t, "wrong password, cookie login", err)
	_, err = open("vault-a", "", "", "").Info(ctx)
	wantAuthStage(t, "anonymous", err)
	if _, err := open("vault-a", "alice", "alice pass", couchdb.AuthCookie).Changes(ctx, engine.ChangesRequest{}); err != nil {
		t.Fatalf("alice with a session cookie: %v", err)
	}

	// The raw answers: CouchDB's error shapes, no login dialog.
	for _, tc := range []struct {
		name   string
		header http.Header
		path   string
		status int
		err    string
	}{
		{"anonymous", nil, "/vault-a", 401, "unauthorized"},
		{"anonymous _all_dbs", nil, "/_all_dbs", 401, "unauthorized"},
		{"wrong password", basic("alice", "nope"), "/vault-a", 401, "unauthorized"},
		{"other user's db", basic("alice", "alice pass"), "/vault-b/_changes", 403, "forbidden"},
		{"other user's doc", basic("bob", "bob pass"), "/vault-a/n", 403, "forbidden"},
		{"config without user", nil, "/_node/_local/_config", 401, "unauthorized"},
	} {
		status, h, b := httpDo(t, http.MethodGet, r.env.url+tc.path, nil, tc.header)
		var e struct{ Error, Reason string }
		_ = json.Unmarshal(b, &e)
		if status != tc.status || e.Error != tc.err || e.Reason == "" || h.Get("WWW-Authenticate") != "" {
			t.Errorf("%s: %d %s (WWW-Authenticate %q)", tc.name, status, b, h.Get("WWW-Authenticate"))
		}
	}
	status, _, b := httpDo(t, http.MethodGet, r.env.url+"/_all_dbs", nil, basic("alice", "alice pass"))
	if status != 200 || strings.TrimSpace(string(b)) != `["vault-a"]` {
		t.Fatalf("alice's _all_dbs: %d %s", status, b)
	}
	// Logging out ends the session.
	status, h, _ := httpDo(t, http.MethodPost, r.env.url+"/_session", strings.NewReader(`{"name":"bob","password":"bob pass"}`), http.Header{"Content-Type": {"application/json"}})
	cookie := (&http.Response{Header: h}).Cookies()
	if status != 200 || len(cookie) != 1 || cookie[0].Name != "AuthSession" || !cookie[0].HttpOnly {
		t.Fatalf("login: %d %v", status, h)
	}
	withCookie := http.Header{"Cookie": {cookie[0].Name + "=" + cookie[0].Value}}
	if status, _, b := httpDo(t, http.MethodGet, r.env.url+"/_session", nil, withCookie); status != 200 || !strings.Contains(string(b), `"name":"bob"`) {
		t.Fatalf("session: %d %s", status, b)
	}
	if status, _, _ := httpDo(t, http.MethodGet, r.env.url+"/vault-b", nil, withCookie); status != 200 {
		t.Fatalf("cookie on vault-b: %d", status)
	}
}

// TestRelayRequestTooLarge: a body over the limit is refused with 413
// before anything is stored, whether its length is declared or it is
// chunked; the adapter reports engine.ErrTooLarge with advice.
func TestRelayRequestTooLarge(t *testing.T) {
	r := startRelay(t, func(c *couchapi.Config) { c.MaxRequestBytes = 64 << 10 })
	db := freshDB(t, r.server(), nil)
	ctx := ctxT(t)
	var docs []string
	for i := range 40 {
		docs = append(docs, fmt.Sprintf(`{"_id":"h:%d","_rev":"1-a","type":"leaf","data":"%s"}`, i, strings.Repeat("x", 4000)))
	}
	body := `{"new_edits":false,"docs":[` + strings.Join(docs, ",") + `]}`
	h := basic(r.env.user, r.env.password)
	h.Set("Content-Type", "application/json")
	for _, chunked := range []bool{false, true} {
		var rd io.Reader = strings.NewReader(body)
		if chunked {
			rd = io.MultiReader(rd) // unknown length: sent chunked
		}
		status, _, b := httpDo(t, http.MethodPost, r.env.url+"/"+db.Name()+"/_bulk_docs", rd, h)
		if status != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), `"error":"too_large"`) {
			t.Fatalf("chunked %v: %d %s", chunked, status, b)
		}
	}
	if info, err := db.Info(ctx); err != nil || info.DocCount != 0 || info.UpdateSeq != "0" {
		t.Fatalf("something was stored: %+v %v", info, err)
	}
	var raws []json.RawMessage
	for _, d := range docs {
		raws = append(raws, raw(d))
	}
	_, err := db.BulkDocs(ctx, raws)
	if !errors.Is(err, engine.ErrTooLarge) || !strings.Contains(err.Error(), "send fewer or smaller") {
		t.Fatalf("adapter: %v, want ErrTooLarge with advice", err)
	}
	// Half of it passes.
	if _, err := db.BulkDocs(ctx, raws[:10]); err != nil {
		t.Fatal(err)
	}
}

// TestRelayLiveSyncWizard runs the checks of LiveSync's setup wizard
// (plugin src/modules/features/SetupWizard/dialogs/utilCheckCouchDB.ts)
// against the relay's configuration answer and CORS headers: with the
// settings LiveSync provisions every check passes, with the defaults the
// answer tells the truth (the request limit below 4 GiB and the missing
// WWW-Authenticate are flagged).
func TestRelayLiveSyncWizard(t *testing.T) {
	check := func(r *relay) []string {
		t.Helper()
		h := basic(r.env.user, r.env.password)
		h.Set("Origin", "app://obsidian.md")
		status, hdr, b := httpDo(t, http.MethodGet, r.env.url+"/_node/_local/_config", nil, h)
		if status != 200 {
			t.Fatalf("config: %d %s", status, b)
		}
		var cfg map[string]map[string]string
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		var failed []string
		fail := func(what string) { failed = append(failed, what) }
		m := regexp.MustCompile(`CouchDB(/([0-9.]+))?`).FindStringSubmatch(hdr.Get("Server"))
		if m == nil || m[2] < "3.2.0" {
			fail("version")
		}
		if _, ok := cfg["admins"][r.env.user]; !ok {
			fail("admin")
		}
		if cfg["chttpd"]["require_valid_user"] != "true" {
			fail("chttpd/require_valid_user")
		}
		if cfg["httpd"]["WWW-Authenticate"] == "" {
			fail("httpd/WWW-Authenticate")
		}
		if cfg["chttpd"]["enable_cors"] != "true" {
			fail("chttpd/enable_cors")
		}
		if n, _ := strconv.ParseInt(cfg["chttpd"]["max_http_request_size"], 10, 64); n < 4294967296 {
			fail("chttpd/max_http_request_size")
		}
		if n, _ := strconv.ParseInt(cfg["couchdb"]["max_document_size"], 10, 64); n < 50000000 {
			fail("couchdb/max_document_size")
		}
		if cfg["cors"]["credentials"] != "true" {
			fail("cors/credentials")
		}
		origins := "," + cfg["cors"]["origins"] + ","
		if cfg["cors"]["origins"] != "*" && !(strings.Contains(origins, ",app://obsidian.md,") && strings.Contains(origins, ",capacitor://localhost,") && strings.Contains(origins, ",http://localhost,")) {
			fail("cors/origins")
		}
		for _, origin := range liveSyncOrigins {
			h.Set("Origin", origin)
			_, hdr, _ := httpDo(t, http.MethodGet, r.env.url+"/_node/_local/_config", nil, h)
			if hdr.Get("Access-Control-Allow-Credentials") != "true" || hdr.Get("Access-Control-Allow-Origin") != origin {
				fail("CORS answer for " + origin)
			}
		}
		// The Fix buttons PUT the expected value: refused with a reason.
		h.Set("Content-Type", "application/json")
		status, _, b = httpDo(t, http.MethodPut, r.env.url+"/_node/_local/_config/cors/credentials", strings.NewReader(`"true"`), h)
		if status != http.StatusMethodNotAllowed || !strings.Contains(string(b), "read-only") {
			t.Fatalf("PUT config: %d %s", status, b)
		}
		// A browser's preflight from the app.
		ph := http.Header{"Origin": {"app://obsidian.md"}, "Access-Control-Request-Method": {"PUT"}, "Access-Control-Request-Headers": {"authorization,content-type"}}
		status, hdr, _ = httpDo(t, http.MethodOptions, r.env.url+"/somedb/doc", nil, ph)
		if status != http.StatusNoContent || hdr.Get("Access-Control-Allow-Origin") != "app://obsidian.md" || !strings.Contains(hdr.Get("Access-Control-Allow-Headers"), "authorization") {
			fail("preflight")
		}
		return failed
	}
	if failed := check(startRelay(t, nil)); strings.Join(failed, ",") != "httpd/WWW-Authenticate,chttpd/max_http_request_size" {
		t.Errorf("defaults: failed checks %v", failed)
	}
	ready := startRelay(t, func(c *couchapi.Config) {
		c.MaxRequestBytes = 4294967296
		c.WWWAuthenticate = `Basic realm="couchdb"`
	})
	if failed := check(ready); len(failed) != 0 {
		t.Errorf("LiveSync-provisioned settings: failed checks %v", failed)
	}
}
