package vault

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// A file is held when the replica has its metadata but not all of its
// chunks (a metadata-only pull, an interrupted one, or chunks that never
// reached the remote): it cannot be read until they arrive. The replica
// itself says which files are held; the vault adds what it cannot say,
// in the _local document HeldRecordID: since when each file is held,
// which remote its metadata came from, and what the last hunt for its
// chunks found.

// HeldRecordID is the _local document (not replicated) holding the
// record of held files (the command-line client's name, kept).
const HeldRecordID = "livesync-go-cli-held"

// heldRecord is the record of held files, by document id.
type heldRecord struct {
	Docs map[string]*heldEntry `json:"docs"`
}

// heldEntry is what the vault knows of one held file.
type heldEntry struct {
	Rev         string    `json:"rev"` // the revision last seen held
	Since       time.Time `json:"since,omitzero"`
	Source      string    `json:"source,omitempty"`
	LastAttempt time.Time `json:"last_attempt,omitzero"`
	LastResult  string    `json:"last_result,omitempty"`
}

// HeldFile is one held file of the replica.
type HeldFile struct {
	File
	// Missing are the chunks it lacks locally, in order of first use.
	Missing []engine.ChunkID
	// Since is when a sync first brought metadata of the file whose
	// chunks were not local (zero: not known).
	Since time.Time
	// Source is the ID of the remote its metadata came from ("": not
	// known).
	Source string
	// LastAttempt is when a hunt last looked for its chunks, and
	// LastResult what it found.
	LastAttempt time.Time
	LastResult  string
	// Reasons say why it is still held after a Hunt (set by Hunt only).
	Reasons []Reason
}

// loadHeld reads the record (empty if there is none or it is damaged: a
// damaged record loses only dates).
func loadHeld(ctx context.Context, st store.Store) (*heldRecord, error) {
	rec := &heldRecord{Docs: map[string]*heldEntry{}}
	raw, err := st.GetLocal(ctx, HeldRecordID)
	if errors.Is(err, engine.ErrNotFound) {
		return rec, nil
	}
	if err != nil {
		return nil, err
	}
	if json.Unmarshal(raw, rec) != nil {
		return &heldRecord{Docs: map[string]*heldEntry{}}, nil
	}
	if rec.Docs == nil {
		rec.Docs = map[string]*heldEntry{}
	}
	return rec, nil
}

func (r *heldRecord) save(ctx context.Context, st store.Store) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return st.PutLocal(ctx, HeldRecordID, b)
}

// heldState returns the winning metadata of doc and the chunks it lacks
// locally (none for a deleted or missing file).
func heldState(ctx context.Context, st store.Store, doc string) (livesync.Meta, bool, []engine.ChunkID, error) {
	m, ok, err := metaOf(ctx, st, doc)
	if err != nil || !ok || m.Deleted {
		return m, ok, nil, err
	}
	missing, err := missingChunks(ctx, st, m)
	return m, true, missing, err
}

// missingChunks returns the chunks of m that are not local, in order of
// first use.
func missingChunks(ctx context.Context, st engine.LocalChunks, m livesync.Meta) ([]engine.ChunkID, error) {
	ids := Distinct(hold.FromMeta(m).Chunks)
	have, err := st.GetChunks(ctx, ids)
	if err != nil {
		return nil, err
	}
	var missing []engine.ChunkID
	for _, id := range ids {
		if _, ok := have[id]; !ok {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

// Held lists the replica's held files, sorted by path.
func (v *Vault) Held(ctx context.Context) ([]HeldFile, error) {
	rec, err := loadHeld(ctx, v.st)
	if err != nil {
		return nil, err
	}
	return heldFiles(ctx, v.st, rec)
}

func heldFiles(ctx context.Context, st store.Store, rec *heldRecord) ([]HeldFile, error) {
	infos, err := st.AllDocs(ctx, store.AllDocsOptions{})
	if err != nil {
		return nil, err
	}
	var out []HeldFile
	for _, in := range infos {
		if docid.IsChunkID(in.ID) || docid.IsSystemID(in.ID) {
			continue
		}
		m, _, missing, err := heldState(ctx, st, in.ID)
		if err != nil {
			return nil, err
		}
		if len(missing) == 0 {
			continue
		}
		n := len(Distinct(hold.FromMeta(m).Chunks))
		h := HeldFile{File: File{Meta: m, Chunks: n, LocalChunks: n - len(missing)}, Missing: missing}
		if e := rec.Docs[m.ID]; e != nil {
			h.Since, h.Source, h.LastAttempt, h.LastResult = e.Since, e.Source, e.LastAttempt, e.LastResult
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Meta.Path < out[j].Meta.Path })
	return out, nil
}

// tracker is the replicator's (and the journal's) Holder and Arrivals
// during a sync: it notes the metadata revisions that arrive, and commit
// sorts them into held files and file events once what arrived with
// them is written (a file's chunks may arrive after its metadata in the
// same pull).
type tracker struct {
	v      *Vault
	source string

	mu      sync.Mutex
	seen    map[string]bool
	arrived bool // chunks arrived: held files are checked again
}

func (v *Vault) newTracker(source string) *tracker {
	return &tracker{v: v, source: source, seen: map[string]bool{}}
}

// Hold notes a pulled metadata revision (replicate.Holder).
func (t *tracker) Hold(_ context.Context, r hold.Revision, _ string) (hold.Outcome, error) {
	t.mu.Lock()
	t.seen[r.Doc] = true
	t.mu.Unlock()
	return hold.Held, nil
}

// ChunksArrived notes that chunks arrived (replicate.Arrivals).
func (t *tracker) ChunksArrived(ids []engine.ChunkID) {
	if len(ids) == 0 {
		return
	}
	t.mu.Lock()
	t.arrived = true
	t.mu.Unlock()
}

// commit records the noted files that are held (since now, unless they
// were held before), forgets those that are not, and emits their events.
func (t *tracker) commit(ctx context.Context) error {
	t.mu.Lock()
	seen, arrived := t.seen, t.arrived
	t.seen, t.arrived = map[string]bool{}, false
	t.mu.Unlock()
	if len(seen) == 0 && !arrived {
		return nil
	}
	return t.v.settle(ctx, seen, arrived, t.source)
}

// settle sorts the documents docs (with all held files when recheck is
// set) into held and complete, updates the held record and emits the
// file events: FileHeld for a revision newly held, FileReleased for a
// held file now complete, FileCreated/Changed/Deleted for the others.
func (v *Vault) settle(ctx context.Context, docs map[string]bool, recheck bool, source string) error {
	v.heldMu.Lock()
	defer v.heldMu.Unlock()
	rec, err := loadHeld(ctx, v.st)
	if err != nil {
		return err
	}
	all := make(map[string]bool, len(docs))
	for d, fresh := range docs {
		all[d] = fresh
	}
	if recheck {
		for d := range rec.Docs {
			all[d] = false
		}
	}
	ids := make([]string, 0, len(all))
	for d := range all {
		ids = append(ids, d)
	}
	sort.Strings(ids)
	now := v.opts.Now()
	var events []Event
	changed := false
	for _, doc := range ids {
		m, ok, missing, err := heldState(ctx, v.st, doc)
		if err != nil {
			return err
		}
		e := rec.Docs[doc]
		if len(missing) > 0 {
			if e == nil {
				e = &heldEntry{Since: now}
				rec.Docs[doc] = e
			}
			if e.Rev != m.Rev {
				events = append(events, Event{Kind: FileHeld, Path: m.Path, DocID: m.ID, Rev: m.Rev, Remote: source, Missing: len(missing)})
			}
			e.Rev = m.Rev
			if source != "" {
				e.Source = source
			}
			changed = true
			continue
		}
		if e != nil {
			delete(rec.Docs, doc)
			changed = true
			if ok {
				events = append(events, Event{Kind: FileReleased, Path: m.Path, DocID: m.ID, Rev: m.Rev, Remote: e.Source})
			}
			continue
		}
		if ok && all[doc] {
			events = append(events, Event{Kind: arrivalKind(m), Path: m.Path, DocID: m.ID, Rev: m.Rev, Remote: source})
		}
	}
	if changed {
		if err := rec.save(ctx, v.st); err != nil {
			return err
		}
	}
	for _, e := range events {
		v.emit(e)
	}
	if changed {
		v.emit(Event{Kind: HeldCount, Held: len(rec.Docs)})
	}
	return nil
}

// arrivalKind is the event of a revision that arrived complete.
func arrivalKind(m livesync.Meta) EventKind {
	switch {
	case m.Deleted:
		return FileDeleted
	case strings.HasPrefix(m.Rev, "1-"):
		return FileCreated
	}
	return FileChanged
}

// noteArrived checks the documents docs again after their chunks were
// fetched: held ones that are complete now are released.
func (v *Vault) noteArrived(ctx context.Context, docs []string) {
	set := make(map[string]bool, len(docs))
	v.heldMu.Lock()
	rec, err := loadHeld(ctx, v.st)
	v.heldMu.Unlock()
	if err != nil {
		return
	}
	for _, d := range docs {
		if rec.Docs[d] != nil {
			set[d] = false
		}
	}
	if len(set) == 0 {
		return
	}
	_ = v.settleKnown(ctx, set)
}

// settleKnown settles documents that are already in the held record (no
// created/changed events for them).
func (v *Vault) settleKnown(ctx context.Context, docs map[string]bool) error {
	return v.settle(ctx, docs, false, "")
}
