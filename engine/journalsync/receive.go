package journalsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// bulkDocsBatch bounds the documents of one BulkDocs call (one store
// transaction) while applying a pack.
const bulkDocsBatch = 500

// failure is a pack that could not be opened.
type failure struct {
	name string
	err  error
}

// receiver is the state of one Receive.
type receiver struct {
	j   *Journal
	res *Result
	p   Progress
	// pending holds packs that failed in a way a wrong key explains
	// (failed decryption) while no pack has proven the key: they are
	// quarantined once one does, and reported as a wrong passphrase if
	// none does.
	pending []failure
	// proven: this run decrypted a pack, or checked the last pack opened
	// before and it still opens.
	proven bool
}

// receive is engine/FORMAT.md §6.4 (commonlib JournalSyncCore.ts
// receiveRemoteJournal): list the packs after the greatest received one,
// skip what this device sent or received, and apply each in key order.
func (j *Journal) receive(ctx context.Context, res *Result) error {
	todo, err := j.receiveList(ctx)
	if err != nil {
		return err
	}
	r := &receiver{j: j, res: res, p: Progress{Direction: Receiving, Total: len(todo)}}
	for _, name := range todo {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.pack(ctx, name); err != nil {
			return err
		}
	}
	if len(r.pending) > 0 {
		return r.wrongKey()
	}
	return nil
}

// receiveList lists the bucket after the greatest received pack (less
// Config.LateWindow) and
// returns the names to apply, in key order: listed packs neither sent nor
// received nor quarantined, plus quarantined packs released by
// ClearQuarantine (all of them with Config.RetryQuarantined). Listed
// packs this device sent count as received, as upstream records them.
func (j *Journal) receiveList(ctx context.Context) ([]string, error) {
	j.mu.Lock()
	after := ""
	if j.st.maxReceived != "" {
		after = j.key(j.st.maxReceived)
		if ms, ok := journal.ParsePackKey("", j.st.maxReceived); ok && j.cfg.LateWindow > 0 {
			after = journal.PackKey(j.prefix, max(0, ms-j.cfg.LateWindow.Milliseconds()))
		}
	}
	j.mu.Unlock()
	keys, err := j.cfg.Remote.List(ctx, after)
	if err != nil {
		return nil, err
	}
	j.mu.Lock()
	st := j.st
	var todo []string
	seen := map[string]bool{}
	ownPacks := false
	for _, k := range keys {
		name, ok := strings.CutPrefix(k, j.prefix)
		if !ok || !journal.IsPackListingCandidate(name) || seen[name] {
			continue
		}
		seen[name] = true
		_, quarantined := st.quarantine[name]
		switch {
		case st.sentFiles.has(name):
			st.addReceived(name)
			ownPacks = true
		case st.receivedFiles.has(name), quarantined && !j.cfg.RetryQuarantined:
		default:
			todo = append(todo, name)
		}
	}
	for name := range st.retry {
		if !seen[name] {
			seen[name] = true
			todo = append(todo, name)
		}
	}
	if j.cfg.RetryQuarantined {
		for name := range st.quarantine {
			if !seen[name] {
				seen[name] = true
				todo = append(todo, name)
			}
		}
	}
	j.mu.Unlock()
	slices.SortFunc(todo, journal.ComparePackKeys)
	if ownPacks {
		if err := j.save(ctx); err != nil {
			return nil, err
		}
	}
	return todo, nil
}

// pack downloads, opens and applies one pack, or quarantines it.
func (r *receiver) pack(ctx context.Context, name string) error {
	j := r.j
	key := j.key(name)
	body, err := j.cfg.Remote.Get(ctx, key)
	if err != nil {
		if isMissingObject(err) {
			j.cfg.Log.Warn("journalsync: pack is gone from the bucket; skipped", "pack", key)
			j.mu.Lock()
			delete(j.st.retry, name)
			delete(j.st.quarantine, name)
			j.mu.Unlock()
			return nil
		}
		return err
	}
	recs, err := journal.Open(key, body, j.cfg.Cipher, j.cfg.InflateLimit)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return r.failed(ctx, name, err)
	}
	if err := r.keyProven(ctx); err != nil {
		return err
	}
	return r.apply(ctx, name, recs)
}

// keyMatters reports whether err is a failure a wrong key (or a missing
// cipher for an encrypted journal) explains: failed decryption, or
// without a cipher a stream that does not open. Ciphertext read as a
// plain pack sometimes inflates for a few bytes and then fails to parse
// (a few percent of packs), so without a cipher a parse error counts
// too; only a stream that inflates past the limit does not.
func (r *receiver) keyMatters(err error) bool {
	if stageOf(err) == engine.StageDecrypt {
		return true
	}
	if r.j.cfg.Cipher != nil {
		return false // decrypted: the key is right
	}
	return !errors.Is(err, journal.ErrTooLarge)
}

// failed handles a pack that downloaded but does not open.
func (r *receiver) failed(ctx context.Context, name string, err error) error {
	j := r.j
	if !r.keyMatters(err) {
		// The stream decrypted (or inflated): the key is right and the
		// pack itself is broken.
		if err := r.keyProven(ctx); err != nil {
			return err
		}
		return r.quarantine(ctx, failure{name, err}, true)
	}
	if r.proven {
		return r.quarantine(ctx, failure{name, err}, true)
	}
	j.mu.Lock()
	opened, canary := j.st.opened, j.st.lastOpened
	j.mu.Unlock()
	if !opened {
		r.pending = append(r.pending, failure{name, err})
		r.report(j.key(name))
		return nil
	}
	// The key opened this journal before: check it still opens the last
	// pack it opened, so a changed passphrase is not taken for
	// corruption.
	if canary != "" && canary != name {
		body, gerr := j.cfg.Remote.Get(ctx, j.key(canary))
		switch {
		case gerr == nil:
			if _, oerr := journal.Open(j.key(canary), body, j.cfg.Cipher, j.cfg.InflateLimit); oerr != nil && r.keyMatters(oerr) {
				r.pending = append(r.pending, failure{name, err})
				return r.wrongKey()
			}
		case !isMissingObject(gerr):
			return gerr
		}
	}
	r.proven = true
	return r.quarantine(ctx, failure{name, err}, true)
}

// keyProven records that the key opens this journal and quarantines the
// packs that failed to decrypt before in this run.
func (r *receiver) keyProven(ctx context.Context) error {
	r.proven = true
	pending := r.pending
	r.pending = nil
	for _, f := range pending {
		if err := r.quarantine(ctx, f, false); err != nil { // reported when met
			return err
		}
	}
	return nil
}

// quarantine records a pack that cannot be opened, with the stage and
// the error text but never its content, and goes on; report says to
// report the pack as done (not yet reported).
func (r *receiver) quarantine(ctx context.Context, f failure, report bool) error {
	j := r.j
	stage := stageOf(f.err)
	if stage == "" {
		stage = engine.StageDecode
	}
	q := quarantineEntry{Stage: string(stage), Error: f.err.Error(), At: j.cfg.Now().UTC()}
	j.mu.Lock()
	j.st.quarantine[f.name] = q
	delete(j.st.retry, f.name)
	j.st.noteName(f.name)
	j.mu.Unlock()
	key := j.key(f.name)
	r.res.Quarantined = append(r.res.Quarantined, Quarantine{Key: key, Stage: q.Stage, Err: q.Error, At: q.At})
	j.cfg.Log.Warn("journalsync: pack cannot be opened; quarantined", "pack", key, "stage", q.Stage, "err", q.Error)
	if err := j.save(ctx); err != nil {
		return err
	}
	if report {
		r.report(key)
	}
	return nil
}

// wrongKey is the error of a run in which every pack failed to decrypt
// and the key never opened a pack of this journal, or no longer opens
// the last one it opened: a wrong passphrase (or a missing one), not
// corruption. Nothing is quarantined.
func (r *receiver) wrongKey() error {
	f := r.pending[0]
	what := "wrong passphrase or salt"
	if r.j.cfg.Cipher == nil {
		what = "no passphrase configured, but the journal is probably encrypted"
	}
	return &engine.Error{Op: "receive journal", DocID: r.j.key(f.name), Stage: engine.StageDecrypt,
		Err: fmt.Errorf("journalsync: no pack of the journal can be opened (%d tried, nothing quarantined): %s; first error: %v: %w",
			len(r.pending), what, f.err, engine.ErrDecrypt)}
}

func (r *receiver) report(key string) {
	r.p.Packs++
	r.p.Key = key
	if r.j.cfg.Progress != nil {
		r.j.cfg.Progress(r.p)
	}
}

// docRecord is a document record of a pack with its revision.
type docRecord struct {
	id, rev, key string
	raw          json.RawMessage
}

// apply stores the records of one opened pack and checkpoints it:
// chunks (stored only when absent), then the document revisions the
// store lacks (RevsDiff, then BulkDocs with new_edits=false), then the
// hooks (chunk arrivals, then a Hold per written metadata revision).
// Applying a pack twice is harmless.
func (r *receiver) apply(ctx context.Context, name string, recs []journal.Record) error {
	j := r.j
	var chunks []engine.Chunk
	var chunkIDs []string
	var docs []docRecord
	for _, rec := range recs {
		if rec.IsChunk() {
			chunks = append(chunks, engine.Chunk{ID: rec.ID, Data: rec.ChunkData})
			chunkIDs = append(chunkIDs, rec.ID)
			continue
		}
		key := rec.Key()
		docs = append(docs, docRecord{id: rec.ID, rev: strings.TrimPrefix(key, rec.ID+"-"), key: key, raw: rec.Doc})
	}
	if len(chunks) > 0 {
		if err := j.cfg.Local.PutChunks(ctx, chunks); err != nil {
			return err
		}
	}
	written, err := r.writeDocs(ctx, docs)
	if err != nil {
		return err
	}
	if j.cfg.Arrivals != nil && len(chunkIDs) > 0 {
		j.cfg.Arrivals.ChunksArrived(chunkIDs)
	}
	if err := r.hold(ctx, written); err != nil {
		return err
	}

	j.mu.Lock()
	st := j.st
	for _, id := range chunkIDs {
		st.knownIDs.add(id)
	}
	for _, d := range docs {
		st.knownIDs.add(d.key)
	}
	st.addIndex(name, chunkIDs)
	st.addReceived(name)
	st.opened, st.lastOpened = true, name
	delete(st.quarantine, name)
	delete(st.retry, name)
	j.mu.Unlock()
	if err := j.save(ctx); err != nil {
		return err
	}
	r.res.PacksReceived++
	r.res.ChunksReceived += len(chunks)
	r.res.DocsWritten += len(written)
	r.p.Docs += len(written)
	r.p.Chunks += len(chunks)
	j.cfg.Log.Debug("journalsync: pack received", "pack", j.key(name), "docs", len(docs), "written", len(written), "chunks", len(chunks))
	r.report(j.key(name))
	return nil
}

// writeDocs writes the revisions the local store lacks and returns the
// ones it accepted.
func (r *receiver) writeDocs(ctx context.Context, docs []docRecord) ([]json.RawMessage, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	j := r.j
	revs := make(map[string][]string)
	for _, d := range docs {
		revs[d.id] = append(revs[d.id], d.rev)
	}
	missing, err := j.cfg.Local.RevsDiff(ctx, revs)
	if err != nil {
		return nil, err
	}
	var write []json.RawMessage
	taken := make(map[engine.DocRev]bool)
	for _, d := range docs {
		dr := engine.DocRev{ID: d.id, Rev: d.rev}
		if !taken[dr] && slices.Contains(missing[d.id], d.rev) {
			taken[dr] = true
			write = append(write, d.raw)
		}
	}
	var written []json.RawMessage
	for start := 0; start < len(write); start += bulkDocsBatch {
		batch := write[start:min(start+bulkDocsBatch, len(write))]
		results, err := j.cfg.Local.BulkDocs(ctx, batch)
		if err != nil {
			return nil, err
		}
		refused := make(map[int]bool)
		for i, br := range results {
			if br.Error != "" {
				refused[i] = true
				r.res.Rejected++
				j.cfg.Log.Warn("journalsync: local store refused a received document", "doc", br.ID, "rev", br.Rev, "reason", br.Error)
			}
		}
		for i, raw := range batch {
			if !refused[i] {
				written = append(written, raw)
			}
		}
	}
	return written, nil
}

// hold hands every written metadata revision to the Holder, as
// engine/replicate does for pulled documents.
func (r *receiver) hold(ctx context.Context, written []json.RawMessage) error {
	j := r.j
	if j.cfg.Holder == nil {
		return nil
	}
	for _, raw := range written {
		d, err := livesync.ParseDoc(raw)
		if err != nil || !(d.IsFileDoc() || isBodylessTombstone(d)) {
			continue
		}
		m, err := livesync.ParseMeta(d)
		if err != nil {
			j.cfg.Log.Warn("journalsync: received metadata is malformed", "doc", d.ID(), "err", err)
			continue
		}
		out, err := j.cfg.Holder.Hold(ctx, hold.FromMeta(m), j.cfg.Remote.ID())
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			j.cfg.Log.Warn("journalsync: hold failed", "doc", m.ID, "rev", m.Rev, "err", err)
			continue
		}
		j.cfg.Log.Debug("journalsync: received metadata", "doc", m.ID, "rev", m.Rev, "outcome", out.String())
	}
	return nil
}

// isBodylessTombstone reports a _deleted document of a file id without
// body fields (a foreign writer's deletion), which the purgatory must
// also see.
func isBodylessTombstone(d livesync.Doc) bool {
	if !d.Deleted() || docid.IsSystemID(d.ID()) || docid.IsChunkID(d.ID()) {
		return false
	}
	for k := range d {
		if len(k) == 0 || k[0] != '_' {
			return false
		}
	}
	return true
}

// stageOf returns the Stage of the outermost *engine.Error in err.
func stageOf(err error) engine.Stage {
	var e *engine.Error
	if errors.As(err, &e) {
		return e.Stage
	}
	return ""
}

// isMissingObject reports an absent object (deleted after it was
// listed), as opposed to a missing bucket (engine.ErrNoDatabase, which
// also wraps engine.ErrNotFound) or any failure to answer. The stage does
// not tell them apart: S3 adapters answer both with StageStorage.
func isMissingObject(err error) bool {
	return errors.Is(err, engine.ErrNotFound) && !errors.Is(err, engine.ErrNoDatabase)
}
