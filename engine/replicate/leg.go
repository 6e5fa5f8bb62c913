package replicate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// remoteFlushTimeout bounds the remote checkpoint write at the end of a
// pass (which may run after its context ended).
const remoteFlushTimeout = 10 * time.Second

// leg is one direction of a replication: source, target and the id of
// their checkpoints.
type leg struct {
	dir      Direction
	src, tgt engine.Endpoint
	selector json.RawMessage
	repID    string
	hooks    bool // documents land in the local endpoint
}

func (r *Replicator) leg(ctx context.Context, dir Direction) (*leg, error) {
	localID, err := endpointID(ctx, r.cfg.Local, r.cfg.LocalID)
	if err != nil {
		return nil, err
	}
	remoteID, err := endpointID(ctx, r.cfg.Remote, r.cfg.RemoteID)
	if err != nil {
		return nil, err
	}
	lg := &leg{dir: dir}
	if dir == Pull {
		lg.src, lg.tgt, lg.selector, lg.hooks = r.cfg.Remote, r.cfg.Local, r.cfg.Selector, true
		lg.repID = ReplicationID(remoteID, localID, r.cfg.Selector)
	} else {
		lg.src, lg.tgt = r.cfg.Local, r.cfg.Remote
		lg.repID = ReplicationID(localID, remoteID, nil)
	}
	return lg, nil
}

func endpointID(ctx context.Context, ep engine.Endpoint, id string) (string, error) {
	if id != "" {
		return id, nil
	}
	info, err := ep.Info(ctx)
	if err != nil {
		return "", err
	}
	return info.Name, nil
}

// pass replicates lg from its checkpoint. Finite (follow false), it ends
// at the end of the source feed; following, it waits for changes until
// ctx ends or an error. It returns the number of batches completed.
//
// The work is pipelined (pipeline.go): one goroutine reads pages of
// changes ahead, each page's RevsDiff and BulkGet run in a goroutine of
// their own as soon as it is read, and this goroutine writes the fetched
// pages in feed order. At most sz.limit pages are read and not yet
// written (batches_limit), which also bounds the fetches in flight. The
// checkpoint is written after each write, at the last sequence of the
// pages written so far in order, so it never covers a change that is not
// on the target, whatever order the fetches finish in.
//
// The remote side's checkpoint is written less often (writeCheckpoint);
// whatever it lacks is written when the pass ends, however it ends.
func (r *Replicator) pass(ctx context.Context, lg *leg, sz sizes, follow bool, p *Progress) (batches int, err error) {
	cp, err := r.readCheckpoint(ctx, lg)
	if err != nil {
		return 0, err
	}
	defer func() { // runs last, after the pipeline has stopped
		if cp.remoteSeq == "" {
			return
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), remoteFlushTimeout)
		defer cancel()
		ferr := r.flushCheckpoint(fctx, lg, cp)
		switch {
		case ferr == nil:
		case err == nil && ctx.Err() == nil:
			err = ferr
		default:
			r.cfg.Log.Warn("replicate: final remote checkpoint not written", "direction", lg.dir.String(), "err", ferr)
			r.retrying(Retry{Direction: lg.dir, What: "final checkpoint", Err: ferr})
		}
	}()
	*p = Progress{Direction: lg.dir, LastSeq: cp.since, Pending: -1}

	ctx, cancel := context.WithCancel(ctx)
	pl := newPipeline(lg, sz, follow)
	defer pl.wg.Wait()
	defer cancel()
	pl.wg.Add(1)
	go pl.read(ctx, cp.since)

	for {
		group, err := pl.next(ctx)
		if err != nil {
			return batches, err
		}
		if group == nil {
			break
		}
		if err := r.writeGroup(ctx, lg, group, p); err != nil {
			return batches, err
		}
		pl.release(len(group))
		last := group[len(group)-1].page
		seq := ""
		for _, f := range group {
			if f.page.LastSeq != "" {
				seq = f.page.LastSeq
			}
		}
		if seq != "" && seq != p.LastSeq {
			if err := r.writeCheckpoint(ctx, lg, cp, seq, len(group), last.Pending == 0); err != nil {
				return batches, err
			}
			p.LastSeq = seq
		}
		p.Pending = last.Pending
		batches += len(group)
		if r.cfg.Progress != nil {
			r.cfg.Progress(*p)
		}
	}
	if err := ctx.Err(); err != nil {
		return batches, err
	}
	return batches, nil
}

// fetch lists, for one page of changes, the revisions the target lacks
// (RevsDiff) and reads them from the source (BulkGet).
func fetch(ctx context.Context, lg *leg, changes []engine.Change) ([]json.RawMessage, error) {
	if len(changes) == 0 {
		return nil, nil
	}
	revs := make(map[string][]string, len(changes))
	for _, c := range changes {
		revs[c.ID] = append(revs[c.ID], c.Revs...)
	}
	missing, err := lg.tgt.RevsDiff(ctx, revs)
	if err != nil {
		return nil, shrinkable(err)
	}
	var req []engine.DocRev
	seen := make(map[engine.DocRev]bool)
	for _, c := range changes {
		for _, rev := range missing[c.ID] {
			dr := engine.DocRev{ID: c.ID, Rev: rev}
			if !seen[dr] {
				seen[dr] = true
				req = append(req, dr)
			}
		}
	}
	if len(req) == 0 {
		return nil, nil
	}
	docs, err := lg.src.BulkGet(ctx, req)
	if err != nil {
		return nil, shrinkable(err)
	}
	return docs, nil
}

// writeGroup writes the fetched revisions of consecutive pages to the
// target in one BulkDocs (new_edits=false), then runs the pull hooks.
func (r *Replicator) writeGroup(ctx context.Context, lg *leg, group []*fetched, p *Progress) error {
	docs := group[0].docs
	if len(group) > 1 {
		docs = nil
		for _, f := range group {
			docs = append(docs, f.docs...)
		}
	}
	p.DocsRead += len(docs)
	if len(docs) == 0 {
		return nil
	}
	res, err := lg.tgt.BulkDocs(ctx, docs)
	if err != nil {
		if ctx.Err() != nil || IsTransport(err) {
			return err
		}
		return &batchError{fmt.Errorf("replicate: bulk write of %d documents: %w", len(docs), err)}
	}
	failed := make(map[engine.DocRev]bool)
	for _, br := range res {
		switch br.Error {
		case "":
		case "forbidden", "unauthorized":
			failed[engine.DocRev{ID: br.ID, Rev: br.Rev}] = true
			p.WriteFailures++
			r.cfg.Log.Warn("replicate: target refused a document", "direction", lg.dir.String(), "doc", br.ID, "reason", br.Error)
		default:
			return &batchError{&engine.Error{Op: "bulk write", DocID: br.ID, Stage: engine.StageProtocol,
				Err: fmt.Errorf("replicate: %s: %s", br.Error, br.Reason)}}
		}
	}
	p.DocsWritten += len(docs) - len(failed)
	if lg.hooks {
		return r.pulled(ctx, docs, failed)
	}
	return nil
}

// shrinkable turns a 413 into a batch failure; other errors end the pass.
func shrinkable(err error) error {
	if errors.Is(err, engine.ErrTooLarge) {
		return &batchError{err}
	}
	return err
}

// pulled runs the pull hooks for documents written to the local
// endpoint: chunk arrivals first (the metadata of the same batch may need
// them), then a Hold for every metadata revision.
func (r *Replicator) pulled(ctx context.Context, docs []json.RawMessage, failed map[engine.DocRev]bool) error {
	if r.cfg.Holder == nil && r.cfg.Arrivals == nil {
		return nil
	}
	var chunks []engine.ChunkID
	var metas [][]byte
	for _, raw := range docs {
		h, ok := readHead(raw)
		if !ok {
			continue // written as is; not ours to judge
		}
		if failed[engine.DocRev{ID: h.id, Rev: h.rev}] {
			continue
		}
		switch {
		case docid.IsChunkID(h.id):
			if !h.isDeleted() {
				chunks = append(chunks, h.id)
			}
		case h.isFileDoc() || h.isBodylessTombstone():
			metas = append(metas, raw)
		}
	}
	if r.cfg.Arrivals != nil && len(chunks) > 0 {
		r.cfg.Arrivals.ChunksArrived(chunks)
	}
	if r.cfg.Holder == nil {
		return nil
	}
	for _, raw := range metas {
		d, err := parseDoc(raw)
		if err != nil {
			continue // readHead read it
		}
		m, err := livesync.ParseMeta(d)
		if err != nil {
			r.cfg.Log.Warn("replicate: pulled metadata is malformed", "doc", d.ID(), "err", err)
			continue
		}
		out, err := r.cfg.Holder.Hold(ctx, hold.FromMeta(m), r.cfg.HoldSource)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.cfg.Log.Warn("replicate: hold failed", "doc", m.ID, "rev", m.Rev, "err", err)
			continue
		}
		r.cfg.Log.Debug("replicate: pulled metadata", "doc", m.ID, "rev", m.Rev, "outcome", out.String())
	}
	return nil
}

// compactJSON returns the compact form of a JSON value (nil for none).
func compactJSON(v json.RawMessage) []byte {
	if len(v) == 0 {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return v
	}
	return b.Bytes()
}
