package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fakeCouch answers the read-only requests doctor sends for an empty,
// new database; config is the server configuration it reports (status
// configStatus).
func fakeCouch(t *testing.T, config map[string]map[string]string, configStatus int) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodGet && !(r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/_changes")) {
			t.Errorf("doctor sent %s %s: it must not write", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		switch p := r.URL.Path; {
		case p == "/":
			fmt.Fprint(w, `{"couchdb":"Welcome","version":"3.5.0","vendor":{"name":"The Apache Software Foundation"}}`)
		case p == "/vault":
			fmt.Fprint(w, `{"db_name":"vault","doc_count":0,"update_seq":"0"}`)
		case p == "/vault/_changes":
			fmt.Fprint(w, `{"results":[],"last_seq":"0","pending":0}`)
		case p == "/_node/_local/_config":
			w.WriteHeader(configStatus)
			json.NewEncoder(w).Encode(config)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":"not_found","reason":"missing"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// goodConfig is what the plugin's setup configures.
func goodConfig() map[string]map[string]string {
	return map[string]map[string]string{
		"chttpd":      {"require_valid_user": "true", "enable_cors": "true", "max_http_request_size": "4294967296"},
		"chttpd_auth": {"require_valid_user": "true"},
		"httpd":       {"enable_cors": "true", "WWW-Authenticate": `Basic realm="couchdb"`},
		"couchdb":     {"max_document_size": "50000000"},
		"cors":        {"credentials": "true", "origins": "app://obsidian.md,capacitor://localhost,http://localhost"},
	}
}

func TestDoctorServerSettings(t *testing.T) {
	small := goodConfig()
	small["chttpd"]["max_http_request_size"] = "67108864"
	small["cors"]["origins"] = "https://example.com"
	delete(small["chttpd_auth"], "require_valid_user")
	bigger := goodConfig()
	bigger["couchdb"]["max_document_size"] = "100000000"
	for _, tc := range []struct {
		name   string
		config map[string]map[string]string
		status int
		want   []string
	}{
		{"as needed", goodConfig(), 200, []string{"ok       server settings  the server is configured as LiveSync needs"}},
		{"larger limits are fine", bigger, 200, []string{"configured as LiveSync needs"}},
		{"wrong", small, 200, []string{"WARNING  server settings", `chttpd/max_http_request_size is "67108864", LiveSync needs "4294967296"`,
			"chttpd_auth/require_valid_user is unset", `cors/origins is "https://example.com"`}},
		{"not an admin", nil, http.StatusForbidden, []string{"skipped  server settings  the server's configuration can only be read by an admin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeCouch(t, tc.config, tc.status)
			s := newSession(t)
			code, out, errs := s.run("", "doctor", srv.URL+"/vault")
			if code != exitOK {
				t.Fatalf("exit %d (warnings are not problems): %s %s", code, out, errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range []string{"ok       server           reachable: The Apache Software Foundation 3.5.0", "no milestone yet", "no sync parameters yet"} {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
