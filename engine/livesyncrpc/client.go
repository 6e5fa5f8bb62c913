package livesyncrpc

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/rpcroom"
	"github.com/livesync-go/livesync-go/engine/store"
)

// DefaultBatchSize is ReplicatorShim's batch size: the limit of each
// db.changes page.
const DefaultBatchSize = 33

// Local is the target of a pull: the local database and the name it
// goes by in checkpoint ids (its db_name, DBName(vault)).
type Local struct {
	DB   engine.Endpoint
	Name string
}

// ReplicateOptions tunes Replicate.
type ReplicateOptions struct {
	// Rewind starts over with a fresh mark, as the plugin's "fetch from
	// start".
	Rewind bool
	// BatchSize is the db.changes limit; 0 means DefaultBatchSize.
	BatchSize int
	// OnBatch, if set, is called after each page that had revisions
	// this database lacked, as ReplicatorShim calls its progress
	// callback: with the current winning revision here of each document
	// of the page (deleted ones left out, without _revisions), in the
	// order of their sequences on the source, and the progress.
	OnBatch func(ctx context.Context, docs []json.RawMessage, info ProgressInfo)
	// Now is the clock of the mark; time.Now if nil.
	Now func() int64
}

// Result describes a finished pull.
type Result struct {
	// Mark is the source's replication mark, Since the sequence the
	// target checkpoint now holds (the source's last_seq as sent).
	Mark  string
	Since json.RawMessage
	// Batches counts the pages that had missing revisions, Docs the
	// revisions written.
	Batches, Docs int
	// TweakMismatch lists the tweak keys on which the peer differs, other
	// than the passphrase (a warning only, as in the plugin).
	TweakMismatch []string
}

// remote calls a peer's database methods.
type remote struct {
	room *rpcroom.Room
	peer string
}

func (r remote) call(ctx context.Context, out any, method string, args ...any) error {
	raw, err := r.room.Call(ctx, r.peer, method, args...)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &engine.Error{Stage: engine.StageProtocol, Op: method, Err: fmt.Errorf("%w: %v", engine.ErrMalformed, err)}
	}
	return nil
}

// upsertRemote is ReplicatorShim's upsert on the source: db.get, then
// db.put of edit(doc); an absent document (IsNotFound) is created from
// edit({_id}).
func (r remote) upsert(ctx context.Context, id string, edit func(map[string]json.RawMessage)) (map[string]json.RawMessage, error) {
	var doc map[string]json.RawMessage
	err := r.call(ctx, &doc, MethodGet, id)
	if IsNotFound(err) || (err == nil && doc == nil) {
		doc = map[string]json.RawMessage{}
		doc["_id"], _ = json.Marshal(id)
	} else if err != nil {
		return nil, err
	}
	edit(doc)
	var res struct {
		OK bool `json:"ok"`
	}
	if err := r.call(ctx, &res, MethodPut, doc, struct{}{}); err != nil {
		return nil, err
	}
	if !res.OK {
		return nil, fmt.Errorf("livesyncrpc: %s: the peer did not store the replication mark", r.peer)
	}
	return doc, nil
}

// Replicate pulls the database of peer into local as commonlib's
// replicateShim (src/pouchdb/ReplicatorShim.ts) does, with no check of
// acceptance or settings (Peer.Pull does them):
//
//  1. db.info of the peer, Info of local.
//  2. The mark document _local/replication-checkpoint-mark-<target>-<source>
//     is upserted on the peer with db.get and db.put, keeping its "mark"
//     (a new one, String(Date.now()), when absent or with Rewind).
//  3. The local checkpoint _local/replication-checkpoint-<target>-<mark>
//     holds "since" ("" when new).
//  4. Pages of db.changes({since, style:"all_docs", limit:33}), until an
//     empty one: local RevsDiff, db.bulkGet({docs: missing, revs:true}),
//     local BulkDocs (new_edits=false) of the docs found, then the
//     checkpoint's since = last_seq.
func Replicate(ctx context.Context, room *rpcroom.Room, peer string, local Local, opts ReplicateOptions) (Result, error) {
	return replicate(ctx, remote{room, peer}, local, &localDocs{db: local.DB}, opts)
}

func replicate(ctx context.Context, r remote, local Local, ld *localDocs, opts ReplicateOptions) (Result, error) {
	var res Result
	var info struct {
		DBName    string          `json:"db_name"`
		UpdateSeq json.RawMessage `json:"update_seq"`
	}
	if err := r.call(ctx, &info, MethodInfo); err != nil {
		return res, err
	}
	target := local.Name
	if target == "" {
		li, err := local.DB.Info(ctx)
		if err != nil {
			return res, err
		}
		target = li.Name
	}
	maxSeq := parseSeq(info.UpdateSeq)
	now := opts.Now
	if now == nil {
		now = func() int64 { return time.Now().UnixMilli() }
	}
	markDoc, err := r.upsert(ctx, "_local/replication-checkpoint-mark-"+target+"-"+info.DBName, func(doc map[string]json.RawMessage) {
		if _, ok := doc["mark"]; opts.Rewind || !ok || string(doc["mark"]) == "null" {
			doc["mark"], _ = json.Marshal(strconv.FormatInt(now(), 10))
		}
	})
	if err != nil {
		return res, err
	}
	res.Mark, err = markString(markDoc["mark"])
	if err != nil {
		return res, err
	}
	cpID := "_local/replication-checkpoint-" + target + "-" + res.Mark
	since, err := loadCheckpoint(ctx, ld, cpID)
	if err != nil {
		return res, err
	}
	batch := opts.BatchSize
	if batch <= 0 {
		batch = DefaultBatchSize
	}
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		var page struct {
			Results []changeRow     `json:"results"`
			LastSeq json.RawMessage `json:"last_seq"`
		}
		req := map[string]any{"since": since, "style": "all_docs", "limit": batch}
		if err := r.call(ctx, &page, MethodChanges, req); err != nil {
			return res, err
		}
		if len(page.Results) == 0 {
			break
		}
		if len(page.LastSeq) == 0 || string(page.LastSeq) == string(since) {
			return res, &engine.Error{Stage: engine.StageProtocol, Op: MethodChanges,
				Err: fmt.Errorf("%w: a page of changes that does not advance", engine.ErrMalformed)}
		}
		written, missing, err := pullPage(ctx, r, local.DB, page.Results)
		if err != nil {
			return res, err
		}
		if missing {
			res.Batches++
			res.Docs += written
			if opts.OnBatch != nil {
				docs := refreshed(ctx, local.DB, page.Results)
				opts.OnBatch(ctx, docs, ProgressInfo{LastSeq: parseSeq(page.LastSeq), MaxSeqInBatch: maxSeq})
			}
		}
		since = page.LastSeq
		// The batch is written: record it even if ctx ended meanwhile.
		if err := saveCheckpoint(context.WithoutCancel(ctx), ld, cpID, since); err != nil {
			return res, err
		}
	}
	res.Since = since
	return res, nil
}

// refreshed is ReplicatorShim's re-read of a page's documents from the
// target: the winning revision of each id (bulkGet without revisions;
// deleted or unreadable ones left out), sorted by the highest sequence
// of the id in the page.
func refreshed(ctx context.Context, db engine.Endpoint, rows []changeRow) []json.RawMessage {
	g, ok := db.(docGetter)
	if !ok {
		return nil
	}
	maxSeq := map[string]int64{}
	var order []string
	for _, c := range rows {
		s, seen := maxSeq[c.ID]
		if !seen {
			order = append(order, c.ID)
		}
		maxSeq[c.ID] = max(s, parseSeq(c.Seq))
	}
	type item struct {
		seq int64
		doc json.RawMessage
	}
	var items []item
	for _, id := range order {
		if doc, err := g.Get(ctx, id, store.GetOptions{}); err == nil {
			items = append(items, item{maxSeq[id], doc})
		}
	}
	slices.SortStableFunc(items, func(a, b item) int { return cmp.Compare(a.seq, b.seq) })
	docs := make([]json.RawMessage, len(items))
	for i, it := range items {
		docs[i] = it.doc
	}
	return docs
}

// pullPage fetches and writes the revisions of one page the local
// database lacks. It returns how many it wrote and whether any were
// missing (ReplicatorShim then writes whatever the source returned, and
// reports progress, even if that is nothing).
func pullPage(ctx context.Context, r remote, db engine.Endpoint, rows []changeRow) (int, bool, error) {
	want := map[string][]string{}
	var order []string
	for _, c := range rows {
		if _, ok := want[c.ID]; !ok {
			order = append(order, c.ID)
		}
		for _, ch := range c.Changes {
			want[c.ID] = append(want[c.ID], ch.Rev)
		}
	}
	missing, err := db.RevsDiff(ctx, want)
	if err != nil {
		return 0, false, err
	}
	var reqs []map[string]string
	for _, id := range order {
		for _, rev := range missing[id] {
			reqs = append(reqs, map[string]string{"id": id, "rev": rev})
		}
	}
	if len(reqs) == 0 {
		return 0, false, nil
	}
	var got struct {
		Results []struct {
			Docs []struct {
				OK json.RawMessage `json:"ok"`
			} `json:"docs"`
		} `json:"results"`
	}
	if err := r.call(ctx, &got, MethodBulkGet, map[string]any{"docs": reqs, "revs": true}); err != nil {
		return 0, true, err
	}
	var docs []json.RawMessage
	for _, res := range got.Results {
		for _, d := range res.Docs {
			if len(d.OK) > 0 && string(d.OK) != "null" {
				docs = append(docs, d.OK)
			}
		}
	}
	if len(docs) == 0 {
		return 0, true, nil
	}
	if _, err := db.BulkDocs(ctx, docs); err != nil {
		return 0, true, err
	}
	return len(docs), true, nil
}

// markString renders a mark as a template string does.
func markString(raw json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	}
	return "", &engine.Error{Stage: engine.StageProtocol, Op: "replication mark",
		Err: fmt.Errorf("%w: mark %s", engine.ErrMalformed, raw)}
}

// loadCheckpoint is ReplicatorShim's upsert of the target checkpoint
// at the start of a replication: the document is written back (created
// with since "" when absent) and its since returned.
func loadCheckpoint(ctx context.Context, ld *localDocs, id string) (json.RawMessage, error) {
	doc, err := ld.get(ctx, id[len(LocalPrefix):])
	switch {
	case IsNotFound(err):
		doc = map[string]json.RawMessage{}
		doc["_id"], _ = json.Marshal(id)
	case err != nil:
		return nil, err
	}
	since, ok := doc["since"]
	if !ok || string(since) == "null" {
		since = json.RawMessage(`""`)
	}
	doc["since"] = since
	if _, err := ld.put(ctx, doc); err != nil {
		return nil, err
	}
	return since, nil
}

func saveCheckpoint(ctx context.Context, ld *localDocs, id string, since json.RawMessage) error {
	doc, err := ld.get(ctx, id[len(LocalPrefix):])
	if IsNotFound(err) {
		doc = map[string]json.RawMessage{}
		doc["_id"], _ = json.Marshal(id)
	} else if err != nil {
		return err
	}
	doc["since"] = since
	_, err = ld.put(ctx, doc)
	return err
}

// Pull replicates from peer into Config.DB as the plugin's "replicate
// from" does: legacy/!reqAuth must answer true (else ErrRejected); the
// peer's legacy/getTweakSettings is compared with this peer's own (a
// different passphrase hash is ErrPassphraseMismatch, other differences
// are reported in Result.TweakMismatch; skipped when either side's
// platform is "pseudo-replicator"); then Replicate. Each written batch is
// reported through Config.OnProgress and acknowledged to the peer with
// legacy/onProgressAcknowledged, and the end with an acknowledgement
// without progress. One pull per peer runs at a time (ErrInProgress).
func (p *Peer) Pull(ctx context.Context, peer string, opts PullOptions) (Result, error) {
	if p.room == nil {
		return Result{}, ErrNotServing
	}
	r := remote{p.room, peer}
	var accepted bool
	if err := r.call(ctx, &accepted, MethodReqAuth, p.cfg.SelfID); err != nil || !accepted {
		return Result{}, errors.Join(ErrRejected, err)
	}
	mismatch, err := p.checkTweaks(ctx, r)
	if err != nil {
		return Result{}, err
	}
	p.pullMu.Lock()
	if p.pulling[peer] {
		p.pullMu.Unlock()
		return Result{}, ErrInProgress
	}
	p.pulling[peer] = true
	p.pullMu.Unlock()
	defer func() {
		p.pullMu.Lock()
		delete(p.pulling, peer)
		p.pullMu.Unlock()
	}()
	ack := p.startAcks(peer)
	ro := ReplicateOptions{Rewind: opts.Rewind, BatchSize: opts.BatchSize,
		Now: func() int64 { return p.cfg.Now().UnixMilli() },
		OnBatch: func(ctx context.Context, docs []json.RawMessage, info ProgressInfo) {
			if opts.OnBatch != nil {
				opts.OnBatch(ctx, docs, info)
			}
			p.progress(Progress{Peer: peer, Info: &info})
			ack.send(&info)
			if p.broadcasting.Load() {
				p.NotifyProgress(peer)
			}
		}}
	res, err := replicate(ctx, r, Local{DB: p.cfg.DB, Name: p.cfg.DBName}, p.local, ro)
	res.TweakMismatch = mismatch
	if err != nil {
		ack.close()
		return res, err
	}
	p.progress(Progress{Peer: peer})
	ack.end()
	return res, nil
}

// PullOptions tunes Pull: see ReplicateOptions.
type PullOptions struct {
	Rewind    bool
	BatchSize int
	OnBatch   func(ctx context.Context, docs []json.RawMessage, info ProgressInfo)
}

// ackQueue bounds the acknowledgements of one pull waiting to be sent.
const ackQueue = 4

// acks sends one pull's acknowledgements to the peer pulled from
// (legacy/onProgressAcknowledged with its 500 ms timeout) in order, in
// the background: the plugin fires them and goes on (void
// acknowledgeProgress in TrysteroReplicator.replicateFrom), so a peer
// slow to answer does not hold the pull up. When the queue is full a
// batch's acknowledgement is dropped (it only feeds the peer's progress
// display); the final one is always sent.
type acks struct {
	ch chan *ProgressInfo // nil when the peer is closing
}

// startAcks starts the sender of a pull's acknowledgements to peer.
func (p *Peer) startAcks(peer string) acks {
	p.notifyMu.Lock() // Close cancels under it: no Add after its Wait
	defer p.notifyMu.Unlock()
	if p.ctx.Err() != nil {
		return acks{}
	}
	ch := make(chan *ProgressInfo, ackQueue)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for info := range ch {
			var arg any // null, as JSON.stringify writes an undefined in an array
			if info != nil {
				arg = info
			}
			_, _ = p.room.Call(p.ctx, peer, MethodOnProgressAcknowledged, p.cfg.SelfID, arg)
		}
	}()
	return acks{ch}
}

// send queues a batch's acknowledgement, or drops it if the queue is full.
func (a acks) send(info *ProgressInfo) {
	if a.ch == nil {
		return
	}
	select {
	case a.ch <- info:
	default:
	}
}

// end queues the acknowledgement without progress that ends the pull
// (making room for it if needed) and closes the queue.
func (a acks) end() {
	if a.ch == nil {
		return
	}
	select {
	case a.ch <- nil:
	default:
		select { // the sender is the only other party: it only takes
		case <-a.ch:
		default:
		}
		a.ch <- nil
	}
	close(a.ch)
}

// close closes the queue without an end (a failed pull sends none).
func (a acks) close() {
	if a.ch != nil {
		close(a.ch)
	}
}

// checkTweaks is the plugin's checkTweakValues.
func (p *Peer) checkTweaks(ctx context.Context, r remote) ([]string, error) {
	ad, ok := p.known(r.peer)
	if !ok {
		return nil, ErrUnknownPeer
	}
	if p.cfg.Platform == PlatformPseudoReplicator || ad.Platform == PlatformPseudoReplicator {
		return nil, nil
	}
	raw, err := p.room.Call(ctx, r.peer, MethodGetTweakSettings, p.cfg.SelfID)
	if err != nil {
		return nil, err
	}
	mine := TweakSettings(p.cfg.Tweaks, p.cfg.Passphrase, p.cfg.Now())
	diff, err := tweakDifferences(mine, raw)
	if err != nil {
		return nil, &engine.Error{Stage: engine.StageProtocol, Op: MethodGetTweakSettings, Err: fmt.Errorf("%w: %v", engine.ErrMalformed, err)}
	}
	var others []string
	for _, k := range diff {
		if k == "passphrase" {
			return nil, ErrPassphraseMismatch
		}
		others = append(others, k)
	}
	return others, nil
}

// ErrRemoteSync wraps the failure a peer reported for legacy/reqSync.
var ErrRemoteSync = errors.New("livesyncrpc: the peer could not pull from this one")

// Sync is the plugin's "sync" with peer: Pull, then legacy/reqSync, which
// asks the peer to pull from this one and waits for it (no timeout). An
// answer other than {ok:true} is an error wrapping ErrRemoteSync, as in
// the plugin's p2p-sync command (src/apps/cli/commands/p2p.ts).
func (p *Peer) Sync(ctx context.Context, peer string, opts PullOptions) (Result, error) {
	res, err := p.Pull(ctx, peer, opts)
	if err != nil {
		return res, err
	}
	var ans struct {
		OK    bool            `json:"ok"`
		Error json.RawMessage `json:"error"`
	}
	raw, err := p.room.Call(ctx, peer, MethodReqSync, p.cfg.SelfID)
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		return res, &engine.Error{Stage: engine.StageProtocol, Op: MethodReqSync, Err: fmt.Errorf("%w: %v", engine.ErrMalformed, err)}
	}
	if !ans.OK {
		// As the plugin's p2p-sync command: anything but ok:true fails
		// (an Error object arrives as {}; this peer's carry a message).
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(ans.Error, &e)
		if e.Message == "" {
			return res, ErrRemoteSync
		}
		return res, fmt.Errorf("%w: %s", ErrRemoteSync, e.Message)
	}
	return res, nil
}
