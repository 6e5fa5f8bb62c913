package replicate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// checkpointVersion is part of every replication id; bump it when the
// checkpoint format or its meaning changes.
const checkpointVersion = "livesync-go/replicate/1"

// historyLimit is the number of sessions a checkpoint remembers (as
// PouchDB's checkpointer).
const historyLimit = 5

// ReplicationID returns the id (without "_local/") of the checkpoint
// documents of a replication from source to target with selector: a hash
// over the endpoints' identities and the parameters, as PouchDB derives
// its replication ids, so a different selector (readChunksOnline on or
// off) starts from the beginning.
func ReplicationID(source, target string, selector json.RawMessage) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(checkpointVersion), []byte(source), []byte(target), compactJSON(selector)} {
		var n [8]byte
		l := len(part)
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write(part)
	}
	return "livesync-go-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// checkpointDoc is the body of a _local checkpoint document, shaped like
// PouchDB's replication log.
type checkpointDoc struct {
	SessionID  string         `json:"session_id"`
	LastSeq    string         `json:"last_seq"`
	History    []historyEntry `json:"history"`
	Replicator string         `json:"replicator"`
	Version    int            `json:"version"`
}

type historyEntry struct {
	SessionID string `json:"session_id"`
	LastSeq   string `json:"last_seq"`
}

// checkpoint is the state of one pass: where it started, its session and
// the documents last read or written on each side.
type checkpoint struct {
	since          string
	session        string
	src, tgt       checkpointDoc
	readOnlySource bool

	// The remote side's write is spaced out: remoteSeq is the sequence
	// it still lacks ("" none), remoteBatches the batches and remoteAt
	// the time since its last write.
	remoteSeq     string
	remoteBatches int
	remoteAt      time.Time
}

func (r *Replicator) readCheckpoint(ctx context.Context, lg *leg) (*checkpoint, error) {
	cp := &checkpoint{session: rand.Text(), remoteAt: time.Now()}
	tgt, tgtOK, err := getCheckpoint(ctx, lg.tgt, lg.repID)
	if err != nil {
		return nil, err
	}
	if r.cfg.ReadOnlyRemote {
		// Only pulls get here (validateDirection): the source is the
		// remote, and it is never written.
		cp.readOnlySource = true
		if tgtOK {
			cp.since = tgt.LastSeq
		}
		cp.tgt = tgt
		return cp, nil
	}
	src, srcOK, err := getCheckpoint(ctx, lg.src, lg.repID)
	if isAuth(err) {
		cp.readOnlySource, srcOK, err = true, false, nil
	}
	if err != nil {
		return nil, err
	}
	cp.src, cp.tgt = src, tgt
	switch {
	case cp.readOnlySource && tgtOK:
		cp.since = tgt.LastSeq
	case srcOK && tgtOK:
		cp.since = compareLogs(src, tgt)
	}
	return cp, nil
}

// compareLogs finds where both sides agree (PouchDB
// compareReplicationLogs): the same session means the source's record
// (written after the target's); else the newest session both histories
// know, with the source's sequence; else the start.
func compareLogs(src, tgt checkpointDoc) string {
	if src.SessionID != "" && src.SessionID == tgt.SessionID {
		return src.LastSeq
	}
	for _, s := range src.History {
		for _, t := range tgt.History {
			if s.SessionID == t.SessionID {
				return s.LastSeq
			}
		}
	}
	return ""
}

func getCheckpoint(ctx context.Context, ep engine.Endpoint, id string) (checkpointDoc, bool, error) {
	raw, err := ep.GetLocal(ctx, id)
	if errors.Is(err, engine.ErrNotFound) {
		return checkpointDoc{}, false, nil
	}
	if err != nil {
		return checkpointDoc{}, false, err
	}
	var d checkpointDoc
	if json.Unmarshal(raw, &d) != nil {
		return checkpointDoc{}, false, nil // unreadable: start over
	}
	return d, true, nil
}

// writeCheckpoint records seq: a pull's on the local target after every
// write, a push's on both sides together; the remote side's (and a
// push's local one) when due (see Config.RemoteCheckpointBatches) or when
// force is set, else remembered for flushCheckpoint; n is the number of
// batches seq completes. Every checkpoint only covers changes already on
// the target, so a lagging one means re-listing, never losing, changes.
//
// A push's local checkpoint is its source's: writing it after every page
// would cost a store transaction (and its fsyncs) per page for nothing a
// resumed push needs, since both sides' records of the same session agree
// on the older sequence (compareLogs takes the source's).
func (r *Replicator) writeCheckpoint(ctx context.Context, lg *leg, cp *checkpoint, seq string, n int, force bool) error {
	cp.remoteSeq = seq
	cp.remoteBatches += n
	due := force || cp.remoteBatches >= r.cfg.RemoteCheckpointBatches ||
		time.Since(cp.remoteAt) >= r.cfg.RemoteCheckpointInterval
	if lg.dir == Pull {
		if err := putCheckpoint(ctx, lg.tgt, lg.repID, &cp.tgt, cp.session, seq); err != nil {
			return err
		}
	}
	if !due {
		return nil
	}
	return r.flushCheckpoint(ctx, lg, cp)
}

// flushCheckpoint writes the pending checkpoint, if any: a pull's on the
// remote source, a push's on the remote target and then on the local
// source.
func (r *Replicator) flushCheckpoint(ctx context.Context, lg *leg, cp *checkpoint) error {
	seq := cp.remoteSeq
	if seq == "" {
		return nil
	}
	if lg.dir != Pull {
		if err := putCheckpoint(ctx, lg.tgt, lg.repID, &cp.tgt, cp.session, seq); err != nil {
			return err
		}
	}
	if err := r.putSource(ctx, lg, cp, seq); err != nil {
		return err
	}
	cp.remoteSeq, cp.remoteBatches, cp.remoteAt = "", 0, time.Now()
	return nil
}

// putSource writes the source's checkpoint unless the source is
// read-only (then the target's alone is kept).
func (r *Replicator) putSource(ctx context.Context, lg *leg, cp *checkpoint, seq string) error {
	if cp.readOnlySource {
		return nil
	}
	err := putCheckpoint(ctx, lg.src, lg.repID, &cp.src, cp.session, seq)
	if isAuth(err) {
		cp.readOnlySource = true
		r.cfg.Log.Info("replicate: source is read-only; checkpointing on the target only", "direction", lg.dir.String())
		return nil
	}
	return err
}

func putCheckpoint(ctx context.Context, ep engine.Endpoint, id string, d *checkpointDoc, session, seq string) error {
	next := checkpointDoc{SessionID: session, LastSeq: seq, Replicator: "livesync-go", Version: 1}
	next.History = append(next.History, historyEntry{session, seq})
	for _, h := range d.History {
		if h.SessionID != session && len(next.History) < historyLimit {
			next.History = append(next.History, h)
		}
	}
	raw, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if err := ep.PutLocal(ctx, id, raw); err != nil {
		return err
	}
	*d = next
	return nil
}

func isAuth(err error) bool {
	var e *engine.Error
	return errors.As(err, &e) && e.Stage == engine.StageAuth
}
