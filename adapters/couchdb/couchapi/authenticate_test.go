package couchapi

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestAuthenticate(t *testing.T) {
	s, c := newTestServer(t, nil)
	cookie := sessionFrom(t, c.anon().must(http.StatusOK, http.MethodPost, "/_session", map[string]string{"name": "alice", "password": alicePass}))
	adminCookie := sessionFrom(t, c.anon().must(http.StatusOK, http.MethodPost, "/_session", map[string]string{"name": "admin", "password": adminPass}))
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	for _, tc := range []struct {
		name, auth, cookie string
		user               string
		admin, ok          bool
	}{
		{name: "nothing"},
		{name: "admin, Basic", auth: basic("admin", adminPass), user: "admin", admin: true, ok: true},
		{name: "alice, Basic", auth: basic("alice", alicePass), user: "alice", ok: true},
		{name: "wrong password", auth: basic("alice", "nope")},
		{name: "unknown user", auth: basic("mallory", alicePass)},
		{name: "wrong password beats a good cookie", auth: basic("admin", "nope"), cookie: adminCookie},
		{name: "not Basic", auth: "Bearer x"},
		{name: "malformed Basic", auth: "Basic !!"},
		{name: "alice, cookie", cookie: cookie, user: "alice", ok: true},
		{name: "admin, cookie", cookie: adminCookie, user: "admin", admin: true, ok: true},
		{name: "forged cookie", cookie: b64("admin:0:x")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			if tc.cookie != "" {
				req.AddCookie(&http.Cookie{Name: sessionCookie, Value: tc.cookie})
			}
			user, admin, ok := s.Authenticate(req)
			if user != tc.user || admin != tc.admin || ok != tc.ok {
				t.Fatalf("Authenticate = %q, %v, %v; want %q, %v, %v", user, admin, ok, tc.user, tc.admin, tc.ok)
			}
		})
	}
	// An expired cookie is refused; one due for refresh is accepted (and
	// not refreshed: Authenticate writes nothing).
	now := time.Now()
	s.auth.now = func() time.Time { return now.Add(DefaultCookieTimeout / 2) }
	req := httptest.NewRequest(http.MethodGet, "/status", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: cookie})
	if user, _, ok := s.Authenticate(req); !ok || user != "alice" {
		t.Fatalf("cookie due for refresh: %q %v", user, ok)
	}
	s.auth.now = func() time.Time { return now.Add(DefaultCookieTimeout + time.Minute) }
	if _, _, ok := s.Authenticate(req); ok {
		t.Fatal("an expired cookie was accepted")
	}
}
