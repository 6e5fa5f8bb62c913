package vault

import (
	"context"
	"errors"

	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/fetch"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Status is a snapshot of the vault, for status displays.
type Status struct {
	// Held counts the held files.
	Held int
	// Docs counts the replica's documents (its Info.DocCount), Chunks its
	// chunk documents: each chunk once, however many files use it.
	Docs   int64
	Chunks int
	// Files and Deleted count the live and the deleted files.
	Files, Deleted int
	// HeldPaths are the paths of the live files whose chunks the replica
	// lacks (File.Held), sorted; MissingChunks counts the distinct chunks
	// they lack (a chunk two of them share is one chunk to fetch).
	HeldPaths     []string
	MissingChunks int
	// Remotes are what the replica remembers of each remote, by ID.
	Remotes map[string]RemoteStatus
	// Fetch are the counters of chunks read from remotes.
	Fetch fetch.Stats
}

// RemoteStatus is one remote of a Status.
type RemoteStatus struct {
	RemoteState
	// Attached: the remote is attached now.
	Attached bool
	// Quarantined are a journal's packs that could not be opened, read
	// from the replica without contacting the bucket.
	Quarantined []journalsync.Quarantine
}

// Status returns a snapshot of the vault.
func (v *Vault) Status(ctx context.Context) (Status, error) {
	held, err := v.Held(ctx)
	if err != nil {
		return Status{}, err
	}
	s := Status{Held: len(held), Remotes: map[string]RemoteStatus{}, Fetch: v.fetcher.Stats()}
	if err := v.countFiles(ctx, &s); err != nil {
		return Status{}, err
	}
	attached := map[string]bool{}
	for _, l := range v.Links() {
		attached[l.ID()] = true
	}
	for id, rs := range v.Remotes() {
		q, err := v.Quarantined(ctx, id)
		if err != nil {
			return Status{}, err
		}
		s.Remotes[id] = RemoteStatus{RemoteState: rs, Attached: attached[id], Quarantined: q}
	}
	return s, nil
}

// countFiles sets the document, chunk and file counts of s from the
// replica.
func (v *Vault) countFiles(ctx context.Context, s *Status) error {
	info, err := v.st.Info(ctx)
	if err != nil {
		return err
	}
	s.Docs = info.DocCount
	all, err := v.st.AllDocs(ctx, store.AllDocsOptions{})
	if err != nil {
		return err
	}
	for _, d := range all {
		if docid.IsChunkID(d.ID) {
			s.Chunks++
		}
	}
	files, err := v.List(ctx, "", ListOptions{Deleted: true})
	if err != nil {
		return err
	}
	missing := map[string]bool{}
	for _, f := range files {
		if f.Meta.Deleted {
			s.Deleted++
			continue
		}
		s.Files++
		if !f.Held() {
			continue
		}
		s.HeldPaths = append(s.HeldPaths, f.Meta.Path)
		ids := Distinct(f.Meta.Children)
		have, err := v.st.GetChunks(ctx, ids)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if _, ok := have[id]; !ok {
				missing[id] = true
			}
		}
	}
	s.MissingChunks = len(missing)
	return nil
}

// Quarantined returns the packs the replica's checkpoint of the journal
// remote id holds in quarantine, without contacting the bucket (none
// when the remote is not a journal or was never synced).
func (v *Vault) Quarantined(ctx context.Context, id string) ([]journalsync.Quarantine, error) {
	rs := v.Remote(id)
	if rs == nil || rs.JournalID == "" {
		return nil, nil
	}
	j, err := journalsync.New(journalsync.Config{Local: v.st, Remote: offlineJournal{id: rs.JournalID, prefix: rs.JournalPrefix}})
	if err != nil {
		return nil, err
	}
	return j.Quarantined(ctx)
}

// offlineJournal names a journal bucket without reaching it: enough of
// journalsync.Objects to read the journal's checkpoint in the replica.
type offlineJournal struct{ id, prefix string }

var errOffline = errors.New("vault: the bucket is not contacted")

func (o offlineJournal) List(context.Context, string) ([]string, error) { return nil, errOffline }
func (o offlineJournal) Get(context.Context, string) ([]byte, error)    { return nil, errOffline }
func (o offlineJournal) Put(context.Context, string, []byte) error      { return errOffline }
func (o offlineJournal) Prefix() string                                 { return o.prefix }
func (o offlineJournal) ID() string                                     { return o.id }
