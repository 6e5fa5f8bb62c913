//go:build !js

package p2p

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// DefaultMaxStreamsPerPeer is ServeConfig.MaxStreamsPerPeer's default.
const DefaultMaxStreamsPerPeer = 16

// statusFrame is the answer of a stream that is not served: a refusal or
// "busy". Both protocols' answers read it.
type statusFrame struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// answerFunc answers one approved stream; it calls release once its work
// is done, before it writes the answer, so that a client whose next
// request follows the answer finds the slot free.
type answerFunc func(ctx context.Context, s network.Stream, remote peer.ID, log *slog.Logger, release func())

// server is what Serve and ServeChunks register: the approval check, the
// per-peer stream cap, the deadlines and the streams to reset at stop.
type server struct {
	h          host.Host
	db         Served
	allow      *AllowList
	timeout    time.Duration
	maxStreams int
	onRefused  func(peer.ID)
	meter      *Meter
	log        *slog.Logger
	protocols  []protocol.ID

	base   context.Context
	cancel context.CancelFunc
	active sync.WaitGroup // handlers running (stop waits for them)

	mu      sync.Mutex
	open    map[peer.ID]int // streams at work, per peer
	writing map[peer.ID]int // streams whose slot is released, still writing the answer
	streams map[network.Stream]struct{}
	big     int64 // bytes of large requests held (takeBig)
	bigMax  int64 // maxBigInFlight
	stopped bool
}

func newServer(h host.Host, cfg ServeConfig) *server {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultStreamTimeout
	}
	if cfg.MaxStreamsPerPeer <= 0 {
		cfg.MaxStreamsPerPeer = DefaultMaxStreamsPerPeer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	base, cancel := context.WithCancel(context.Background())
	return &server{h: h, db: cfg.DB, allow: cfg.Allow, timeout: cfg.Timeout, maxStreams: cfg.MaxStreamsPerPeer,
		onRefused: cfg.OnRefused, meter: cfg.Meter, log: cfg.Logger, base: base, cancel: cancel,
		bigMax: maxBigInFlight, open: map[peer.ID]int{}, writing: map[peer.ID]int{}, streams: map[network.Stream]struct{}{}}
}

// register sets the handler of proto.
func (sv *server) register(proto protocol.ID, answer answerFunc) {
	sv.protocols = append(sv.protocols, proto)
	sv.h.SetStreamHandler(proto, func(s network.Stream) { sv.handle(s, answer) })
}

// stop unregisters the protocols, resets the streams still open and
// waits for their handlers (so that nothing, not even a refusal's note in
// the peer book, happens after it returns).
func (sv *server) stop() {
	sv.mu.Lock()
	if sv.stopped {
		sv.mu.Unlock()
		return
	}
	sv.stopped = true
	open := make([]network.Stream, 0, len(sv.streams))
	for s := range sv.streams {
		open = append(open, s)
	}
	sv.mu.Unlock()
	for _, p := range sv.protocols {
		sv.h.RemoveStreamHandler(p)
	}
	sv.cancel()
	for _, s := range open {
		_ = s.Reset()
	}
	sv.active.Wait()
}

// track records an open stream; false once stopped.
func (sv *server) track(s network.Stream) bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.stopped {
		return false
	}
	sv.streams[s] = struct{}{}
	sv.active.Add(1)
	return true
}

func (sv *server) untrack(s network.Stream) {
	sv.mu.Lock()
	delete(sv.streams, s)
	sv.mu.Unlock()
	sv.active.Done()
}

// acquire takes one of remote's stream slots; false when all are taken.
// A stream whose work is done releases its slot before it writes the
// answer (toWriting) but still counts, against a second bound of as many
// streams again, until the answer is written: a peer that never reads its
// answers cannot have the server hold more of them than that.
func (sv *server) acquire(remote peer.ID) bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.open[remote] >= sv.maxStreams || sv.open[remote]+sv.writing[remote] >= 2*sv.maxStreams {
		return false
	}
	sv.open[remote]++
	return true
}

// toWriting moves one of remote's streams from its slot to the answers
// being written.
func (sv *server) toWriting(remote peer.ID) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	decr(sv.open, remote)
	sv.writing[remote]++
}

// done forgets one of remote's streams: at work, or writing when
// written is true.
func (sv *server) done(remote peer.ID, written bool) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if written {
		decr(sv.writing, remote)
	} else {
		decr(sv.open, remote)
	}
}

func decr(m map[peer.ID]int, id peer.ID) {
	if m[id]--; m[id] <= 0 {
		delete(m, id)
	}
}

// maxBigInFlight bounds the bytes of the bulk_docs requests over
// maxReplicateRequest that a server holds at once, all peers together:
// each may be a frame of MaxFrameSize, and a peer may open several
// streams.
const maxBigInFlight = 4 * MaxFrameSize

// takeBig reserves size bytes of the large requests' budget; false when
// it would go over maxBigInFlight.
func (sv *server) takeBig(size int64) bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.big+size > sv.bigMax {
		return false
	}
	sv.big += size
	return true
}

// releaseBig gives size bytes back to the budget.
func (sv *server) releaseBig(size int64) {
	if size == 0 {
		return
	}
	sv.mu.Lock()
	defer sv.mu.Unlock()
	sv.big -= size
}

// refusal is the message an unapproved peer reads: what to run, and where.
func refusal(self, remote peer.ID) string {
	return fmt.Sprintf("to approve this device, run `livesync p2p approve %s` on peer %s", remote, self)
}

// handle runs one stream: refused if the peer is not approved, "busy"
// beyond the peer's stream cap, else answered, all within the stream's
// deadline.
func (sv *server) handle(s network.Stream, answer answerFunc) {
	if !sv.track(s) {
		_ = s.Reset()
		return
	}
	defer sv.untrack(s)
	remote := s.Conn().RemotePeer()
	log := sv.log.With("peer", remote.String(), "protocol", string(s.Protocol()))
	ctx, cancel := context.WithTimeout(sv.base, sv.timeout)
	defer cancel()
	_ = s.SetDeadline(time.Now().Add(sv.timeout))
	if _, ok := sv.allow.Device(remote); !ok {
		log.Info("p2p: refused a stream from an unapproved peer")
		_, _ = writeJSON(s, statusFrame{Status: statusRefused, Error: refusal(sv.h.ID(), remote)})
		_ = s.Close()
		if sv.onRefused != nil {
			sv.onRefused(remote)
		}
		return
	}
	if !sv.acquire(remote) {
		log.Info("p2p: a peer opened too many streams at once", "limit", sv.maxStreams)
		n, _ := writeJSON(s, statusFrame{Status: statusBusy, Error: fmt.Sprintf("more than %d streams open at once; retry later", sv.maxStreams)})
		sv.meter.bytes(remote, 0, n)
		_ = s.Close()
		return
	}
	var released bool
	release := func() {
		if !released {
			released = true
			sv.toWriting(remote)
		}
	}
	defer func() { sv.done(remote, released) }()
	answer(ctx, s, remote, log, release)
	if sv.base.Err() != nil {
		_ = s.Reset()
		return
	}
	_ = s.Close()
}

// serveReplicate answers one replicate stream.
func (sv *server) serveReplicate(ctx context.Context, s network.Stream, remote peer.ID, log *slog.Logger, release func()) {
	var big int64
	req, n, drain, err := readRequestWithin(s, func(size int64) bool {
		if sv.takeBig(size) {
			big = size
			return true
		}
		return false
	})
	defer sv.releaseBig(big)
	sv.meter.bytes(remote, n, 0)
	var resp response
	var re *requestError
	switch {
	case errors.As(err, &re) && re.code == codeBusy:
		log.Info("p2p: a large write waits for memory", "err", re.msg)
		resp = response{Status: statusBusy, Error: re.msg}
	case errors.As(err, &re):
		log.Info("p2p: refused a request", "code", re.code, "err", re.msg)
		resp = response{Status: statusError, Code: re.code, Error: re.msg}
	case err != nil:
		log.Warn("p2p: unreadable request", "err", err)
		_ = s.Reset()
		return
	default:
		resp = sv.run(ctx, remote, req)
		if resp.Status == statusError {
			log.Info("p2p: request failed", "op", req.Op, "code", resp.Code, "err", resp.Error)
		}
	}
	if sv.base.Err() != nil {
		return
	}
	release()
	out, err := writeJSON(s, resp)
	if errors.Is(err, ErrFrameTooLarge) {
		out, err = writeJSON(s, response{Status: statusError, Code: codeTooLarge, Error: "the answer is larger than the frame limit; ask for less at once"})
	}
	if err != nil {
		log.Warn("p2p: writing an answer", "err", err)
	}
	sv.meter.bytes(remote, 0, out)
	if drain > 0 {
		// The answer is sent; read the rest of the oversize request so
		// that the client's write ends and it reads the answer.
		_ = s.CloseWrite()
		_, _ = io.CopyN(io.Discard, s, drain)
	}
}

// serveChunks answers one chunks stream.
func (sv *server) serveChunks(ctx context.Context, s network.Stream, remote peer.ID, log *slog.Logger, release func()) {
	var req chunksRequest
	n, err := readJSON(s, maxRequestSize, &req)
	if err != nil {
		log.Warn("p2p: bad chunks request", "err", err)
		_ = s.Reset()
		return
	}
	sv.meter.add(remote, func(c *PeerCounters) { c.BytesIn += uint64(n); c.ChunkRequests++ })
	var resp chunksResponse
	if sv.db.Chunks == nil {
		resp = chunksResponse{Status: statusError, Error: "this peer serves no chunks"}
	} else if resp, err = answerChunks(ctx, sv.db.Chunks, req.IDs); err != nil {
		log.Warn("p2p: chunks request failed", "err", err)
		resp = chunksResponse{Status: statusError, Error: err.Error()}
	}
	if sv.base.Err() != nil {
		return
	}
	release()
	out, err := writeJSON(s, resp)
	if errors.Is(err, ErrFrameTooLarge) {
		log.Warn("p2p: chunks answer too large", "ids", len(req.IDs))
		resp = chunksResponse{Status: statusError, Error: "answer larger than the frame limit"}
		out, err = writeJSON(s, resp)
	}
	if err != nil {
		log.Warn("p2p: writing chunks answer", "err", err)
	}
	sv.meter.add(remote, func(c *PeerCounters) { c.BytesOut += uint64(out); c.ChunksOut += uint64(len(resp.Found)) })
}
