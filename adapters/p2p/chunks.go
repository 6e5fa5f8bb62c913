//go:build !js

package p2p

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/decorate"
	"github.com/livesync-go/livesync-go/engine/livesync"
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

// wireChunk is one chunk on the wire: its data in the remote form and,
// when the serving side knows it (ChunkRevReader), the chunk document's
// revision. Rev is optional within ChunksProtocol: a peer that predates
// it omits it, and a client that predates it ignores it.
type wireChunk struct {
	ID   engine.ChunkID `json:"id"`
	Data string         `json:"data"`
	Rev  string         `json:"rev,omitempty"`
}

// chunksResponse is the one frame a server answers with. Status "refused"
// and "error" carry no chunks; Error is a short reason without data.
type chunksResponse struct {
	Status  string      `json:"status"`
	Error   string      `json:"error,omitempty"`
	Found   chunkList   `json:"found,omitempty"`
	Missing chunkIDList `json:"missing,omitempty"`
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
// that unregisters the protocol. Serve registers it beside the replicate
// protocol.
func ServeChunks(h host.Host, cfg ServerConfig) (stop func()) {
	sv := newServer(h, ServeConfig{DB: Served{Chunks: cfg.Store}, Allow: cfg.Allow, Timeout: cfg.Timeout, Logger: cfg.Logger})
	sv.register(ChunksProtocol, sv.serveChunks)
	return sv.stop
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
	addRevs(ctx, store, resp.Found)
	return resp, nil
}

// ChunkClient is an engine.ChunkSource that fetches chunks from one peer
// over the chunks protocol. Its throttle key is the peer id. It is safe
// for concurrent use; every FetchChunks opens its own stream.
type ChunkClient struct {
	host    host.Host
	peer    peer.ID
	timeout time.Duration
	codec   *livesync.Codec // decodes the remote form; nil: as served
	meter   *Meter
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
			return engine.FetchResult{}, &engine.Error{Op: "p2p fetch chunks", Stage: engine.StageTransport,
				Err: fmt.Errorf("peer %s: %w", c.peer, ctxErr)}
		}
		return engine.FetchResult{}, err
	}
	res, err := checkAnswer(ids, resp)
	if err != nil {
		return engine.FetchResult{}, &engine.Error{Op: "p2p fetch chunks", Stage: engine.StageProtocol, Err: err}
	}
	c.meter.add(c.peer, func(pc *PeerCounters) { pc.ChunksIn += uint64(len(res.Found)) })
	return c.decode(res)
}

// decode turns the chunks the peer served in the remote form into
// plaintext. The remote form keeps an end-to-end encrypted chunk ("h:+")
// encrypted, always; compressed data is recognised by its mark.
func (c *ChunkClient) decode(res engine.FetchResult) (engine.FetchResult, error) {
	if c.codec == nil {
		return res, nil
	}
	for i, ch := range res.Found {
		d := livesync.ChunkDoc(livesync.Chunk{ID: ch.ID, Data: ch.Data})
		if decorate.IsE2EEChunkID(ch.ID) {
			d["e_"] = json.RawMessage("true")
		}
		d, err := c.codec.DecodeRemote(d)
		if err != nil {
			return engine.FetchResult{}, err
		}
		plain, err := livesync.ParseChunk(d)
		if err != nil {
			return engine.FetchResult{}, err
		}
		res.Found[i] = engine.Chunk{ID: ch.ID, Data: plain.Data}
	}
	return res, nil
}

// roundTrip sends one request and reads the answer; ctx's end resets the
// stream so a silent peer never hangs the caller.
func (c *ChunkClient) roundTrip(ctx context.Context, ids []engine.ChunkID) (chunksResponse, error) {
	s, err := c.host.NewStream(network.WithAllowLimitedConn(ctx, "livesync-chunks"), c.peer, ChunksProtocol)
	if err != nil {
		return chunksResponse{}, c.transport(fmt.Errorf("open stream: %w", err))
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
	n, err := writeJSON(s, chunksRequest{IDs: ids})
	c.meter.bytes(c.peer, 0, n)
	if err != nil {
		return chunksResponse{}, c.readErr(s, err)
	}
	_ = s.CloseWrite()
	var resp chunksResponse
	n, err = readJSON(s, MaxFrameSize, &resp)
	c.meter.bytes(c.peer, n, 0)
	if err != nil {
		return chunksResponse{}, c.transport(fmt.Errorf("read answer: %w", err))
	}
	switch resp.Status {
	case statusOK:
		return resp, nil
	case statusRefused:
		return chunksResponse{}, refusedError("fetch chunks", c.peer, resp.Error)
	case statusBusy:
		return chunksResponse{}, c.transport(fmt.Errorf("busy: %s", resp.Error))
	default:
		return chunksResponse{}, &engine.Error{Op: "p2p fetch chunks", Stage: engine.StageStorage,
			Err: fmt.Errorf("peer %s failed: %s", c.peer, resp.Error)}
	}
}

func (c *ChunkClient) transport(err error) error {
	return &engine.Error{Op: "p2p fetch chunks", Stage: engine.StageTransport, Err: fmt.Errorf("peer %s: %w", c.peer, err)}
}

// readErr turns a failed request write into an error: a refusing server
// may already have answered and closed, so its frame is read if present.
func (c *ChunkClient) readErr(s network.Stream, writeErr error) error {
	var resp chunksResponse
	if _, err := readJSON(s, MaxFrameSize, &resp); err == nil && resp.Status == statusRefused {
		return refusedError("fetch chunks", c.peer, resp.Error)
	}
	return c.transport(fmt.Errorf("write request: %w", writeErr))
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
