//go:build !js

package p2p

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// writingCount is how many of the server's streams are writing answers.
func (sv *server) writingCount() int {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	n := 0
	for _, c := range sv.writing {
		n += c
	}
	return n
}

// A peer that asks for large answers and never reads them cannot make
// the server hold more than twice its stream cap of answers: a slot is
// released before the answer is written, but the answer still counts
// until it is written.
func TestReplicateUnreadAnswersBounded(t *testing.T) {
	st := memStore(t)
	big := strings.Repeat("z", 2<<20)
	doc := json.RawMessage(`{"_id":"big","_rev":"1-b","data":"` + big + `"}`)
	if _, err := st.BulkDocs(t.Context(), []json.RawMessage{doc}); err != nil {
		t.Fatal(err)
	}
	// TCP: yamux bounds each stream's window, not the connection's, so
	// the unread answers do not hold back the fifth stream's.
	server, client := newTestHost(t, "/ip4/127.0.0.1/tcp/0"), newTestHost(t, "/ip4/127.0.0.1/tcp/0")
	allow := NewAllowList()
	allow.Allow(client.ID(), "greedy")
	sv := newServer(server, ServeConfig{DB: Served{Endpoint: st}, Allow: allow, Timeout: 20 * time.Second, MaxStreamsPerPeer: 2})
	sv.register(ReplicateProtocol, sv.serveReplicate)
	t.Cleanup(sv.stop)
	client.Peerstore().AddAddrs(server.ID(), server.Addrs(), time.Hour)
	open := func() network.Stream {
		s, err := client.NewStream(t.Context(), server.ID(), ReplicateProtocol)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Reset() })
		if _, err := writeJSON(s, request{Op: opBulkGet, Get: []wireDocRev{{"big", "1-b"}}}); err != nil {
			t.Fatal(err)
		}
		_ = s.CloseWrite()
		return s
	}
	for i := range 4 {
		open()
		waitUntil(t, 10*time.Second, func() bool { return sv.writingCount() == i+1 })
	}
	s := open()
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	var resp response
	if _, err := readJSON(s, MaxFrameSize, &resp); err != nil || resp.Status != statusBusy {
		t.Fatalf("a fifth stream while four answers wait unread: %+v, %v; want busy", resp.Status, err)
	}
}
