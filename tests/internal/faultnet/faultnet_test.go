package faultnet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

var payload = bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16) // 64 KiB

func backend(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/host" {
			io.WriteString(w, r.Host)
			return
		}
		w.Write(payload)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func proxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := New(strings.TrimPrefix(backend(t).URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// get fetches url with a fresh connection (no keep-alive between calls,
// so each call sees the toxics as a new connection does).
func get(t *testing.T, url string, timeout time.Duration) ([]byte, error) {
	t.Helper()
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != 200 {
		err = errors.New(resp.Status)
	}
	return b, err
}

func mustAll(t *testing.T, url string) {
	t.Helper()
	b, err := get(t, url, 5*time.Second)
	if err != nil || !bytes.Equal(b, payload) {
		t.Fatalf("through the proxy: %d bytes, %v; want the payload intact", len(b), err)
	}
}

func TestPassThroughAndRemove(t *testing.T) {
	p := proxy(t)
	mustAll(t, p.URL())
	if err := p.Latency("lat", Down, 40*time.Millisecond, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := p.Latency("lat", Down, time.Millisecond, 0); err == nil {
		t.Error("a second toxic with the same name was accepted")
	}
	start := time.Now()
	mustAll(t, p.URL())
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("with 40±5 ms of latency the answer took %v", d)
	}
	if got := p.Toxics(); len(got) != 1 || got[0] != "lat" {
		t.Errorf("Toxics() = %v", got)
	}
	if err := p.Remove("lat"); err != nil {
		t.Fatal(err)
	}
	if err := p.Remove("lat"); err == nil {
		t.Error("removing a toxic twice succeeded")
	}
	mustAll(t, p.URL())
}

func TestCutAfterBreaksTheBody(t *testing.T) {
	p := proxy(t)
	if err := p.CutAfter("cut", Down, 4096); err != nil {
		t.Fatal(err)
	}
	b, err := get(t, p.URL(), 5*time.Second)
	if err == nil || len(b) >= len(payload) {
		t.Fatalf("cut after 4 KiB: %d bytes, err %v; want a broken body", len(b), err)
	}
	p.RemoveAll()
	mustAll(t, p.URL())
}

func TestResetPeer(t *testing.T) {
	p := proxy(t)
	if err := p.ResetPeer("rst", Down, 0); err != nil {
		t.Fatal(err)
	}
	if b, err := get(t, p.URL(), 5*time.Second); err == nil {
		t.Fatalf("reset_peer: %d bytes and no error", len(b))
	}
	p.RemoveAll()
	mustAll(t, p.URL())
}

func TestTimeoutBlackHole(t *testing.T) {
	p := proxy(t)
	if err := p.Timeout("hole", Up, 0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := get(t, p.URL(), 300*time.Millisecond); err == nil {
		t.Fatal("a black-holed request answered")
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("the black hole gave up after %v, before the client's timeout", d)
	}
	if err := p.Remove("hole"); err != nil {
		t.Fatal(err)
	}
	mustAll(t, p.URL())
	// With a timeout the connection is closed after it.
	if err := p.Timeout("hole", Down, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := get(t, p.URL(), 5*time.Second); err == nil {
		t.Fatal("a black-holed request answered")
	}
}

func TestSlicerAndBandwidthKeepTheBytes(t *testing.T) {
	p := proxy(t)
	if err := p.Slicer("slice", Down, 512, 256, 10*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	mustAll(t, p.URL())
	if err := p.Bandwidth("bw", Down, 640); err != nil { // 64 KiB at 640 KB/s: ~100 ms
		t.Fatal(err)
	}
	start := time.Now()
	mustAll(t, p.URL())
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Errorf("64 KiB at 640 KB/s took %v", d)
	}
}

func TestCutAndRestore(t *testing.T) {
	p := proxy(t)
	addr := p.Addr()
	p.Cut()
	if _, err := get(t, p.URL(), time.Second); err == nil {
		t.Fatal("a cut proxy answered")
	}
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	if p.Addr() != addr {
		t.Fatalf("restored on %s, was %s", p.Addr(), addr)
	}
	mustAll(t, p.URL())
}

func TestHTTPBurst(t *testing.T) {
	srv := backend(t)
	h, err := NewHTTP(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	mustAll(t, h.URL())
	h.Burst(3, nil, 503, 500, 502)
	var got []string
	for range 3 {
		_, err := get(t, h.URL(), 5*time.Second)
		got = append(got, err.Error())
	}
	if strings.Join(got, ",") != "503 Service Unavailable,500 Internal Server Error,502 Bad Gateway" {
		t.Errorf("burst answers: %v", got)
	}
	mustAll(t, h.URL())
	if h.Failed() != 3 || h.Requests() != 5 || h.Left() != 0 {
		t.Errorf("failed %d, requests %d, left %d", h.Failed(), h.Requests(), h.Left())
	}
	// A burst that matches only some requests; the Host header is kept.
	h.Burst(1, func(r *http.Request) bool { return r.URL.Path == "/x" })
	mustAll(t, h.URL()+"/y")
	if _, err := get(t, h.URL()+"/x", 5*time.Second); err == nil {
		t.Error("the matching request passed")
	}
	b, err := get(t, h.URL()+"/host", 5*time.Second)
	if err != nil || string(b) != strings.TrimPrefix(h.URL(), "http://") {
		t.Errorf("Host seen by the server: %q (%v), want the proxy's", b, err)
	}
	h.Burst(5, nil)
	h.Stop()
	var seen, done []string
	h.OnRequest(func(r *http.Request) { seen = append(seen, r.URL.Path) })
	h.OnDone(func(r *http.Request, code int) { done = append(done, fmt.Sprint(r.URL.Path, " ", code)) })
	mustAll(t, h.URL()+"/z")
	if len(seen) != 1 || seen[0] != "/z" || len(done) != 1 || done[0] != "/z 200" {
		t.Errorf("OnRequest saw %v, OnDone %v", seen, done)
	}
}
