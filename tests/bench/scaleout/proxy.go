//go:build linux

package main

import (
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// countingProxy stands between the relays and the server and counts the
// requests the relays make, by kind ("_bulk_get POST"), so that the
// report can say how many server requests one client request costs. It
// runs in this process: its CPU is in the "writer" column.
type countingProxy struct {
	url string
	srv *http.Server
	mu  sync.Mutex
	n   map[string]int
}

func startProxy(target string) (*countingProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{url: "http://" + l.Addr().String(), n: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1 // changes feeds pass as written
	// Longpolls cut when a relay stops are no news.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.n[requestKind(r)]++
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	go p.srv.Serve(l)
	return p, nil
}

// requestKind names a request as livesync-load.mjs names the clients'
// requests, longpolls apart.
func requestKind(r *http.Request) string {
	kind := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	switch {
	case strings.Contains(r.URL.Path, "/_local/"):
		kind = "_local"
	case strings.Count(strings.Trim(r.URL.Path, "/"), "/") == 0:
		kind = "{db}" // the database's information (or the server's)
	case kind == "" || !strings.HasPrefix(kind, "_"):
		kind = "{db}/{doc}"
	}
	q := r.URL.Query()
	if q.Get("feed") == "longpoll" {
		kind += " longpoll"
	}
	// The reads that stand for several documents or revisions, apart
	// from the single-document ones.
	switch {
	case q.Has("open_revs"):
		kind += " open_revs"
	case q.Get("filter") == "_doc_ids":
		kind += " doc_ids"
	}
	return kind + " " + r.Method
}

// take returns the counts since the last take and starts again.
func (p *countingProxy) take() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.n
	p.n = map[string]int{}
	return n
}

func (p *countingProxy) close() { p.srv.Close() }

// summary is "total (kind n, …)" with the largest kinds first.
func summary(n map[string]int) (int, string) {
	total := 0
	for _, v := range n {
		total += v
	}
	kinds := slices.SortedFunc(maps.Keys(n), func(a, b string) int { return n[b] - n[a] })
	var parts []string
	for _, k := range kinds[:min(10, len(kinds))] {
		parts = append(parts, fmt.Sprintf("%s %d", k, n[k]))
	}
	return total, strings.Join(parts, ", ")
}
