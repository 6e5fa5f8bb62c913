//go:build !js

package p2p

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// peerClient sends replicate requests to one peer, one stream each.
type peerClient struct {
	host    host.Host
	peer    peer.ID
	timeout time.Duration
	meter   *Meter
	// slots bounds the requests in flight to the peer (nil: unbounded).
	slots chan struct{}
}

// maxClientStreams is the replicate requests one remote has in flight to
// its peer. A pipelined replication would otherwise open a stream for
// every page it fetches (up to batches_limit, 25), and a peer answers
// "busy" past its own limit (DefaultMaxStreamsPerPeer, 16), which also
// counts chunk streams and live feeds: half of it is left for those.
const maxClientStreams = DefaultMaxStreamsPerPeer / 2

func newPeerClient(h host.Host, id peer.ID, timeout time.Duration, meter *Meter) *peerClient {
	return &peerClient{host: h, peer: id, timeout: timeout, meter: meter, slots: make(chan struct{}, maxClientStreams)}
}

// call sends req and reads the answer into resp. The caller's ended ctx
// is its error; a failed stream is a transport error (retryable), a
// refusal an auth error wrapping ErrRefused, an error answer the engine
// error its code names.
func (c *peerClient) call(ctx context.Context, req request, resp *response) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.slots != nil {
		select {
		case c.slots <- struct{}{}:
			defer func() { <-c.slots }()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	sctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := c.roundTrip(sctx, req, resp)
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func (c *peerClient) transport(op string, err error) error {
	return &engine.Error{Op: "p2p " + op, Stage: engine.StageTransport, Err: fmt.Errorf("peer %s: %w", c.peer, err)}
}

func (c *peerClient) roundTrip(ctx context.Context, req request, resp *response) error {
	s, err := c.host.NewStream(network.WithAllowLimitedConn(ctx, "livesync-replicate"), c.peer, ReplicateProtocol)
	if err != nil {
		return c.transport(req.Op, fmt.Errorf("open stream: %w", err))
	}
	defer s.Close()
	// The stream ends with ctx: reset only once ctx is done, so that a
	// caller whose own deadline passed sees its ctx's error.
	stopReset := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stopReset()
	n, werr := writeJSON(s, req)
	if errors.Is(werr, ErrFrameTooLarge) {
		_ = s.Reset()
		return fmt.Errorf("p2p %s: %w: %w", req.Op, engine.ErrTooLarge, werr)
	}
	c.meter.bytes(c.peer, 0, n)
	if werr == nil {
		_ = s.CloseWrite()
	}
	// A server that refuses may answer before reading the request, so
	// the answer is read even after a failed write.
	in, rerr := readJSON(s, MaxFrameSize, resp)
	c.meter.bytes(c.peer, in, 0)
	if rerr != nil {
		if werr != nil {
			return c.transport(req.Op, fmt.Errorf("write request: %w", werr))
		}
		return c.transport(req.Op, fmt.Errorf("read answer: %w", rerr))
	}
	return c.status(req.Op, resp.Status, resp.Code, resp.Error)
}

// status turns an answer's status into the client's error.
func (c *peerClient) status(op, status, code, msg string) error {
	switch status {
	case statusOK:
		return nil
	case statusRefused:
		return refusedError(op, c.peer, msg)
	case statusBusy:
		return c.transport(op, fmt.Errorf("busy: %s", msg))
	case statusError:
		return answerError(op, code, msg)
	}
	return &engine.Error{Op: "p2p " + op, Stage: engine.StageProtocol, Err: fmt.Errorf("peer %s answered status %.32q", c.peer, status)}
}

// refusedError is the error of a refused stream: permanent, an auth
// failure wrapping ErrRefused, with the peer's instructions.
func refusedError(op string, p peer.ID, msg string) error {
	if msg == "" {
		msg = "not approved"
	}
	return &engine.Error{Op: "p2p " + op, Stage: engine.StageAuth, Err: fmt.Errorf("%w (peer %s: %s)", ErrRefused, p, msg)}
}

// streamEndpoint is engine.Endpoint over the replicate protocol.
type streamEndpoint struct{ c *peerClient }

var _ engine.Endpoint = streamEndpoint{}

// Info reads the peer's database information.
func (e streamEndpoint) Info(ctx context.Context) (engine.EndpointInfo, error) {
	var resp response
	if err := e.c.call(ctx, request{Op: opInfo}, &resp); err != nil {
		return engine.EndpointInfo{}, err
	}
	if resp.Info == nil {
		return engine.EndpointInfo{}, e.protocolErr(opInfo, "no info")
	}
	if len(resp.Info.UpdateSeq) > maxSeqLen || len(resp.Info.Name) > maxSeqLen {
		return engine.EndpointInfo{}, e.protocolErr(opInfo, "a name or sequence longer than any peer's")
	}
	return engine.EndpointInfo{Name: resp.Info.Name, UpdateSeq: resp.Info.UpdateSeq, DocCount: resp.Info.DocCount}, nil
}

func (e streamEndpoint) protocolErr(op, msg string) error {
	return &engine.Error{Op: "p2p " + op, Stage: engine.StageProtocol, Err: fmt.Errorf("peer %s: %s", e.c.peer, msg)}
}

// maxSeqLen bounds a sequence a peer answers with (a page's last_seq, a
// row's seq): the client keeps it, in its checkpoints too.
const maxSeqLen = 4096

// minLongpollGap is the least time between two longpoll requests.
const minLongpollGap = time.Second

// Changes reads one page; with Wait it asks again until a change
// arrives, the feed's sequence moves or ctx ends. An empty longpoll
// answer that comes back sooner than half the wait asked for (and
// minLongpollGap) is followed by a pause until then, so that a peer
// answering at once cannot make the client ask again and again.
func (e streamEndpoint) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	if req.Limit <= 0 || req.Limit > MaxChangesLimit {
		req.Limit = MaxChangesLimit
	}
	for {
		wr := request{Op: opChanges, Since: req.Since, Limit: req.Limit, Selector: req.Selector, Wait: req.Wait}
		var wait time.Duration
		if req.Wait {
			wait = e.c.timeout * 3 / 4
			if dl, ok := ctx.Deadline(); ok {
				wait = min(wait, time.Until(dl))
			}
			wr.WaitMS = max(wait.Milliseconds(), 1)
		}
		start := time.Now()
		var resp response
		if err := e.c.call(ctx, wr, &resp); err != nil {
			return engine.ChangesPage{}, err
		}
		page, err := e.changesPage(req, resp)
		if err != nil {
			return engine.ChangesPage{}, err
		}
		if !req.Wait || len(page.Results) > 0 || (page.LastSeq != "" && page.LastSeq != req.Since) {
			if page.LastSeq == "" {
				page.LastSeq = req.Since
			}
			return page, nil
		}
		if err := pause(ctx, start.Add(max(wait/2, minLongpollGap))); err != nil {
			return engine.ChangesPage{}, err
		}
	}
}

// changesPage checks a changes answer: at most the rows asked for, each
// with its id and revisions, and sequences of sane length.
func (e streamEndpoint) changesPage(req engine.ChangesRequest, resp response) (engine.ChangesPage, error) {
	if len(resp.Results) > req.Limit {
		return engine.ChangesPage{}, e.protocolErr(opChanges, "more rows than the limit")
	}
	if len(resp.LastSeq) > maxSeqLen {
		return engine.ChangesPage{}, e.protocolErr(opChanges, "a last sequence longer than any peer's")
	}
	page := engine.ChangesPage{LastSeq: resp.LastSeq, Pending: -1, Results: make([]engine.Change, 0, len(resp.Results))}
	if resp.Pending != nil {
		page.Pending = max(*resp.Pending, -1)
	}
	for _, c := range resp.Results {
		if c.ID == "" || len(c.Revs) == 0 {
			return engine.ChangesPage{}, e.protocolErr(opChanges, "a change without its id or revisions")
		}
		if len(c.Seq) > maxSeqLen {
			return engine.ChangesPage{}, e.protocolErr(opChanges, "a sequence longer than any peer's")
		}
		page.Results = append(page.Results, engine.Change{Seq: c.Seq, ID: c.ID, Revs: c.Revs, Deleted: c.Deleted})
	}
	return page, nil
}

// pause waits until t or ctx's end (its error).
func pause(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// RevsDiff asks which of revs the peer lacks; an answer that names a
// document or a revision not asked about is a protocol error.
func (e streamEndpoint) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(revs) == 0 {
		return out, ctx.Err()
	}
	var resp response
	if err := e.c.call(ctx, request{Op: opRevsDiff, Revs: revs}, &resp); err != nil {
		return nil, err
	}
	return e.checkMissing(revs, resp.Missing)
}

// checkMissing keeps the non-empty entries of a revs_diff answer, each of
// which must name revisions asked about, each once.
func (e streamEndpoint) checkMissing(revs, missing map[string][]string) (map[string][]string, error) {
	out := map[string][]string{}
	for id, m := range missing {
		asked, ok := revs[id]
		if !ok {
			return nil, e.protocolErr(opRevsDiff, "a document not asked about")
		}
		seen := make(map[string]bool, len(m))
		for _, r := range m {
			if seen[r] || !slices.Contains(asked, r) {
				return nil, e.protocolErr(opRevsDiff, "a revision not asked about, or twice")
			}
			seen[r] = true
		}
		if len(m) > 0 {
			out[id] = m
		}
	}
	return out, nil
}

// BulkGet reads the named revisions. Every document the peer answers
// must be a JSON object that is one of the revisions asked for, each
// once; they are returned in request order.
func (e streamEndpoint) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	if len(revs) == 0 {
		return nil, ctx.Err()
	}
	get := make([]wireDocRev, len(revs))
	for i, r := range revs {
		get[i] = wireDocRev{ID: r.ID, Rev: r.Rev}
	}
	var resp response
	if err := e.c.call(ctx, request{Op: opBulkGet, Get: get}, &resp); err != nil {
		return nil, err
	}
	docs, err := e.checkDocs(revs, resp.Docs)
	if err != nil {
		return nil, err
	}
	e.c.meter.add(e.c.peer, func(c *PeerCounters) { c.DocsIn += uint64(len(docs)) })
	return docs, nil
}

// checkDocs checks a bulk_get answer against the revisions asked for and
// puts it in request order.
func (e streamEndpoint) checkDocs(revs []engine.DocRev, docs []json.RawMessage) ([]json.RawMessage, error) {
	if len(docs) > len(revs) {
		return nil, e.protocolErr(opBulkGet, "more documents than asked for")
	}
	want := make(map[engine.DocRev]int, len(revs))
	for _, r := range revs {
		want[r]++
	}
	byRev := make(map[engine.DocRev]json.RawMessage, len(docs))
	for _, d := range docs {
		var head struct {
			ID  string `json:"_id"`
			Rev string `json:"_rev"`
		}
		if err := json.Unmarshal(d, &head); err != nil || len(bytes.TrimSpace(d)) == 0 || bytes.TrimSpace(d)[0] != '{' {
			return nil, e.protocolErr(opBulkGet, "a document that is not a JSON object")
		}
		k := engine.DocRev{ID: head.ID, Rev: head.Rev}
		if want[k]--; want[k] < 0 {
			return nil, e.protocolErr(opBulkGet, "a document not asked for, or more often than asked")
		}
		if _, dup := byRev[k]; !dup {
			byRev[k] = d
		}
	}
	out := make([]json.RawMessage, 0, len(byRev))
	for _, r := range revs {
		if d, ok := byRev[r]; ok {
			out = append(out, d)
			delete(byRev, r)
		}
	}
	return out, nil
}

// BulkDocs writes docs on the peer; its answer may only report on
// documents sent, at most one result per document.
func (e streamEndpoint) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	var resp response
	if err := e.c.call(ctx, request{Op: opBulkDocs, Docs: docs}, &resp); err != nil {
		return nil, err
	}
	if len(resp.Written) > len(docs) {
		return nil, e.protocolErr(opBulkDocs, "more results than documents sent")
	}
	sent := make(map[string]bool, len(docs))
	for _, d := range docs {
		var head struct {
			ID string `json:"_id"`
		}
		if json.Unmarshal(d, &head) == nil {
			sent[head.ID] = true
		}
	}
	e.c.meter.add(e.c.peer, func(c *PeerCounters) { c.DocsOut += uint64(len(docs)) })
	out := make([]engine.BulkDocResult, len(resp.Written))
	for i, r := range resp.Written {
		if !sent[r.ID] {
			return nil, e.protocolErr(opBulkDocs, "a result for a document not sent")
		}
		out[i] = engine.BulkDocResult{ID: r.ID, Rev: r.Rev, Error: r.Error, Reason: r.Reason}
	}
	return out, nil
}

// GetLocal reads one of this client's _local documents on the peer
// (kept there under this client's peer id).
func (e streamEndpoint) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	var resp response
	if err := e.c.call(ctx, request{Op: opGetLocal, ID: id}, &resp); err != nil {
		return nil, err
	}
	if len(resp.Doc) == 0 {
		return nil, e.protocolErr(opGetLocal, "no document")
	}
	return resp.Doc, nil
}

// PutLocal writes one of this client's _local documents on the peer.
func (e streamEndpoint) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	return e.c.call(ctx, request{Op: opPutLocal, ID: id, Doc: doc}, &response{})
}

// remotePort is negotiate.Port over the replicate protocol: the peer's
// Records.
type remotePort struct{ c *peerClient }

var _ negotiate.Port = remotePort{}

// Exists reports whether the peer's records exist.
func (p remotePort) Exists(ctx context.Context) (bool, error) {
	var resp response
	err := p.c.call(ctx, request{Op: opRecExists}, &resp)
	return resp.Exists, err
}

// Create creates the peer's records.
func (p remotePort) Create(ctx context.Context) error {
	return p.c.call(ctx, request{Op: opRecCreate}, &response{})
}

// Read reads one of the peer's records and its version.
func (p remotePort) Read(ctx context.Context, r negotiate.Record) (json.RawMessage, string, error) {
	var resp response
	if err := p.c.call(ctx, request{Op: opRecRead, Record: string(r)}, &resp); err != nil {
		return nil, "", err
	}
	if len(resp.Doc) == 0 {
		return nil, "", &engine.Error{Op: "p2p read " + r.Name(), Stage: engine.StageProtocol, Err: fmt.Errorf("peer %s sent no document", p.c.peer)}
	}
	return resp.Doc, resp.Version, nil
}

// Write writes one of the peer's records over version.
func (p remotePort) Write(ctx context.Context, r negotiate.Record, raw json.RawMessage, version string) (string, error) {
	var resp response
	err := p.c.call(ctx, request{Op: opRecWrite, Record: string(r), Doc: raw, Version: version}, &resp)
	return resp.Version, err
}

// Progress reads the peer's progress marker.
func (p remotePort) Progress(ctx context.Context) (string, error) {
	var resp response
	err := p.c.call(ctx, request{Op: opProgress}, &resp)
	return resp.Progress, err
}
