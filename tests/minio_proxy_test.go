package tests

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// s3FaultProxy is a real HTTP reverse proxy in front of the S3 server
// (plain HTTP, or TLS with a certificate of its own). It keeps the Host
// header the client signed, so SigV4 signatures stay valid, and can
// answer 503 SlowDown to the next requests instead of forwarding them,
// or after forwarding them (the server acted, its answer is lost).
type s3FaultProxy struct {
	srv      *httptest.Server
	fail     atomic.Int64 // the next fail requests get a 503
	lose     atomic.Int64 // the next lose requests are forwarded, then answered 503
	requests atomic.Int64 // every request seen
	failed   atomic.Int64 // requests answered 503
	tlsSeen  atomic.Int64 // requests that arrived over TLS
}

// startS3FaultProxy starts a proxy to e's endpoint; with useTLS it serves
// HTTPS with httptest's certificate (see caPEM).
func startS3FaultProxy(t *testing.T, e s3Env, useTLS bool) *s3FaultProxy {
	t.Helper()
	scheme := "http"
	if e.secure {
		scheme = "https"
	}
	upstream := &url.URL{Scheme: scheme, Host: e.hostPort()}
	// The upstream leg: the server's own CA when it has one; test proxy
	// only.
	tr := &http.Transport{DisableCompression: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	if len(e.caPEM) > 0 {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(e.caPEM)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, ServerName: hostOnly(e.hostPort())}
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			r.Out.Host = r.In.Host // the signed host
		},
		Transport: tr,
	}
	p := &s3FaultProxy{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		if r.TLS != nil {
			p.tlsSeen.Add(1)
		}
		if take(&p.lose) {
			rp.ServeHTTP(httptest.NewRecorder(), r) // the server acts; its answer is dropped
			p.failed.Add(1)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		if p.takeFailure() {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		rp.ServeHTTP(w, r)
	})
	p.srv = httptest.NewUnstartedServer(h)
	// Refused handshakes are what some tests provoke; keep them off stderr.
	p.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if useTLS {
		p.srv.StartTLS()
	} else {
		p.srv.Start()
	}
	t.Cleanup(func() { p.srv.Close(); tr.CloseIdleConnections() })
	return p
}

// takeFailure reports whether this request is to be answered 503.
func (p *s3FaultProxy) takeFailure() bool {
	if take(&p.fail) {
		p.failed.Add(1)
		return true
	}
	return false
}

// take decrements n if it is positive and reports whether it did.
func take(n *atomic.Int64) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

// hostPort is the proxy's 127.0.0.1:port.
func (p *s3FaultProxy) hostPort() string { return p.srv.Listener.Addr().String() }

// caPEM is the TLS proxy's certificate in PEM.
func (p *s3FaultProxy) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
}

func hostOnly(hostPort string) string {
	if h, _, err := net.SplitHostPort(hostPort); err == nil {
		return h
	}
	return hostPort
}

// s3CutProxy is a TCP proxy in front of the S3 server that closes both
// sides of a connection once the client has sent cutAfter bytes on it,
// for the first limit connections that reach that size (negative: all).
type s3CutProxy struct {
	ln       net.Listener
	target   string
	cutAfter int64
	limit    int64
	cutDone  atomic.Int64 // connections cut
	wg       sync.WaitGroup
}

func startS3CutProxy(t *testing.T, e s3Env, cutAfter, limit int64) *s3CutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &s3CutProxy{ln: ln, target: e.hostPort(), cutAfter: cutAfter, limit: limit}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.serve(c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *s3CutProxy) hostPort() string { return p.ln.Addr().String() }

// takeCut reports whether this connection is to be cut, counting it.
func (p *s3CutProxy) takeCut() bool {
	for {
		n := p.cutDone.Load()
		if p.limit >= 0 && n >= p.limit {
			return false
		}
		if p.cutDone.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (p *s3CutProxy) serve(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(c, s)
		c.Close()
	}()
	n, err := io.CopyN(s, c, p.cutAfter)
	if err == nil && n == p.cutAfter && p.takeCut() {
		// Cut: drop both sides mid-request, as a dying link does.
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
		s.Close()
	} else if err == nil {
		_, _ = io.Copy(s, c)
	}
	s.Close()
	<-done
}
