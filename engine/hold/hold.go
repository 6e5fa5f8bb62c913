// Package hold names what a holder of pulled metadata is given and what
// it answers: a Revision (a metadata document revision and the chunk ids
// it needs) and an Outcome (released, held, superseded, ...).
//
// Replication (engine/replicate) and journal sync (engine/journalsync)
// hand every pulled metadata revision to a holder; the purgatory
// (engine/purgatory) is the holder that keeps a revision back until its
// chunks are local. This package lets the replicators name those values
// without depending on the purgatory.
package hold

import (
	"fmt"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// Revision is one metadata document revision as a holder sees it: the
// document id, its CouchDB revision and the chunk ids it needs. It never
// carries note contents.
type Revision struct {
	Doc string
	Rev string
	// Chunks are the chunk ids the revision needs from the store, in any
	// order, duplicates allowed. Empty for a tombstone or an inline note:
	// such a revision is complete at once.
	Chunks []engine.ChunkID
}

// FromMeta returns the Revision of a metadata document: its children
// without the ones embedded in eden (chunks a note carries in its own
// metadata, engine/FORMAT.md §1.9). Deleted documents and legacy inline
// notes need no chunks.
func FromMeta(m livesync.Meta) Revision {
	r := Revision{Doc: m.ID, Rev: m.Rev}
	if m.Deleted || m.Type == livesync.TypeNotes {
		return r
	}
	for _, id := range m.Children {
		if _, ok := m.Eden[id]; ok {
			continue
		}
		r.Chunks = append(r.Chunks, id)
	}
	return r
}

// Outcome is what a holder did with a revision.
type Outcome uint8

// Outcomes of holding a revision.
const (
	// Released: the revision's chunks were local; it was verified,
	// materialised and its event emitted.
	Released Outcome = iota + 1
	// Held: the revision waits and is not served.
	Held
	// Superseded: a newer revision of the document was released already
	// (now or before); this one is never served.
	Superseded
	// PreviouslyExpired: the revision expired from the purgatory
	// recently; it is not held again (only a retry does).
	PreviouslyExpired
	// Rejected: the revision failed verification, now or recently; it is
	// never served.
	Rejected
	// Dropped: the store no longer has the revision.
	Dropped
)

func (o Outcome) String() string {
	switch o {
	case Released:
		return "released"
	case Held:
		return "held"
	case Superseded:
		return "superseded"
	case PreviouslyExpired:
		return "previously expired"
	case Rejected:
		return "rejected"
	case Dropped:
		return "dropped"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}
