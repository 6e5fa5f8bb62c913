package couchapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// Test accounts: admin may do anything, alice only the database "a".
const (
	adminPass = "admin-secret"
	alicePass = "alice-secret"
)

func testConfig(dbs Databases) Config {
	return Config{
		Databases: dbs,
		Users: []User{
			{Name: "admin", Password: adminPass, Admin: true},
			{Name: "alice", Password: alicePass, Databases: []string{"a"}},
		},
		PasswordIterations: 1000, // fast tests; the default is exercised in the integration tests
		CORSOrigins:        []string{"app://obsidian.md", "capacitor://localhost", "http://localhost"},
	}
}

// newTestServer returns a server over memory databases with cfg adjusted
// by mod, and a client that sends admin credentials by default.
func newTestServer(t *testing.T, mod func(*Config)) (*Server, *client) {
	t.Helper()
	dbs := NewMemoryDatabases()
	t.Cleanup(func() { dbs.Close() })
	cfg := testConfig(dbs)
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, &client{t: t, h: s, user: "admin", pass: adminPass}
}

// client sends requests straight to a handler.
type client struct {
	t          testing.TB
	h          http.Handler
	user, pass string // "" user: no Authorization header
	header     http.Header
}

func (c *client) as(user, pass string) *client {
	cc := *c
	cc.user, cc.pass = user, pass
	return &cc
}

func (c *client) anon() *client { return c.as("", "") }

func (c *client) with(h http.Header) *client {
	cc := *c
	cc.header = h
	return &cc
}

// resp is an answer.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

func (r resp) list(t testing.TB) []any {
	t.Helper()
	var l []any
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatalf("answer is not a JSON list: %v: %s", err, r.body)
	}
	return l
}

func (c *client) do(method, path string, body any) resp {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req := httptest.NewRequestWithContext(context.Background(), method, path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	return resp{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// must sends a request and fails the test unless the status is want.
func (c *client) must(want int, method, path string, body any) resp {
	c.t.Helper()
	r := c.do(method, path, body)
	if r.status != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.body)
	}
	return r
}

// wantError checks a CouchDB-shaped error answer.
func wantError(t *testing.T, r resp, status int, name string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	var e struct{ Error, Reason string }
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error == "" || e.Reason == "" {
		t.Fatalf("not a CouchDB error {error, reason}: %s", r.body)
	}
	if name != "" && e.Error != name {
		t.Fatalf("error %q, want %q: %s", e.Error, name, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error Content-Type %q", ct)
	}
}

func str(v any) string { s, _ := v.(string); return s }

// putDoc writes a document with new_edits=true and returns its revision.
func (c *client) putDoc(db, id string, body map[string]any) string {
	c.t.Helper()
	r := c.must(http.StatusCreated, http.MethodPut, "/"+db+"/"+escapeID(id), body)
	return str(r.json(c.t)["rev"])
}

// escapeID escapes a document id for a path, keeping "_design/" as is.
func escapeID(id string) string {
	if rest, ok := strings.CutPrefix(id, "_design/"); ok {
		return "_design/" + pathEscape(rest)
	}
	return pathEscape(id)
}

func pathEscape(s string) string { return url.PathEscape(s) }

var sha256New = sha256.New

// sessionFrom returns the AuthSession value an answer sets.
func sessionFrom(t testing.TB, r resp) string {
	t.Helper()
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == sessionCookie && c.Value != "" {
			if !c.HttpOnly || c.Path != "/" || c.MaxAge <= 0 {
				t.Fatalf("cookie attributes %+v", c)
			}
			return c.Value
		}
	}
	t.Fatalf("no %s cookie in %v", sessionCookie, r.header)
	return ""
}

func mustB64Decode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
