//go:build !js

package p2p

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"

	"github.com/livesync-go/livesync-go/engine"
)

// MaxIDsPerRequest is the most chunk ids one request may carry, as
// engine.ChunkSource's callers promise.
const MaxIDsPerRequest = 100

// maxRequestSize bounds a chunks request frame: a hundred ids fit many
// times over, and a peer cannot make the server allocate more.
const maxRequestSize = 64 << 10

// DefaultStreamTimeout is the deadline of one chunks stream, both sides,
// when none is configured.
const DefaultStreamTimeout = 30 * time.Second

// ErrRefused is the client's error when the peer refused the stream
// because this host is not on its allow-list.
var ErrRefused = errors.New("p2p: peer refused: this device is not approved on it")

// Response statuses.
const (
	statusOK      = "ok"
	statusRefused = "refused"
	statusError   = "error"
)

// chunksRequest is the one frame a client sends on a chunks stream.
type chunksRequest struct {
	IDs []engine.ChunkID `json:"ids"`
}

// wireChunk is one chunk on the wire.
type wireChunk struct {
	ID   engine.ChunkID `json:"id"`
	Data string         `json:"data"`
}

// chunksResponse is the one frame a server answers with. Status "refused"
// and "error" carry no chunks; Error is a short reason without data.
type chunksResponse struct {
	Status  string           `json:"status"`
	Error   string           `json:"error,omitempty"`
	Found   []wireChunk      `json:"found,omitempty"`
	Missing []engine.ChunkID `json:"missing,omitempty"`
}

// ChunkReader is what the chunks server needs from the local store (the
// read half of engine.LocalChunks).
type ChunkReader interface {
	GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error)
}

// ServerConfig configures ServeChunks.
type ServerConfig struct {
	// Store holds the chunks served. Required.
	Store ChunkReader
	// Allow lists the peers served; everyone else is refused. Nil refuses
	// every peer.
	Allow *AllowList
	// Timeout is each stream's deadline; zero means DefaultStreamTimeout.
	Timeout time.Duration
	// Logger receives one record per refused or failed stream (peer ids
	// and errors only, never chunk data). Nil discards them.
	Logger *slog.Logger
}

// ServeChunks registers the chunks protocol on h: an approved peer's
// request for chunk ids is answered from cfg.Store; a peer not on
// cfg.Allow gets a refusal frame and nothing else. It returns a function
// that unregisters the protocol.
func ServeChunks(h host.Host, cfg ServerConfig) (stop func()) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultStreamTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h.SetStreamHandler(ChunksProtocol, func(s network.Stream) { serveChunkStream(s, cfg) })
	return func() { h.RemoveStreamHandler(ChunksProtocol) }
}

// serveChunkStream answers one stream.
func serveChunkStream(s network.Stream, cfg ServerConfig) {
	defer s.Close()
	remote := s.Conn().RemotePeer()
	log := cfg.Logger.With("peer", remote.String())
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	_ = s.SetDeadline(time.Now().Add(cfg.Timeout))
	if _, ok := cfg.Allow.Device(remote); !ok {
		log.Info("p2p: refused a chunks stream from an unapproved peer")
		_ = writeJSON(s, chunksResponse{Status: statusRefused, Error: "not approved"})
		return
	}
	var req chunksRequest
	if err := readJSON(s, maxRequestSize, &req); err != nil {
		log.Warn("p2p: bad chunks request", "err", err)
		_ = s.Reset()
		return
	}
	resp, err := answerChunks(ctx, cfg.Store, req.IDs)
	if err != nil {
		log.Warn("p2p: chunks request failed", "err", err)
		resp = chunksResponse{Status: statusError, Error: err.Error()}
	}
	if err := writeJSON(s, resp); errors.Is(err, ErrFrameTooLarge) {
		log.Warn("p2p: chunks answer too large", "ids", len(req.IDs))
		_ = writeJSON(s, chunksResponse{Status: statusError, Error: "answer larger than the frame limit"})
	} else if err != nil {
		log.Warn("p2p: writing chunks answer", "err", err)
	}
}

// answerChunks reads ids from store and splits them into found and
// missing, every id exactly once.
func answerChunks(ctx context.Context, store ChunkReader, ids []engine.ChunkID) (chunksResponse, error) {
	if len(ids) > MaxIDsPerRequest {
		return chunksResponse{}, fmt.Errorf("%d ids in one request, at most %d", len(ids), MaxIDsPerRequest)
	}
	seen := make(map[engine.ChunkID]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			return chunksResponse{}, fmt.Errorf("id %q twice in one request", id)
		}
		seen[id] = true
	}
	resp := chunksResponse{Status: statusOK}
	if len(ids) == 0 {
		return resp, nil
	}
	got, err := store.GetChunks(ctx, ids)
	if err != nil {
		return chunksResponse{}, errors.New("local store failed")
	}
	for _, id := range ids {
		if c, ok := got[id]; ok {
			resp.Found = append(resp.Found, wireChunk{ID: id, Data: c.Data})
		} else {
			resp.Missing = append(resp.Missing, id)
		}
	}
	return resp, nil
}

// ChunkClient is an engine.ChunkSource that fetches chunks from one peer
// over the chunks protocol. Its throttle key is the peer id. It is safe
// for concurrent use; every FetchChunks opens its own stream.
type ChunkClient struct {
	host    host.Host
	peer    peer.ID
	timeout time.Duration
}

var _ engine.ChunkSource = (*ChunkClient)(nil)

// NewChunkClient returns a client of the peer remote, reached through h;
// remote's addresses are added to h's peerstore. timeout is each stream's
// deadline (zero means DefaultStreamTimeout).
func NewChunkClient(h host.Host, remote peer.AddrInfo, timeout time.Duration) *ChunkClient {
	if timeout <= 0 {
		timeout = DefaultStreamTimeout
	}
	h.Peerstore().AddAddrs(remote.ID, remote.Addrs, peerstore.PermanentAddrTTL)
	return &ChunkClient{host: h, peer: remote.ID, timeout: timeout}
}

// CanFetchDirect reports true: a peer serves chunks by id.
func (c *ChunkClient) CanFetchDirect() bool { return true }

// ThrottleKey returns the peer id.
func (c *ChunkClient) ThrottleKey() string { return c.peer.String() }

// FetchChunks asks the peer for ids on a new stream. A refusal is
// ErrRefused; an answer that does not account for every id exactly once
// is an error.
func (c *ChunkClient) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	if err := ctx.Err(); err != nil {
		return engine.FetchResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.roundTrip(ctx, ids)
	if err != nil {
		if ctxErr := context.Cause(ctx); ctx.Err() != nil && !errors.Is(err, ErrRefused) {
			return engine.FetchResult{}, fmt.Errorf("p2p: fetch from %s: %w", c.peer, ctxErr)
		}
		return engine.FetchResult{}, err
	}
	return checkAnswer(ids, resp)
}

// roundTrip sends one request and reads the answer; ctx's end resets the
// stream so a silent peer never hangs the caller.
func (c *ChunkClient) roundTrip(ctx context.Context, ids []engine.ChunkID) (chunksResponse, error) {
	s, err := c.host.NewStream(ctx, c.peer, ChunksProtocol)
	if err != nil {
		return chunksResponse{}, fmt.Errorf("p2p: open stream to %s: %w", c.peer, err)
	}
	defer s.Close()
	stopReset := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stopReset()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	if ids == nil {
		ids = []engine.ChunkID{}
	}
	if err := writeJSON(s, chunksRequest{IDs: ids}); err != nil {
		return chunksResponse{}, c.readErr(s, err)
	}
	_ = s.CloseWrite()
	var resp chunksResponse
	if err := readJSON(s, MaxFrameSize, &resp); err != nil {
		return chunksResponse{}, fmt.Errorf("p2p: chunks answer from %s: %w", c.peer, err)
	}
	switch resp.Status {
	case statusOK:
		return resp, nil
	case statusRefused:
		return chunksResponse{}, fmt.Errorf("%w (peer %s)", ErrRefused, c.peer)
	default:
		return chunksResponse{}, fmt.Errorf("p2p: peer %s failed: %s", c.peer, resp.Error)
	}
}

// readErr turns a failed request write into an error: a refusing server
// may already have answered and closed, so its frame is read if present.
func (c *ChunkClient) readErr(s network.Stream, writeErr error) error {
	var resp chunksResponse
	if readJSON(s, MaxFrameSize, &resp) == nil && resp.Status == statusRefused {
		return fmt.Errorf("%w (peer %s)", ErrRefused, c.peer)
	}
	return fmt.Errorf("p2p: chunks request to %s: %w", c.peer, writeErr)
}

// checkAnswer checks that resp accounts for every requested id exactly
// once and turns it into an engine.FetchResult.
func checkAnswer(ids []engine.ChunkID, resp chunksResponse) (engine.FetchResult, error) {
	want := make(map[engine.ChunkID]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	res := engine.FetchResult{Missing: resp.Missing}
	for _, c := range resp.Found {
		res.Found = append(res.Found, engine.Chunk{ID: c.ID, Data: c.Data})
	}
	answered := len(res.Found) + len(res.Missing)
	for _, c := range res.Found {
		if !want[c.ID] {
			return engine.FetchResult{}, fmt.Errorf("p2p: peer answered id %q not asked or twice", c.ID)
		}
		delete(want, c.ID)
	}
	for _, id := range res.Missing {
		if !want[id] {
			return engine.FetchResult{}, fmt.Errorf("p2p: peer answered id %q not asked or twice", id)
		}
		delete(want, id)
	}
	if len(want) != 0 || answered != len(ids) {
		return engine.FetchResult{}, fmt.Errorf("p2p: peer left %d of %d ids unanswered", len(want), len(ids))
	}
	return res, nil
}
