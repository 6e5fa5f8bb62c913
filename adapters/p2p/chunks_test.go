//go:build !js

package p2p

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
)

// newTestHost starts a host on loopback (TCP and QUIC) closed when the
// test ends.
func newTestHost(t testing.TB, listen ...string) host.Host {
	t.Helper()
	h, err := NewHost(t.Context(), Config{ListenAddrs: listen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func addrInfo(h host.Host) peer.AddrInfo {
	return peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}
}

// countingStore counts the reads that reach the store.
type countingStore struct {
	ChunkReader
	reads atomic.Int64
}

func (s *countingStore) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	s.reads.Add(1)
	return s.ChunkReader.GetChunks(ctx, ids)
}

// servePair starts a server holding chunks and a client host; approve
// says whether the server approves the client.
func servePair(t *testing.T, store ChunkReader, approve bool, clientListen ...string) *ChunkClient {
	server, client := newTestHost(t), newTestHost(t, clientListen...)
	allow := NewAllowList()
	if approve {
		allow.Allow(client.ID(), "test laptop")
	}
	t.Cleanup(ServeChunks(server, ServerConfig{Store: store, Allow: allow}))
	return NewChunkClient(client, addrInfo(server), 10*time.Second)
}

// The conformance suite of engine.ChunkSource, over two real hosts on
// loopback; the broken source is a peer that does not approve the client.
func TestChunkClientSuite(t *testing.T) {
	enginetest.ChunkSourceSuite(t,
		func(t *testing.T, chunks []engine.Chunk) (engine.ChunkSource, func()) {
			return servePair(t, enginetest.NewMemChunks(chunks...), true), nil
		},
		func(t *testing.T) (engine.ChunkSource, func()) {
			return servePair(t, enginetest.NewMemChunks(), false), nil
		})
}

// Over QUIC only, the same fetch works.
func TestChunkClientQUIC(t *testing.T) {
	chunk := engine.Chunk{ID: "h:quic", Data: "over quic"}
	server := newTestHost(t, "/ip4/127.0.0.1/udp/0/quic-v1")
	client := newTestHost(t, "/ip4/127.0.0.1/udp/0/quic-v1")
	allow := NewAllowList()
	allow.Allow(client.ID(), "phone")
	t.Cleanup(ServeChunks(server, ServerConfig{Store: enginetest.NewMemChunks(chunk), Allow: allow}))
	src := NewChunkClient(client, addrInfo(server), 10*time.Second)
	res, err := src.FetchChunks(t.Context(), []engine.ChunkID{chunk.ID})
	if err != nil || len(res.Found) != 1 || res.Found[0] != chunk {
		t.Fatalf("quic fetch: %+v, %v", res, err)
	}
	if src.ThrottleKey() != server.ID().String() {
		t.Fatalf("throttle key %q, want the peer id", src.ThrottleKey())
	}
}

// An unapproved peer gets ErrRefused, promptly, and the store is never
// read; approving it later lets it fetch, revoking refuses it again.
// Over TCP and over QUIC.
func TestChunksRefusedUnapproved(t *testing.T) {
	for _, listen := range []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"} {
		t.Run(listen, func(t *testing.T) { testRefused(t, listen) })
	}
}

func testRefused(t *testing.T, listen string) {
	chunk := engine.Chunk{ID: "h:secret", Data: "private"}
	store := &countingStore{ChunkReader: enginetest.NewMemChunks(chunk)}
	server, client := newTestHost(t, listen), newTestHost(t, listen)
	allow := NewAllowList()
	t.Cleanup(ServeChunks(server, ServerConfig{Store: store, Allow: allow}))
	src := NewChunkClient(client, addrInfo(server), time.Minute)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := src.FetchChunks(ctx, []engine.ChunkID{chunk.ID})
	if !errors.Is(err, ErrRefused) || len(res.Found)+len(res.Missing) != 0 {
		t.Fatalf("unapproved fetch: %+v, %v; want ErrRefused", res, err)
	}
	if n := store.reads.Load(); n != 0 {
		t.Fatalf("the store was read %d times for an unapproved peer", n)
	}

	allow.Allow(client.ID(), "laptop")
	if res, err := src.FetchChunks(ctx, []engine.ChunkID{chunk.ID}); err != nil || len(res.Found) != 1 {
		t.Fatalf("approved fetch: %+v, %v", res, err)
	}
	allow.Revoke(client.ID())
	if _, err := src.FetchChunks(ctx, []engine.ChunkID{chunk.ID}); !errors.Is(err, ErrRefused) {
		t.Fatalf("revoked fetch: %v; want ErrRefused", err)
	}
}

// A peer that accepts the stream and never answers does not hang the
// client: the stream deadline ends the fetch with an error.
func TestChunkClientSilentPeer(t *testing.T) {
	server, client := newTestHost(t), newTestHost(t)
	server.SetStreamHandler(ChunksProtocol, func(s network.Stream) {
		<-t.Context().Done()
		s.Reset()
	})
	src := NewChunkClient(client, addrInfo(server), time.Second)
	res, err := src.FetchChunks(t.Context(), []engine.ChunkID{"h:a"})
	if err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("silent peer: %+v, %v; want a deadline error", res, err)
	}
}

// Requests breaking the protocol's limits get an error answer, and the
// client rejects answers that do not account for every id once.
func TestChunksProtocolChecks(t *testing.T) {
	store := enginetest.NewMemChunks(engine.Chunk{ID: "h:a", Data: "a"})
	if _, err := answerChunks(t.Context(), store, []engine.ChunkID{"h:a", "h:a"}); err == nil {
		t.Error("a duplicate id was accepted")
	}
	if _, err := answerChunks(t.Context(), store, make([]engine.ChunkID, MaxIDsPerRequest+1)); err == nil {
		t.Error("more than MaxIDsPerRequest ids were accepted")
	}
	bad := []chunksResponse{
		{Status: statusOK, Found: []wireChunk{{ID: "h:a"}}, Missing: []engine.ChunkID{"h:a"}},
		{Status: statusOK, Missing: []engine.ChunkID{"h:x"}},
		{Status: statusOK},
	}
	for i, resp := range bad {
		if _, err := checkAnswer([]engine.ChunkID{"h:a"}, resp); err == nil {
			t.Errorf("answer %d accepted: %+v", i, resp)
		}
	}
}
