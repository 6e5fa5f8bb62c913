package faultnet

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
)

// HTTPProxy is a reverse proxy that answers bursts of requests with 5xx
// status codes and passes the others through. The Host header is kept as
// the client sent it, so signed requests (S3's SigV4) still verify.
type HTTPProxy struct {
	srv    *http.Server
	ln     net.Listener
	target *url.URL

	mu       sync.Mutex
	left     int                      // requests still to fail in this burst
	codes    []int                    // the burst's codes, used in turn
	match    func(*http.Request) bool // which requests the burst hits; nil = all
	next     int                      // index into codes
	failed   int                      // requests answered with a burst code
	requests int                      // requests seen
	onReq    func(*http.Request)
	onDone   func(*http.Request, int)
}

// NewHTTP starts an HTTP proxy on 127.0.0.1 (a free port) in front of
// target, a base URL such as "http://127.0.0.1:5984".
func NewHTTP(target string) (*HTTPProxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("faultnet: target %q is not a URL", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &HTTPProxy{ln: ln, target: u}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host
		},
		// A failed upstream is answered 502, which is what the test sees;
		// the log line would only repeat it.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	h.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		// Deferred: the reverse proxy panics with http.ErrAbortHandler
		// when the client goes away in the middle of an answer.
		defer func() {
			h.mu.Lock()
			done := h.onDone
			h.mu.Unlock()
			if done != nil {
				done(r, sw.code)
			}
		}()
		if code := h.take(r); code != 0 {
			w.Header().Set("Content-Type", "application/json")
			sw.WriteHeader(code)
			fmt.Fprintf(w, `{"error":"faultnet","reason":"injected %d"}`+"\n", code)
			return
		}
		rp.ServeHTTP(sw, r)
	})}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

// take counts r and returns the status code to answer it with, or 0 to pass
// it through.
func (h *HTTPProxy) take(r *http.Request) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests++
	if h.onReq != nil {
		h.onReq(r)
	}
	if h.left <= 0 || (h.match != nil && !h.match(r)) {
		return 0
	}
	h.left--
	code := h.codes[h.next%len(h.codes)]
	h.next++
	h.failed++
	return code
}

// URL is the proxy's base URL.
func (h *HTTPProxy) URL() string { return "http://" + h.ln.Addr().String() }

// Burst answers the next n requests (those match accepts, or every request
// if match is nil) with codes in turn (503 if none are given); later ones
// pass through. A new Burst replaces one still under way.
func (h *HTTPProxy) Burst(n int, match func(*http.Request) bool, codes ...int) {
	if len(codes) == 0 {
		codes = []int{http.StatusServiceUnavailable}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.left, h.codes, h.match, h.next = n, append([]int(nil), codes...), match, 0
}

// Stop ends a burst under way.
func (h *HTTPProxy) Stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.left = 0
}

// Left is how many requests the burst still has to fail.
func (h *HTTPProxy) Left() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.left
}

// Failed is how many requests were answered with a burst code so far;
// Requests is how many came in.
func (h *HTTPProxy) Failed() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}

// Requests is how many requests the proxy has received.
func (h *HTTPProxy) Requests() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests
}

// OnRequest sets a function called with every request as it arrives,
// before any burst decision. It runs under the proxy's lock: keep it
// short, and change toxics from another goroutine (adding one waits for
// data on every connection to move, which may need this proxy).
func (h *HTTPProxy) OnRequest(f func(*http.Request)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onReq = f
}

// OnDone sets a function called with every request once its answer (the
// server's, or the burst's) has been copied to the client, with its status.
// With OnRequest it shows which requests overlapped on the wire.
func (h *HTTPProxy) OnDone(f func(r *http.Request, status int)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onDone = f
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush passes streamed answers (a longpoll feed) on as they come.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Close stops the proxy and closes its connections.
func (h *HTTPProxy) Close() { _ = h.srv.Close() }
