package journalsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/journal"
)

// packer is the pack being built by one Send.
type packer struct {
	buf      []byte   // the payload: encoded records
	keys     []string // knownIDs/sentIDs keys of the records in buf
	chunkIDs []string
	inBuf    map[string]struct{}
	docs     int
	// doneSeq is the local sequence up to which every change is either in
	// buf, in an uploaded pack, or had nothing to send: the checkpoint
	// may advance to it once buf is uploaded.
	doneSeq string
}

func (p *packer) reset() {
	p.buf, p.keys, p.chunkIDs, p.docs = p.buf[:0], nil, nil, 0
	p.inBuf = make(map[string]struct{})
}

// recordKey is the knownIDs/sentIDs key of a revision (commonlib
// JournalSyncCore.ts getDocKey): the id for a chunk, id-rev otherwise.
func recordKey(id, rev string) string {
	if docid.IsChunkID(id) {
		return id
	}
	return id + "-" + rev
}

// send is engine/FORMAT.md §6.3 (commonlib JournalSyncCore.ts sendLocalJournal):
// the local changes (style all_docs: every leaf) since lastLocalSeq,
// minus what came from or went to the journal, packed into packs of at
// most MaxPackRecords+1 records or about MaxPackBytes, each uploaded with
// one Put and checkpointed after it.
//
// Unlike upstream, known revisions are dropped before BulkGet (their keys
// follow from the changes feed), the checkpoint's sequence never covers a
// change whose records are still unsent (upstream records the whole
// page's sequence after a pack that ends mid-page), and a run that had
// nothing to send still advances lastLocalSeq, so a device that only
// received does not re-read its whole feed on every run.
func (j *Journal) send(ctx context.Context, res *Result) error {
	j.mu.Lock()
	since := j.st.lastLocalSeq
	j.mu.Unlock()
	s := &sender{j: j, res: res, p: Progress{Direction: Sending}}
	s.pk.reset()
	s.pk.doneSeq = since
	for {
		page, err := j.cfg.Local.Changes(ctx, engine.ChangesRequest{Since: since, Limit: j.cfg.ChangesBatch})
		if err != nil {
			return err
		}
		if err := s.page(ctx, page); err != nil {
			return err
		}
		if len(page.Results) == 0 || page.Pending == 0 || page.LastSeq == "" || page.LastSeq == since {
			break // the end, or a feed that does not advance
		}
		since = page.LastSeq
	}
	if len(s.pk.keys) > 0 {
		return s.flush(ctx)
	}
	j.mu.Lock()
	advance := s.pk.doneSeq != j.st.lastLocalSeq
	if advance {
		j.st.lastLocalSeq = s.pk.doneSeq
	}
	j.mu.Unlock()
	if advance {
		return j.save(ctx)
	}
	return nil
}

type sender struct {
	j   *Journal
	res *Result
	p   Progress
	pk  packer
}

// docHeader is what Send reads of a local revision (Data only matters
// for chunks).
type docHeader struct {
	ID      string          `json:"_id"`
	Rev     string          `json:"_rev"`
	Deleted bool            `json:"_deleted"`
	Data    json.RawMessage `json:"data"`
}

// page packs the unsent revisions of one page of changes.
func (s *sender) page(ctx context.Context, page engine.ChangesPage) error {
	j := s.j
	var req []engine.DocRev
	owner := make(map[engine.DocRev]int)
	j.mu.Lock()
	for i, c := range page.Results {
		for _, rev := range c.Revs {
			k := recordKey(c.ID, rev)
			_, pending := s.pk.inBuf[k]
			if pending || j.st.knownIDs.has(k) || j.st.sentIDs.has(k) {
				s.res.Skipped++
				continue
			}
			dr := engine.DocRev{ID: c.ID, Rev: rev}
			if _, dup := owner[dr]; !dup {
				owner[dr] = i
				req = append(req, dr)
			}
		}
	}
	j.mu.Unlock()
	if len(req) > 0 {
		docs, err := j.cfg.Local.BulkGet(ctx, req)
		if err != nil {
			return err
		}
		cur := 0
		for _, raw := range docs {
			var h docHeader
			if err := json.Unmarshal(raw, &h); err != nil {
				s.skip("", "", fmt.Errorf("unreadable revision: %w", engine.ErrMalformed))
				continue
			}
			i, ok := owner[engine.DocRev{ID: h.ID, Rev: h.Rev}]
			if !ok {
				s.skip(h.ID, h.Rev, fmt.Errorf("revision was not asked for: %w", engine.ErrMalformed))
				continue
			}
			if i > cur { // every change before i is complete
				s.pk.doneSeq, cur = page.Results[i-1].Seq, i
			}
			if err := s.add(ctx, h, raw); err != nil {
				return err
			}
		}
	}
	switch {
	case page.LastSeq != "":
		s.pk.doneSeq = page.LastSeq
	case len(page.Results) > 0:
		s.pk.doneSeq = page.Results[len(page.Results)-1].Seq
	}
	return nil
}

// skip logs a revision that cannot be packed; it stays local.
func (s *sender) skip(id, rev string, err error) {
	s.res.Skipped++
	s.j.cfg.Log.Warn("journalsync: local revision cannot be packed; not sent", "doc", id, "rev", rev, "err", err)
}

// add appends one revision to the pack and seals the pack when it
// exceeds a limit (upstream: more than 250 records or 10 MiB).
func (s *sender) add(ctx context.Context, h docHeader, raw json.RawMessage) error {
	rec := journal.Record{ID: h.ID}
	chunk := docid.IsChunkID(h.ID)
	if chunk {
		// Upstream's serializer writes chunk data only; a deleted chunk
		// (no data) would make it throw. Such revisions stay local.
		if h.Deleted || json.Unmarshal(h.Data, &rec.ChunkData) != nil {
			s.skip(h.ID, h.Rev, fmt.Errorf("chunk revision without string data (deleted?): %w", engine.ErrMalformed))
			return nil
		}
	} else {
		rec.Doc = raw
	}
	buf, err := journal.AppendRecord(s.pk.buf, rec)
	if err != nil {
		s.skip(h.ID, h.Rev, err)
		return nil
	}
	k := recordKey(h.ID, h.Rev)
	s.pk.buf = buf
	s.pk.keys = append(s.pk.keys, k)
	s.pk.inBuf[k] = struct{}{}
	if chunk {
		s.pk.chunkIDs = append(s.pk.chunkIDs, h.ID)
	} else {
		s.pk.docs++
	}
	if len(s.pk.keys) > s.j.cfg.MaxPackRecords || len(s.pk.buf) > s.j.cfg.MaxPackBytes {
		return s.flush(ctx)
	}
	return nil
}

// flush seals the pack and uploads it (see upload), then checkpoints: lastLocalSeq, sentIDs,
// sentFiles and the chunk index.
func (s *sender) flush(ctx context.Context) error {
	j := s.j
	body, err := journal.Deflate(s.pk.buf)
	if err != nil {
		return err
	}
	if j.cfg.Cipher != nil {
		body, err = j.cfg.Cipher.EncryptBinary(body)
		if err != nil {
			return &engine.Error{Op: "seal pack", Stage: engine.StageEncrypt, Err: fmt.Errorf("journalsync: encrypt: %w", err)}
		}
	}
	key, err := s.upload(ctx, body)
	if err != nil {
		return err
	}
	name := j.name(key)
	j.mu.Lock()
	st := j.st
	st.addSentFile(name)
	for _, k := range s.pk.keys {
		st.sentIDs.add(k)
	}
	st.addIndex(name, s.pk.chunkIDs)
	st.lastLocalSeq = s.pk.doneSeq
	j.mu.Unlock()
	if err := j.save(ctx); err != nil {
		return err
	}
	s.res.PacksSent++
	s.res.RecordsSent += len(s.pk.keys)
	s.res.BytesSent += int64(len(body))
	s.p.Packs++
	s.p.Key = key
	s.p.Docs += s.pk.docs
	s.p.Chunks += len(s.pk.chunkIDs)
	j.cfg.Log.Debug("journalsync: pack sent", "pack", key, "records", len(s.pk.keys), "bytes", len(body))
	if j.cfg.Progress != nil {
		j.cfg.Progress(s.p)
	}
	s.pk.reset()
	return nil
}

// keyTries bounds the keys upload tries for one pack. Every key it loses
// was taken by another device's pack uploaded meanwhile, so n devices
// sending at once all finish within n tries.
const keyTries = 16

// upload creates the pack object under a key greater than every pack key
// this device knows (journal.PackKey of now, raised to one millisecond
// after the newest it knows) and returns the key. Objects.Put is
// create-only: when another device took that key (ErrExists), upload
// lists the bucket after it and tries the same body again under one
// millisecond after the newest pack key there, so the pack also sorts
// after every pack a receiver may already have listed. After keyTries
// taken keys it gives up with an error wrapping ErrExists; nothing was
// overwritten, and the next Send sends the records again.
func (s *sender) upload(ctx context.Context, body []byte) (string, error) {
	j := s.j
	j.mu.Lock()
	ms := j.cfg.Now().UnixMilli()
	if ms <= j.st.maxMillis {
		ms = j.st.maxMillis + 1
	}
	j.mu.Unlock()
	for try := 1; ; try++ {
		key := journal.PackKey(j.prefix, ms)
		err := j.cfg.Remote.Put(ctx, key, body)
		if !errors.Is(err, ErrExists) {
			return key, err
		}
		if try == keyTries {
			return "", &engine.Error{Op: "send pack", DocID: key, Stage: engine.StageStorage,
				Err: fmt.Errorf("journalsync: the last %d pack keys tried were taken by other devices sending at the same time; nothing was overwritten, send again: %w", keyTries, err)}
		}
		j.cfg.Log.Debug("journalsync: pack key taken by another device; trying a later key", "pack", key, "attempt", try)
		keys, err := j.cfg.Remote.List(ctx, key)
		if err != nil {
			return "", err
		}
		ms++
		for _, k := range keys {
			if m, ok := journal.ParsePackKey(j.prefix, k); ok && m >= ms && m < math.MaxInt64 {
				ms = m + 1
			}
		}
	}
}
