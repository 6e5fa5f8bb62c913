//go:build !js

package p2p

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/livesync-go/livesync-go/engine"
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

// A peer's _local documents (its checkpoints) are its own: another
// approved peer neither reads nor overwrites them, and neither reaches
// the checkpoints the serving replica keeps of its own syncs.
func TestReplicateLocalPerPeer(t *testing.T) {
	st := memStore(t)
	const cp = "livesync-go-0123456789abcdef0123456789abcdef"
	if err := st.PutLocal(t.Context(), cp, json.RawMessage(`{"last_seq":"own"}`)); err != nil {
		t.Fatal(err)
	}
	p := servePeer(t, Served{Endpoint: st}, true, nil)
	other := newTestHost(t)
	p.allow.Allow(other.ID(), "other laptop")
	b := NewRemote(other, addrInfo(p.server), RemoteOptions{Group: "tests"}).Endpoint()
	a := p.remote.Endpoint()
	if _, err := a.GetLocal(t.Context(), cp); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a peer read the replica's own checkpoint: %v", err)
	}
	if err := a.PutLocal(t.Context(), cp, json.RawMessage(`{"last_seq":"a"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetLocal(t.Context(), cp); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a peer read another's checkpoint: %v", err)
	}
	if err := b.PutLocal(t.Context(), cp, json.RawMessage(`{"last_seq":"b"}`)); err != nil {
		t.Fatal(err)
	}
	for ep, want := range map[engine.Endpoint]string{a: `"a"`, b: `"b"`} {
		if got, err := ep.GetLocal(t.Context(), cp); err != nil || !strings.Contains(string(got), want) {
			t.Fatalf("a peer's own checkpoint: %s, %v; want %s", got, err, want)
		}
	}
	if got, err := st.GetLocal(t.Context(), cp); err != nil || !strings.Contains(string(got), `"own"`) {
		t.Fatalf("the replica's own checkpoint: %s, %v", got, err)
	}
}

// bulkHold holds every BulkDocs until release is closed.
type bulkHold struct {
	engine.Endpoint
	entered chan struct{}
	release chan struct{}
}

func (b *bulkHold) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.Endpoint.BulkDocs(ctx, docs)
}

// Large bulk_docs requests are held within a memory budget, all peers
// together: one over it is answered "busy" (a retryable transport error)
// while the others are at work, and goes through once they are done.
func TestReplicateLargeWritesBudget(t *testing.T) {
	hold := &bulkHold{Endpoint: memStore(t), entered: make(chan struct{}, 1), release: make(chan struct{})}
	server, client := newTestHost(t), newTestHost(t)
	allow := NewAllowList()
	allow.Allow(client.ID(), "writer")
	sv := newServer(server, ServeConfig{DB: Served{Endpoint: hold}, Allow: allow, Timeout: 20 * time.Second})
	sv.bigMax = 6 << 20
	sv.register(ReplicateProtocol, sv.serveReplicate)
	t.Cleanup(sv.stop)
	ep := NewRemote(client, addrInfo(server), RemoteOptions{Timeout: 20 * time.Second}).Endpoint()
	doc := func(id string) []json.RawMessage {
		return []json.RawMessage{json.RawMessage(`{"_id":"` + id + `","_rev":"1-a","d":"` + strings.Repeat("x", 5<<20) + `"}`)}
	}
	first := make(chan error, 1)
	go func() { _, err := ep.BulkDocs(t.Context(), doc("a")); first <- err }()
	<-hold.entered
	_, err := ep.BulkDocs(t.Context(), doc("b"))
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Stage != engine.StageTransport || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("a second large write over the budget: %v; want busy", err)
	}
	close(hold.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	go func() { <-hold.entered }()
	if _, err := ep.BulkDocs(t.Context(), doc("b")); err != nil {
		t.Fatalf("a large write after the others: %v", err)
	}
}
