// Package faultnet puts a real fault-injecting proxy between a client and a
// server for integration tests: Shopify's toxiproxy, run in-process, for
// TCP-level faults (latency with jitter, bandwidth, connection resets, black
// holes, sliced writes, a cut after N bytes), and a small HTTP reverse proxy
// of its own for HTTP-level faults (bursts of 5xx answers), which toxiproxy
// cannot produce since it works on bytes.
//
// A Proxy listens on 127.0.0.1 at a free port and forwards to one upstream
// host:port. Toxics are added and removed by name while traffic flows; a
// toxic applies to connections already open and to new ones.
//
//	p, err := faultnet.New("127.0.0.1:5984")
//	defer p.Close()
//	p.Latency("slow", faultnet.Down, 30*time.Millisecond, 10*time.Millisecond)
//	... p.URL() is the server through the proxy ...
//	p.Remove("slow")
package faultnet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/rs/zerolog"
)

// Direction says which way a toxic acts.
type Direction string

const (
	// Down is the server's answers, upstream to client.
	Down Direction = "downstream"
	// Up is the client's requests, client to upstream.
	Up Direction = "upstream"
)

// Proxy is one in-process toxiproxy proxy. Its methods are safe for
// concurrent use.
type Proxy struct {
	mu    sync.Mutex
	proxy *toxiproxy.Proxy
	names map[string]bool
}

var (
	serverOnce sync.Once
	server     *toxiproxy.ApiServer
	seq        int
	seqMu      sync.Mutex
)

func apiServer() *toxiproxy.ApiServer {
	serverOnce.Do(func() {
		server = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	})
	return server
}

// New starts a proxy on 127.0.0.1 (a free port) in front of upstream
// ("host:port").
func New(upstream string) (*Proxy, error) {
	if strings.Contains(upstream, "://") {
		return nil, fmt.Errorf("faultnet: upstream %q is a URL, want host:port", upstream)
	}
	seqMu.Lock()
	seq++
	name := fmt.Sprintf("faultnet-%d", seq)
	seqMu.Unlock()
	tp := toxiproxy.NewProxy(apiServer(), name, "127.0.0.1:0", upstream)
	if err := tp.Start(); err != nil {
		return nil, fmt.Errorf("faultnet: start the proxy to %s: %w", upstream, err)
	}
	return &Proxy{proxy: tp, names: map[string]bool{}}, nil
}

// Addr is the proxy's listening address, host:port.
func (p *Proxy) Addr() string {
	p.proxy.Lock()
	defer p.proxy.Unlock()
	return p.proxy.Listen
}

// URL is "http://" + Addr().
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// Upstream is the address the proxy forwards to.
func (p *Proxy) Upstream() string { return p.proxy.Upstream }

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() { p.proxy.Stop() }

// Cut closes the listener and every open connection, as a server that
// went away; Restore listens on the same address again.
func (p *Proxy) Cut() { p.proxy.Stop() }

// Restore undoes Cut: the proxy accepts connections on the same address.
func (p *Proxy) Restore() error {
	var err error
	// The port was just released; another listener can take it, in which
	// case there is nothing to wait for.
	for range 3 {
		if err = p.proxy.Start(); err == nil || errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
			return nil
		}
	}
	return fmt.Errorf("faultnet: listen again on %s: %w", p.Addr(), err)
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func (p *Proxy) add(name, typ string, dir Direction, toxicity float32, attrs toxics.Toxic) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.names[name] {
		return fmt.Errorf("faultnet: a toxic named %q is already in place", name)
	}
	body, err := json.Marshal(map[string]any{"name": name, "type": typ, "stream": string(dir), "toxicity": toxicity, "attributes": attrs})
	if err != nil {
		return err
	}
	if _, err := p.proxy.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
		return fmt.Errorf("faultnet: add the %s toxic %q: %w", typ, name, err)
	}
	p.names[name] = true
	return nil
}

// Latency delays every chunk of data by latency ± jitter.
func (p *Proxy) Latency(name string, dir Direction, latency, jitter time.Duration) error {
	return p.add(name, "latency", dir, 1, &toxics.LatencyToxic{Latency: ms(latency), Jitter: ms(jitter)})
}

// Bandwidth limits the rate to kbPerSec kilobytes per second.
func (p *Proxy) Bandwidth(name string, dir Direction, kbPerSec int64) error {
	return p.add(name, "bandwidth", dir, 1, &toxics.BandwidthToxic{Rate: kbPerSec})
}

// ResetPeer resets each connection after the first data passing in dir
// (that data is dropped) plus after; connections accepted while the toxic
// is in place end with a TCP RST, those already open with a close.
func (p *Proxy) ResetPeer(name string, dir Direction, after time.Duration) error {
	return p.add(name, "reset_peer", dir, 1, &toxics.ResetToxic{Timeout: ms(after)})
}

// CutAfter closes each connection once n bytes have passed in dir: an
// answer (or request) broken off in the middle of its body.
func (p *Proxy) CutAfter(name string, dir Direction, n int64) error {
	return p.add(name, "limit_data", dir, 1, &toxics.LimitDataToxic{Bytes: n})
}

// Timeout is a black hole: data in dir is dropped and, if after > 0, the
// connection closed after that long; with after == 0 it stays open until
// the toxic is removed (or the other side closes it: in Down, a server
// that closes after its answer ends the connection; use Up for a request
// that never reaches the server).
func (p *Proxy) Timeout(name string, dir Direction, after time.Duration) error {
	return p.add(name, "timeout", dir, 1, &toxics.TimeoutToxic{Timeout: ms(after)})
}

// Slicer cuts data into pieces of about avg ± variation bytes, delay
// apart: answers arrive in many small TCP writes.
func (p *Proxy) Slicer(name string, dir Direction, avg, variation int, delay time.Duration) error {
	return p.add(name, "slicer", dir, 1, &toxics.SlicerToxic{AverageSize: avg, SizeVariation: variation, Delay: int(delay.Microseconds())})
}

// Remove takes the named toxic away; data it held back is delivered.
func (p *Proxy) Remove(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.names[name] {
		return fmt.Errorf("faultnet: no toxic named %q", name)
	}
	delete(p.names, name)
	return p.unstuck("remove "+name, func() error {
		return p.proxy.Toxics.RemoveToxic(context.Background(), name)
	})
}

// RemoveAll takes every toxic away.
func (p *Proxy) RemoveAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.names)
	_ = p.unstuck("remove all toxics", func() error {
		p.proxy.Toxics.ResetToxics(context.Background())
		return nil
	})
}

// stuckAfter is how long a toxic's removal may take before the proxy's
// connections are closed to end it.
const stuckAfter = 3 * time.Second

// unstuck runs fn, a removal of toxics. toxiproxy can deadlock removing a
// toxic from connections that are moving data (a link waits on a toxic
// blocked writing to that link), which once hung a whole test run. If fn
// has not returned after stuckAfter, the proxy is stopped, which closes
// every connection and so ends the wait, and then listens again: the
// tests see one more reset. Stopping and listening again is kept for
// that case only, because another socket can take the port in between.
func (p *Proxy) unstuck(what string, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(stuckAfter):
	}
	p.proxy.Lock()
	running := p.proxy.Enabled
	p.proxy.Unlock()
	go p.proxy.Stop()
	select {
	case err := <-done:
		if running {
			if rerr := p.Restore(); err == nil {
				err = rerr
			}
		}
		return err
	case <-time.After(20 * time.Second):
		return fmt.Errorf("faultnet: %s: toxiproxy did not finish, even with its connections closed", what)
	}
}

// Toxics lists the names of the toxics in place.
func (p *Proxy) Toxics() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for n := range p.names {
		out = append(out, n)
	}
	return out
}
