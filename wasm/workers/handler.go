package main

import (
	"io"
	"net/http"
	"strings"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
)

// newHandler serves the CouchDB protocol from dbs with the Worker's
// settings. A Workers request cannot hold a feed open forever: the
// runtime bounds it, a write in another isolate does not wake it, and
// with the per-request loader its Go instance ends with the answer. So
// _changes never keeps a heartbeat going: a longpoll answers when it
// finds changes or after the changes timeout, and a continuous feed
// keeps its line format but ends the same way (it degrades to a
// longpoll); the plugin's PouchDB asks again. No goroutine or timer
// outlives the request.
func newHandler(s settings, dbs couchapi.Databases) (http.Handler, error) {
	cfg := s.cfg
	cfg.Databases = dbs
	srv, err := couchapi.New(cfg)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/_changes") {
			boundFeed(r)
		}
		defer drain(r)
		lw := noLengthWriter{w}
		srv.ServeHTTP(lw, r)
		lw.Header().Del("Content-Length")
	}), nil
}

// drainLimit is the most of an unread request body drain reads.
const drainLimit = 64 << 10

// drain reads a request body to its end when the handler stopped short
// of it (a JSON decoder stops after the value, before EOF) and little is
// left: workerd reuses a connection only once the request body has been
// read to its end, and a client that sends its next POST on one it
// closes reads EOF. A larger rest is a body the server refused (too
// large, no credentials), whose connection is meant to close.
func drain(r *http.Request) {
	if r.Body != nil {
		io.Copy(io.Discard, io.LimitReader(r.Body, drainLimit))
	}
}

// noLengthWriter drops Content-Length from every answer (bridge_js.go's
// writer drops it too). Given one, with the per-request loader,
// syumai/workers hands the body to a FixedLengthStream from a goroutine
// whose end also ends the Go instance, and under load that instance can
// exit while the runtime still calls into it: the answer is cut and the
// client reads EOF. Without one the body is pulled by the runtime until
// its end (and a HEAD answer, which has no body, is not refused either).
type noLengthWriter struct{ http.ResponseWriter }

func (w noLengthWriter) WriteHeader(code int) {
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(code)
}

func (w noLengthWriter) Write(b []byte) (int, error) {
	w.Header().Del("Content-Length")
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the Flusher beneath.
func (w noLengthWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// boundFeed drops a _changes request's heartbeat, so the server's changes
// timeout ends the feed.
func boundFeed(r *http.Request) {
	q := r.URL.Query()
	if !q.Has("heartbeat") {
		return
	}
	q.Del("heartbeat")
	r.URL.RawQuery = q.Encode()
}

// failing answers every request 500 with a fixed reason, for a Worker
// whose settings are wrong (the reason names the setting, never a value).
func failing(err error) http.Handler {
	msg := `{"error":"misconfigured","reason":` + quote(err.Error()) + "}\n"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(msg))
	})
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
