package couchapi

import (
	"encoding/hex"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// welcome answers GET / as CouchDB does, with the relay as vendor.
func (s *Server) welcome(q *request) *apiError {
	writeJSON(q.w, http.StatusOK, map[string]any{
		"couchdb":  "Welcome",
		"version":  CouchDBVersion,
		"git_sha":  "livesync-relay",
		"uuid":     s.uuid,
		"features": []string{},
		"vendor":   map[string]string{"name": "livesync-relay"},
	})
	return nil
}

func (s *Server) up(q *request) *apiError {
	writeJSON(q.w, http.StatusOK, map[string]any{"status": "ok", "seeds": map[string]any{}})
	return nil
}

// allDBs lists the databases the caller may read.
func (s *Server) allDBs(q *request) *apiError {
	names, err := s.dbs.List(q.r.Context())
	if err != nil {
		return asAPIError(err)
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if u := q.id.acc; (u != nil && (u.admin || u.dbs[n])) || s.cfg.AllowAnonymousRead || s.cfg.AllowAnonymousWrite {
			out = append(out, n)
		}
	}
	writeJSON(q.w, http.StatusOK, out)
	return nil
}

// uuids answers GET /_uuids?count=N (at most 1000, as CouchDB).
func (s *Server) uuids(q *request) *apiError {
	n := 1
	if v := q.r.URL.Query().Get("count"); v != "" {
		c, err := strconv.Atoi(v)
		if err != nil || c < 1 {
			return badRequest("count must be a positive integer")
		}
		if c > 1000 {
			return errorf(http.StatusBadRequest, "bad_request", "count parameter too large")
		}
		n = c
	}
	out := make([]string, n)
	for i := range out {
		out[i] = hex.EncodeToString(randomBytes(16))
	}
	writeJSON(q.w, http.StatusOK, map[string]any{"uuids": out})
	return nil
}

// sessionInfo is the body of GET /_session.
func (s *Server) sessionInfo(id identity) map[string]any {
	var name any
	if id.acc != nil {
		name = id.acc.name
	}
	info := map[string]any{"authentication_handlers": []string{"cookie", "default"}}
	if id.via != "" {
		info["authenticated"] = map[string]string{"basic": "default", "cookie": "cookie"}[id.via]
	}
	return map[string]any{"ok": true, "userCtx": map[string]any{"name": name, "roles": id.acc.roles()}, "info": info}
}

// getSession answers who the caller is; wrong Basic credentials are a 401.
func (s *Server) getSession(q *request) *apiError {
	id, ae := s.auth.identify(q.w, q.r)
	if ae != nil {
		s.unauthorized(q.w, ae)
		return nil
	}
	writeJSON(q.w, http.StatusOK, s.sessionInfo(id))
	return nil
}

// postSession logs in with a JSON or form body {name, password} and sets
// the AuthSession cookie.
func (s *Server) postSession(q *request) *apiError {
	b, ae := readBody(q.r)
	if ae != nil {
		return ae
	}
	var name, password string
	ct, _, _ := mime.ParseMediaType(q.r.Header.Get("Content-Type"))
	if ct == "application/x-www-form-urlencoded" {
		v, err := url.ParseQuery(string(b))
		if err != nil {
			return badRequest("The form could not be parsed.")
		}
		name, password = v.Get("name"), v.Get("password")
	} else {
		m, ae := parseObject(b)
		if ae != nil {
			return ae
		}
		if json.Unmarshal(m["name"], &name) != nil || json.Unmarshal(m["password"], &password) != nil {
			return badRequest("name and password must be strings")
		}
	}
	acc, ae := s.auth.check(q.r.Context(), clientAddress(q.r), name, password)
	if ae != nil {
		s.loginFailed(q.r, "/_session", name, ae)
		s.unauthorized(q.w, ae)
		return nil
	}
	s.auth.setCookie(q.w, q.r, acc, s.auth.now())
	writeJSON(q.w, http.StatusOK, map[string]any{"ok": true, "name": acc.name, "roles": acc.roles()})
	return nil
}

func (s *Server) deleteSession(q *request) *apiError {
	s.auth.clearCookie(q.w, q.r)
	writeJSON(q.w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}

// configSections is the server configuration as CouchDB would report it
// with the relay's effective values: what LiveSync's setup wizard checks
// (engine/FORMAT.md §5.1; plugin utilCheckCouchDB.ts). The admins section lists
// admin users (values hidden) to admins only.
func (s *Server) configSections(caller *account) map[string]map[string]string {
	boolStr := func(b bool) string { return strconv.FormatBool(b) }
	requireValid := boolStr(!s.cfg.AllowAnonymousRead && !s.cfg.AllowAnonymousWrite)
	cors := len(s.corsOrigins) > 0
	origins := make([]string, 0, len(s.cfg.CORSOrigins))
	for _, o := range s.cfg.CORSOrigins {
		origins = append(origins, strings.TrimSuffix(o, "/"))
	}
	if s.corsAll {
		origins = []string{"*"}
	}
	maxReq := strconv.FormatInt(s.maxReq, 10)
	timeout := strconv.FormatInt(int64(s.auth.timeout.Seconds()), 10)
	admins := map[string]string{}
	if caller != nil && caller.admin {
		for _, u := range s.auth.users {
			if u.admin {
				admins[u.name] = "-pbkdf2-(hidden)"
			}
		}
	}
	chttpd := map[string]string{"require_valid_user": requireValid, "enable_cors": boolStr(cors),
		"max_http_request_size": maxReq, "changes_timeout": strconv.FormatInt(s.changesTimeout.Milliseconds(), 10)}
	httpd := map[string]string{"enable_cors": boolStr(cors), "require_valid_user": requireValid,
		"max_http_request_size": maxReq}
	if s.cfg.WWWAuthenticate != "" {
		chttpd["WWW-Authenticate"] = s.cfg.WWWAuthenticate
		httpd["WWW-Authenticate"] = s.cfg.WWWAuthenticate
	}
	out := map[string]map[string]string{
		"admins":      admins,
		"chttpd":      chttpd,
		"httpd":       httpd,
		"chttpd_auth": {"require_valid_user": requireValid, "timeout": timeout, "allow_persistent_cookies": "true"},
		"couchdb":     {"max_document_size": strconv.FormatInt(s.maxDoc, 10), "uuid": s.uuid, "single_node": "true"},
		"cors":        {},
	}
	if cors {
		out["cors"] = map[string]string{"credentials": "true", "origins": strings.Join(origins, ","),
			"headers": corsHeaders, "methods": corsMethods, "max_age": corsMaxAge}
	}
	return out
}

// config answers GET /_node/_local/_config[/section[/key]].
func (s *Server) config(q *request) *apiError {
	all := s.configSections(q.id.acc)
	switch len(q.rest) {
	case 0:
		writeJSON(q.w, http.StatusOK, all)
	case 1:
		sec, ok := all[q.rest[0]]
		if !ok {
			sec = map[string]string{}
		}
		writeJSON(q.w, http.StatusOK, sec)
	default:
		v, ok := all[q.rest[0]][q.rest[1]]
		if !ok {
			return errorf(http.StatusNotFound, "not_found", "unknown_config_value")
		}
		writeJSON(q.w, http.StatusOK, v)
	}
	return nil
}

// configReadOnly refuses configuration changes with a reason the plugin
// shows to its user.
func (s *Server) configReadOnly(q *request) *apiError {
	q.w.Header().Set("Allow", "GET, HEAD")
	return errorf(http.StatusMethodNotAllowed, "method_not_allowed",
		"This livesync-relay configuration is read-only over HTTP: change it in the relay's configuration and restart it.")
}
