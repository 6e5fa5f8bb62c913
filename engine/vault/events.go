package vault

import (
	"context"
	"time"

	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

// EventKind says what an Event reports.
type EventKind uint8

// File events say what happened to one file of the vault; status events
// what a sync, the hunt or a remote is doing.
const (
	// FileCreated, FileChanged and FileDeleted: a revision of the file
	// was written locally (by Write or Delete) or arrived from a remote
	// with all its chunks.
	FileCreated EventKind = iota + 1
	FileChanged
	FileDeleted
	// FileHeld: the file's metadata arrived from a remote without all of
	// its chunks; it cannot be read until they arrive (FileReleased).
	FileHeld
	// FileReleased: the chunks of a held file are all local now.
	FileReleased

	// SyncProgress: a batch of a replication, or a journal pack, was
	// written (Event.Sync).
	SyncProgress
	// SyncWritten: a bulk write of a replication stored Event.Written
	// documents in Event.Direction (counts that do not restart with the
	// passes of a live sync).
	SyncWritten
	// SyncRetrying: a sync failed in a way it retries itself, after
	// Event.Retry.Delay (Event.Retry).
	SyncRetrying
	// SyncPolled: one poll of a live sync with a journal ended
	// (Event.Journal).
	SyncPolled
	// PackQuarantined: a journal pack could not be opened and was set
	// aside (Event.Quarantine).
	PackQuarantined
	// HuntFound: the hunt brought chunks (Event.Hunt).
	HuntFound
	// HeldCount: the number of held files changed (Event.Held).
	HeldCount
	// SyncStarted and SyncStopped: a sync with Event.Remote began or
	// ended (Event.Direction; Event.Err is why it stopped, nil when a
	// one-shot sync completed).
	SyncStarted
	SyncStopped
)

var kindNames = [...]string{"", "created", "changed", "deleted", "held", "released",
	"sync-progress", "sync-written", "sync-retrying", "sync-polled", "pack-quarantined", "hunt-found", "held-count", "sync-started", "sync-stopped"}

func (k EventKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// IsFile reports whether k is a file event.
func (k EventKind) IsFile() bool { return k >= FileCreated && k <= FileReleased }

// Event is one thing the vault did. Which fields are set depends on Kind.
// Events never carry note contents, passphrases or keys.
type Event struct {
	Kind EventKind
	// Path, DocID and Rev name the file (file events).
	Path, DocID, Rev string
	// Remote is the ID of the remote concerned, "" for local changes.
	Remote string
	// Missing is the number of chunks a held file lacks (FileHeld).
	Missing int

	// Direction is the replication direction (sync events).
	Direction replicate.Direction
	// Written is the number of documents a bulk write stored
	// (SyncWritten).
	Written int
	// Sync is the progress of one direction (SyncProgress of a
	// replication endpoint).
	Sync *replicate.Progress
	// Pack is the progress of a journal (SyncProgress of a journal).
	Pack *journalsync.Progress
	// Journal is what one poll of a live journal sync did (SyncPolled).
	Journal *journalsync.Result
	// Retry is the failure a live sync retries (SyncRetrying).
	Retry *Retry
	// Quarantine is the pack set aside (PackQuarantined).
	Quarantine *journalsync.Quarantine
	// Hunt is the hunt's progress (HuntFound).
	Hunt *HuntProgress
	// Held is the number of held files (HeldCount).
	Held int
	// Err is why a sync stopped (SyncStopped).
	Err error
}

// Retry is a failure a sync handles itself by trying again.
type Retry struct {
	// Direction is the replication direction concerned (Pull for a
	// journal's receive and for the live catch-up).
	Direction replicate.Direction
	// What failed ("live feed", "catch-up", "bulk write", "poll", …).
	What string
	// Delay is the wait before the next attempt.
	Delay time.Duration
	Err   error
}

// HuntProgress is how far a hunt is.
type HuntProgress struct {
	// Found counts the distinct chunks found so far, of Total wanted.
	Found, Total int
	// Stats is the hunt's snapshot.
	Stats hunt.Stats
}

type watcher struct {
	fn   func(Event)
	stop func() bool // stops the context.AfterFunc
}

// Watch calls fn with every event of the vault until ctx ends or stop is
// called. fn runs on the goroutine that caused the event, possibly on
// several goroutines at once (a live sync reports each direction from
// its own); it should return quickly and may call the Vault.
func (v *Vault) Watch(ctx context.Context, fn func(Event)) (stop func()) {
	w := &watcher{fn: fn}
	v.wmu.Lock()
	if v.watchers == nil {
		v.watchers = map[*watcher]struct{}{}
	}
	v.watchers[w] = struct{}{}
	v.wmu.Unlock()
	remove := func() {
		v.wmu.Lock()
		delete(v.watchers, w)
		v.wmu.Unlock()
	}
	v.wmu.Lock()
	w.stop = context.AfterFunc(ctx, remove)
	v.wmu.Unlock()
	return func() {
		w.stop()
		remove()
	}
}

// stopWatchers ends every Watch (Close).
func (v *Vault) stopWatchers() {
	v.wmu.Lock()
	defer v.wmu.Unlock()
	for w := range v.watchers {
		if w.stop != nil {
			w.stop()
		}
	}
	v.watchers = nil
}

// emit delivers e to every watcher.
func (v *Vault) emit(e Event) {
	v.wmu.Lock()
	ws := make([]*watcher, 0, len(v.watchers))
	for w := range v.watchers {
		ws = append(ws, w)
	}
	v.wmu.Unlock()
	for _, w := range ws {
		w.fn(e)
	}
}
