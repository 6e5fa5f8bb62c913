package couchdb

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestReplayOnClosedKeepAlive: a server that closes a kept-alive
// connection as a replication POST arrives on it, before answering, gets
// the POST again on a new connection (as net/http does for a GET); a
// POST that is not replayable is not sent twice.
func TestReplayOnClosedKeepAlive(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{} // path -> requests received
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		n := seen[r.URL.Path]
		mu.Unlock()
		if r.Method == http.MethodPost && n == 1 {
			// Drop the connection without an answer, as a server
			// closing an idle connection the moment it is reused.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/db/_revs_diff":
			w.Write([]byte(`{}`))
		default:
			w.Write([]byte(`{"db_name":"db","update_seq":"0","doc_count":0}`))
		}
	}))
	defer srv.Close()
	d, err := New(Config{URL: srv.URL, Database: "db"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// One request first, so the POST goes on a kept-alive connection.
	if err := d.do(ctx, "info", "", http.MethodGet, d.dbURL("", nil), nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.RevsDiff(ctx, map[string][]string{"a": {"1-a"}}); err != nil {
		t.Fatalf("RevsDiff over a connection the server closed: %v", err)
	}
	mu.Lock()
	got := seen["/db/_revs_diff"]
	mu.Unlock()
	if got != 2 {
		t.Fatalf("_revs_diff received %d times, want 2 (dropped, then replayed)", got)
	}
	// A POST that is not a replication read or write is not replayed.
	if err := d.do(ctx, "other", "", http.MethodPost, d.dbURL("/_other", nil), map[string]any{}, nil); err == nil {
		t.Fatal("a non-replayable POST succeeded after its connection was dropped")
	}
	mu.Lock()
	got = seen["/db/_other"]
	mu.Unlock()
	if got != 1 {
		t.Fatalf("_other received %d times, want 1", got)
	}
}
