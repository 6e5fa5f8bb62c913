//go:build !js

package p2p

import (
	"context"
	"errors"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/engine"
)

// errNotServed answers the ops of a part this peer does not serve.
var errNotServed = errors.New("this peer does not serve that")

// run executes one checked request against the served database.
func (sv *server) run(ctx context.Context, remote peer.ID, req request) response {
	resp, err := sv.dispatch(ctx, remote, req)
	if err != nil {
		return response{Status: statusError, Code: errorCode(err), Error: err.Error()}
	}
	resp.Status = statusOK
	return resp
}

func (sv *server) dispatch(ctx context.Context, remote peer.ID, req request) (response, error) {
	ep, rec := sv.db.Endpoint, sv.db.Records
	switch req.Op {
	case opRecRead, opRecWrite, opRecExists, opRecCreate, opProgress:
		if rec == nil {
			return response{}, errNotServed
		}
		return sv.records(ctx, req)
	}
	if ep == nil {
		return response{}, errNotServed
	}
	switch req.Op {
	case opInfo:
		info, err := ep.Info(ctx)
		return response{Info: &wireInfo{Name: info.Name, UpdateSeq: info.UpdateSeq, DocCount: info.DocCount}}, err
	case opChanges:
		return sv.changes(ctx, ep, req)
	case opRevsDiff:
		missing, err := ep.RevsDiff(ctx, req.Revs)
		return response{Missing: missing}, err
	case opBulkGet:
		revs := make([]engine.DocRev, len(req.Get))
		for i, r := range req.Get {
			revs[i] = engine.DocRev{ID: r.ID, Rev: r.Rev}
		}
		docs, err := ep.BulkGet(ctx, revs)
		sv.meter.add(remote, func(c *PeerCounters) { c.DocsOut += uint64(len(docs)) })
		return response{Docs: docs}, err
	case opBulkDocs:
		res, err := ep.BulkDocs(ctx, req.Docs)
		if err != nil {
			return response{}, err
		}
		sv.meter.add(remote, func(c *PeerCounters) { c.DocsIn += uint64(len(req.Docs)) })
		out := make([]wireResult, len(res))
		for i, r := range res {
			out[i] = wireResult{ID: r.ID, Rev: r.Rev, Error: r.Error, Reason: r.Reason}
		}
		return response{Written: out}, nil
	case opGetLocal:
		doc, err := ep.GetLocal(ctx, peerLocalID(remote, req.ID))
		return response{Doc: doc}, err
	case opPutLocal:
		return response{}, ep.PutLocal(ctx, peerLocalID(remote, req.ID), req.Doc)
	}
	return response{}, badRequest("unknown op %.32q", req.Op)
}

// peerLocalPrefix is where a peer's _local documents (its replication
// checkpoints) are kept: under its own peer id, so that a peer reads and
// writes only its own, never another peer's, a CouchDB client's or this
// replica's own checkpoints of its syncs.
const peerLocalPrefix = "livesync-go/p2p-peer/"

// maxPeerLocalPrefix bounds peerLocalPrefix, a peer id and a slash.
const maxPeerLocalPrefix = 128

// peerLocalID is where the _local document id of remote is kept.
func peerLocalID(remote peer.ID, id string) string {
	return peerLocalPrefix + remote.String() + "/" + id
}

// changes reads one page; a longpoll waits at most what the client waits
// and three quarters of the stream's deadline, then answers an empty page
// at the same sequence, which the client asks again.
func (sv *server) changes(ctx context.Context, ep engine.Endpoint, req request) (response, error) {
	creq := engine.ChangesRequest{Since: req.Since, Limit: req.Limit, Selector: req.Selector, Wait: req.Wait}
	pctx := ctx
	if req.Wait {
		wait := sv.timeout * 3 / 4
		if req.WaitMS > 0 {
			wait = min(wait, time.Duration(req.WaitMS)*time.Millisecond)
		}
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	page, err := ep.Changes(pctx, creq)
	if err != nil {
		if req.Wait && pctx.Err() != nil && ctx.Err() == nil {
			pending := -1
			return response{LastSeq: req.Since, Pending: &pending}, nil
		}
		return response{}, err
	}
	resp := response{LastSeq: page.LastSeq, Pending: &page.Pending, Results: make([]wireChange, len(page.Results))}
	for i, c := range page.Results {
		resp.Results[i] = wireChange{Seq: c.Seq, ID: c.ID, Revs: c.Revs, Deleted: c.Deleted}
	}
	return resp, nil
}

// records proxies the handshake's record ops to the served Records.
func (sv *server) records(ctx context.Context, req request) (response, error) {
	rec := sv.db.Records
	switch req.Op {
	case opRecRead:
		r, _ := parseRecord(req.Record)
		raw, v, err := rec.Read(ctx, r)
		return response{Doc: raw, Version: v}, err
	case opRecWrite:
		r, _ := parseRecord(req.Record)
		v, err := rec.Write(ctx, r, req.Doc, req.Version)
		return response{Version: v}, err
	case opRecExists:
		ok, err := rec.Exists(ctx)
		return response{Exists: ok}, err
	case opRecCreate:
		return response{}, rec.Create(ctx)
	case opProgress:
		p, err := rec.Progress(ctx)
		return response{Progress: p}, err
	}
	return response{}, badRequest("unknown op %.32q", req.Op)
}
