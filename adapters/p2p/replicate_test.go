//go:build !js

package p2p

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/negotiate/negotiatetest"
	"github.com/livesync-go/livesync-go/engine/store"
)

// peerPair is a serving host and a client host on loopback, and the
// client's Remote of the server.
type peerPair struct {
	server, client host.Host
	allow          *AllowList
	remote         *Remote
	stop           func()
}

// servePeer serves db from a new host; approve puts the client host on
// its allow-list; mod adjusts the configuration.
func servePeer(t *testing.T, db Served, approve bool, mod func(*ServeConfig)) *peerPair {
	t.Helper()
	p := &peerPair{server: newTestHost(t), client: newTestHost(t), allow: NewAllowList()}
	if approve {
		p.allow.Allow(p.client.ID(), "test laptop")
	}
	cfg := ServeConfig{DB: db, Allow: p.allow, Timeout: 10 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	p.stop = Serve(p.server, cfg)
	t.Cleanup(p.stop)
	p.remote = NewRemote(p.client, addrInfo(p.server), RemoteOptions{Group: "tests", Timeout: 10 * time.Second})
	return p
}

func memStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.NewMemory(store.Options{Name: "peer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// The engine's endpoint conformance suite, over two real hosts.
func TestRemoteEndpointSuite(t *testing.T) {
	enginetest.EndpointSuite(t, func(t *testing.T) (engine.Endpoint, func()) {
		st := memStore(t)
		return servePeer(t, Served{Endpoint: st, Chunks: st, Records: StoreRecords(st, "")}, true, nil).remote.Endpoint(), nil
	})
}

// The chunk source conformance suite on Remote.Chunks; the broken source
// is a peer that does not approve the client.
func TestRemoteChunkSourceSuite(t *testing.T) {
	enginetest.ChunkSourceSuite(t,
		func(t *testing.T, chunks []engine.Chunk) (engine.ChunkSource, func()) {
			return servePeer(t, Served{Chunks: enginetest.NewMemChunks(chunks...)}, true, nil).remote.Chunks(nil), nil
		},
		func(t *testing.T) (engine.ChunkSource, func()) {
			return servePeer(t, Served{Chunks: enginetest.NewMemChunks()}, false, nil).remote.Chunks(nil), nil
		})
}

// The handshake port conformance suite on StoreRecords, at the standard
// ids and under a group's prefix, and on a Remote's Negotiate through a
// peer serving StoreRecords.
func TestStoreRecordsPortSuite(t *testing.T) {
	for _, prefix := range []string{"", "livesync-go/p2p/group/"} {
		t.Run(fmt.Sprintf("prefix=%q", prefix), func(t *testing.T) {
			negotiatetest.PortSuite(t, func(t *testing.T) negotiate.Port {
				return StoreRecords(memStore(t), prefix)
			}, negotiate.CouchDBChunkRange)
		})
	}
	t.Run("Remote", func(t *testing.T) {
		negotiatetest.PortSuite(t, func(t *testing.T) negotiate.Port {
			st := memStore(t)
			return servePeer(t, Served{Endpoint: st, Records: StoreRecords(st, "livesync-go/p2p/g/")}, true, nil).remote.Negotiate()
		}, negotiate.CouchDBChunkRange)
	})
}

// Under a prefix all three records are _local documents under it; at the
// standard ids the version is a replicated document.
func TestStoreRecordsPlacement(t *testing.T) {
	ctx := t.Context()
	st := memStore(t)
	p := StoreRecords(st, "livesync-go/p2p/g/")
	for _, r := range []negotiate.Record{negotiate.RecordSyncParameters, negotiate.RecordMilestone, negotiate.RecordVersion} {
		if _, err := p.Write(ctx, r, json.RawMessage(`{"x":1}`), ""); err != nil {
			t.Fatal(err)
		}
		id := "livesync-go/p2p/g/" + strings.TrimPrefix(string(r), "_local/")
		if _, err := st.GetLocal(ctx, id); err != nil {
			t.Fatalf("%s not at _local/%s: %v", r, id, err)
		}
	}
	if info, _ := st.Info(ctx); info.DocCount != 0 {
		t.Fatalf("a prefixed record is a replicated document: %d documents", info.DocCount)
	}
	p = StoreRecords(st, "")
	if _, err := p.Write(ctx, negotiate.RecordVersion, json.RawMessage(`{"version":12}`), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, negotiate.VersionDocID, store.GetOptions{}); err != nil {
		t.Fatalf("the version document: %v", err)
	}
}

// An unapproved peer is refused at once (an auth error wrapping
// ErrRefused, with the command to run), on every op, and reported to
// OnRefused; the store is never touched.
func TestReplicateRefused(t *testing.T) {
	var mu sync.Mutex
	var refused []peer.ID
	st := memStore(t)
	p := servePeer(t, Served{Endpoint: st, Records: StoreRecords(st, "")}, false, func(c *ServeConfig) {
		c.OnRefused = func(id peer.ID) { mu.Lock(); refused = append(refused, id); mu.Unlock() }
	})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := p.remote.Endpoint().Info(ctx)
	var ee *engine.Error
	if !errors.Is(err, ErrRefused) || !errors.As(err, &ee) || ee.Stage != engine.StageAuth {
		t.Fatalf("unapproved Info: %v; want an auth error wrapping ErrRefused", err)
	}
	if !strings.Contains(err.Error(), "livesync p2p approve "+p.client.ID().String()) {
		t.Fatalf("the refusal does not say what to run: %v", err)
	}
	if _, _, err := p.remote.Negotiate().Read(ctx, negotiate.RecordMilestone); !errors.Is(err, ErrRefused) {
		t.Fatalf("unapproved Read: %v", err)
	}
	docs := []json.RawMessage{json.RawMessage(`{"_id":"a","_rev":"1-a"}`)}
	if _, err := p.remote.Endpoint().BulkDocs(ctx, docs); !errors.Is(err, ErrRefused) {
		t.Fatalf("unapproved BulkDocs: %v", err)
	}
	if info, _ := st.Info(ctx); info.DocCount != 0 {
		t.Fatal("an unapproved peer wrote to the store")
	}
	// The server reports a refusal after answering it, so the last one
	// may still be on its way.
	waitUntil(t, 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(refused) >= 3 })
	mu.Lock()
	defer mu.Unlock()
	if len(refused) != 3 || refused[0] != p.client.ID() {
		t.Fatalf("OnRefused saw %v, want the client three times", refused)
	}
}

// Revoking a peer refuses its next stream.
func TestReplicateRevoked(t *testing.T) {
	st := memStore(t)
	p := servePeer(t, Served{Endpoint: st}, true, nil)
	ep := p.remote.Endpoint()
	if _, err := ep.Info(t.Context()); err != nil {
		t.Fatal(err)
	}
	p.allow.Revoke(p.client.ID())
	if _, err := ep.Info(t.Context()); !errors.Is(err, ErrRefused) {
		t.Fatalf("after the revocation: %v; want ErrRefused", err)
	}
}

// blockingEndpoint holds every Info until release is closed.
type blockingEndpoint struct {
	engine.Endpoint
	entered chan struct{}
	release chan struct{}
}

func (b *blockingEndpoint) Info(ctx context.Context) (engine.EndpointInfo, error) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return engine.EndpointInfo{}, ctx.Err()
	}
	return b.Endpoint.Info(ctx)
}

// Streams beyond a peer's cap are answered "busy" (a retryable transport
// error) without waiting for the others; stopping the server resets the
// streams still open.
func TestReplicateBusyAndStop(t *testing.T) {
	be := &blockingEndpoint{Endpoint: memStore(t), entered: make(chan struct{}, 4), release: make(chan struct{})}
	p := servePeer(t, Served{Endpoint: be, Chunks: enginetest.NewMemChunks()}, true, func(c *ServeConfig) { c.MaxStreamsPerPeer = 2 })
	ep := p.remote.Endpoint()
	errs := make(chan error, 2)
	for range 2 {
		go func() { _, err := ep.Info(t.Context()); errs <- err }()
	}
	<-be.entered
	<-be.entered
	_, err := ep.Info(t.Context())
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Stage != engine.StageTransport || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("a third stream: %v; want busy as a transport error", err)
	}
	// The cap counts both protocols.
	_, err = p.remote.Chunks(nil).FetchChunks(t.Context(), []engine.ChunkID{"h:a"})
	if !errors.As(err, &ee) || ee.Stage != engine.StageTransport || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("a chunks stream over the cap: %v; want busy as a transport error", err)
	}
	p.stop()
	for range 2 {
		if err := <-errs; err == nil {
			t.Fatal("a stream open when the server stopped was answered")
		}
	}
	close(be.release)
}

// A request over the limit is answered "too_large" (engine.ErrTooLarge
// on the client); bulk_docs may be larger than the other requests, up to
// the frame limit, which the client refuses to exceed.
func TestReplicateOversize(t *testing.T) {
	st := memStore(t)
	p := servePeer(t, Served{Endpoint: st}, true, nil)
	ep := p.remote.Endpoint()
	big := strings.Repeat("x", maxReplicateRequest)
	if err := ep.PutLocal(t.Context(), "checkpoint", json.RawMessage(`"`+big+`"`)); !errors.Is(err, engine.ErrTooLarge) {
		t.Fatalf("an oversize put_local: %v; want ErrTooLarge", err)
	}
	doc := json.RawMessage(`{"_id":"big","_rev":"1-b","data":"` + big + `"}`)
	if res, err := ep.BulkDocs(t.Context(), []json.RawMessage{doc}); err != nil || len(res) != 1 || res[0].Error != "" {
		t.Fatalf("a bulk_docs over the request limit: %+v, %v", res, err)
	}
	huge := json.RawMessage(`{"_id":"huge","_rev":"1-h","data":"` + strings.Repeat("y", MaxFrameSize) + `"}`)
	if _, err := ep.BulkDocs(t.Context(), []json.RawMessage{huge}); !errors.Is(err, engine.ErrTooLarge) {
		t.Fatalf("a bulk_docs over the frame limit: %v; want ErrTooLarge", err)
	}
	get := make([]engine.DocRev, MaxBulkGet+1)
	for i := range get {
		get[i] = engine.DocRev{ID: fmt.Sprint("d", i), Rev: "1-x"}
	}
	if _, err := ep.BulkGet(t.Context(), get); !errors.Is(err, engine.ErrTooLarge) {
		t.Fatalf("a bulk_get over its count limit: %v; want ErrTooLarge", err)
	}
	// The peer still answers after all that.
	if _, err := ep.Info(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A peer may not read or write this replica's own _local records.
func TestReplicateReservedLocal(t *testing.T) {
	st := memStore(t)
	p := servePeer(t, Served{Endpoint: st}, true, nil)
	for _, id := range []string{negotiate.SyncParametersLocalID, negotiate.NodeInfoLocalID, "livesync-go-cli", "livesync-go/p2p/g/x"} {
		if err := p.remote.Endpoint().PutLocal(t.Context(), id, json.RawMessage(`{}`)); err == nil {
			t.Fatalf("a peer wrote _local/%s", id)
		}
		if _, err := p.remote.Endpoint().GetLocal(t.Context(), id); err == nil || errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("a peer read _local/%s: %v", id, err)
		}
	}
}

// A peer that accepts the stream and never answers ends the request with
// a transport error at the client's deadline.
func TestReplicateSilentPeer(t *testing.T) {
	server, client := newTestHost(t), newTestHost(t)
	server.SetStreamHandler(ReplicateProtocol, func(s network.Stream) {
		<-t.Context().Done()
		s.Reset()
	})
	r := NewRemote(client, addrInfo(server), RemoteOptions{Timeout: 500 * time.Millisecond})
	_, err := r.Endpoint().Info(t.Context())
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Stage != engine.StageTransport {
		t.Fatalf("silent peer: %v; want a transport error", err)
	}
}

// The meter counts what each side exchanged.
func TestReplicateMeter(t *testing.T) {
	st := memStore(t)
	serverMeter, clientMeter := NewMeter(), NewMeter()
	p := servePeer(t, Served{Endpoint: st, Chunks: st}, true, func(c *ServeConfig) { c.Meter = serverMeter })
	r := NewRemote(p.client, addrInfo(p.server), RemoteOptions{Group: "g", Meter: clientMeter})
	if r.ID() != "p2p://g/"+p.server.ID().String() || r.Peer() != p.server.ID() {
		t.Fatalf("remote id %q", r.ID())
	}
	ctx := t.Context()
	docs := []json.RawMessage{json.RawMessage(`{"_id":"h:a","_rev":"1-a","type":"leaf","data":"A"}`), json.RawMessage(`{"_id":"n","_rev":"1-n","type":"plain"}`)}
	if _, err := r.Endpoint().BulkDocs(ctx, docs); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Endpoint().BulkGet(ctx, []engine.DocRev{{ID: "n", Rev: "1-n"}}); err != nil || len(got) != 1 {
		t.Fatalf("bulk get: %d, %v", len(got), err)
	}
	if res, err := r.Chunks(nil).FetchChunks(ctx, []engine.ChunkID{"h:a", "h:b"}); err != nil || len(res.Found) != 1 {
		t.Fatalf("fetch: %+v, %v", res, err)
	}
	s := serverMeter.Peer(p.client.ID())
	if s.DocsIn != 2 || s.DocsOut != 1 || s.ChunkRequests != 1 || s.ChunksOut != 1 || s.BytesIn == 0 || s.BytesOut == 0 {
		t.Fatalf("server's counters %+v", s)
	}
	c := clientMeter.Snapshot()[p.server.ID()]
	if c.DocsOut != 2 || c.DocsIn != 1 || c.ChunksIn != 1 || c.BytesIn == 0 || c.BytesOut == 0 {
		t.Fatalf("client's counters %+v", c)
	}
	if err := r.Reset(ctx); !errors.Is(err, ErrNoReset) {
		t.Fatalf("Reset: %v", err)
	}
}

// A stream that never sends its request is ended by the server's
// deadline, which frees the peer's slot.
func TestReplicateStreamDeadline(t *testing.T) {
	server, client := newTestHost(t), newTestHost(t)
	allow := NewAllowList()
	allow.Allow(client.ID(), "laptop")
	// 4 s: long enough to be seen busy on a loaded machine.
	sv := newServer(server, ServeConfig{DB: Served{Endpoint: memStore(t)}, Allow: allow, Timeout: 4 * time.Second, MaxStreamsPerPeer: 1})
	sv.register(ReplicateProtocol, sv.serveReplicate)
	t.Cleanup(sv.stop)
	held := func() bool {
		sv.mu.Lock()
		defer sv.mu.Unlock()
		return sv.open[client.ID()] == 1
	}
	r := NewRemote(client, addrInfo(server), RemoteOptions{Timeout: 10 * time.Second})
	s, err := client.NewStream(t.Context(), server.ID(), ReplicateProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Reset()
	if _, err := s.Write([]byte{0, 0}); err != nil { // half a header, then silence
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, held)
	start := time.Now()
	if _, err := r.Endpoint().Info(t.Context()); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("while the silent stream holds the slot: %v; want busy", err)
	}
	waitUntil(t, 10*time.Second, func() bool { return !held() })
	if _, err := r.Endpoint().Info(t.Context()); err != nil || time.Since(start) > 8*time.Second {
		t.Fatalf("after the silent stream's deadline: %v (%v)", err, time.Since(start))
	}
}

// Over QUIC alone the protocol works the same.
func TestReplicateQUIC(t *testing.T) {
	quic := "/ip4/127.0.0.1/udp/0/quic-v1"
	server, client := newTestHost(t, quic), newTestHost(t, quic)
	allow := NewAllowList()
	allow.Allow(client.ID(), "phone")
	st := memStore(t)
	t.Cleanup(Serve(server, ServeConfig{DB: Served{Endpoint: st, Records: StoreRecords(st, "")}, Allow: allow}))
	r := NewRemote(client, addrInfo(server), RemoteOptions{Group: "g"})
	docs := []json.RawMessage{json.RawMessage(`{"_id":"n","_rev":"1-n","type":"plain"}`)}
	if _, err := r.Endpoint().BulkDocs(t.Context(), docs); err != nil {
		t.Fatal(err)
	}
	if info, err := r.Endpoint().Info(t.Context()); err != nil || info.DocCount != 1 {
		t.Fatalf("info over QUIC: %+v, %v", info, err)
	}
	if _, err := negotiate.Handshake(t.Context(), r.Negotiate(), negotiate.HandshakeOptions{NodeID: "q", Range: r.ChunkRange(), Settings: negotiate.NewVaultTweaks()}); err != nil {
		t.Fatalf("handshake over QUIC: %v", err)
	}
}

// waitUntil polls cond until it holds, failing the test after limit.
func waitUntil(t *testing.T, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
