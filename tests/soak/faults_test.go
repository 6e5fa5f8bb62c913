package soak

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// The network between the pieces: an in-process toxiproxy proxy per link
// for TCP faults (latency with jitter, resets, a black hole) and, in front
// of each upstream server, a small HTTP reverse proxy that can answer 503
// for a while (a burst of server errors, which toxiproxy cannot make since
// it works on bytes).

var (
	tpOnce   sync.Once
	tpServer *toxiproxy.ApiServer
	tpSeq    atomic.Int64
)

// tcpProxy is one toxiproxy proxy on 127.0.0.1 in front of a host:port.
type tcpProxy struct {
	p *toxiproxy.Proxy
}

func newTCPProxy(t *testing.T, upstream string) *tcpProxy {
	t.Helper()
	tpOnce.Do(func() { tpServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop()) })
	p := toxiproxy.NewProxy(tpServer, fmt.Sprintf("soak-%d", tpSeq.Add(1)), "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("toxiproxy in front of %s: %v", upstream, err)
	}
	t.Cleanup(p.Stop)
	return &tcpProxy{p: p}
}

func (p *tcpProxy) addr() string {
	p.p.Lock()
	defer p.p.Unlock()
	return p.p.Listen
}

func (p *tcpProxy) url() string { return "http://" + p.addr() }

// add puts a toxic in place: typ is a toxiproxy toxic type, stream
// "downstream" or "upstream", attrs its attributes as JSON.
func (p *tcpProxy) add(name, typ, stream string, toxicity float64, attrs string) error {
	body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":%g,"attributes":%s}`, name, typ, stream, toxicity, attrs)
	_, err := p.p.Toxics.AddToxicJson(strings.NewReader(body))
	return err
}

func (p *tcpProxy) latency(name string, lat, jitter time.Duration) error {
	return p.add(name, "latency", "downstream", 1, fmt.Sprintf(`{"latency":%d,"jitter":%d}`, lat.Milliseconds(), jitter.Milliseconds()))
}

// resetPeer resets a share (toxicity) of the connections, at once.
func (p *tcpProxy) resetPeer(name string, toxicity float64) error {
	return p.add(name, "reset_peer", "upstream", toxicity, `{"timeout":0}`)
}

// blackHole drops what clients send and keeps the connections open.
func (p *tcpProxy) blackHole(name string) error {
	return p.add(name, "timeout", "upstream", 1, `{"timeout":0}`)
}

func (p *tcpProxy) remove(name string) error {
	return p.p.Toxics.RemoveToxic(context.Background(), name)
}

func (p *tcpProxy) removeAll() { p.p.Toxics.ResetToxics(context.Background()) }

// httpFaults forwards HTTP to a server, keeping the Host header (S3
// signatures cover it), and answers 503 while failing is set.
type httpFaults struct {
	failing  atomic.Bool
	answered atomic.Int64 // 503s sent
	srv      *http.Server
	addr     string
}

func newHTTPFaults(t *testing.T, target string) *httpFaults {
	t.Helper()
	u, err := url.Parse("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &httpFaults{addr: ln.Addr().String()}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host
		},
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	h.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.failing.Load() {
			h.answered.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"service_unavailable","reason":"soak test: a burst of server errors"}`))
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go h.srv.Serve(ln)
	t.Cleanup(func() { h.srv.Close() })
	return h
}

// answeredOr0 is answered, or 0 when there is no proxy (a bucket on HTTPS).
func (h *httpFaults) answeredOr0() int64 {
	if h == nil {
		return 0
	}
	return h.answered.Load()
}
