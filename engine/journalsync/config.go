package journalsync

import (
	"errors"
	"log/slog"
	"time"

	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Defaults of Config. DefaultMaxPackRecords and DefaultMaxPackBytes are
// upstream's flush limits (commonlib JournalSyncCore.ts maxOutBufLength
// and maxBinarySize): a pack is sealed once it holds more than 250
// records or more than 10 MiB of payload, so upstream packs hold at most
// 251 records. DefaultChangesBatch is upstream's batchSize for reading the
// local changes feed.
const (
	DefaultMaxPackRecords = 250
	DefaultMaxPackBytes   = 10 << 20
	DefaultPackCacheBytes = 32 << 20
	DefaultChangesBatch   = 100
)

// Config configures a Journal. The zero value of every optional field
// means its documented default; Local and Remote are required.
type Config struct {
	// Local is the local replica. Received documents are written to it,
	// sent ones read from its changes feed, and the per-journal checkpoint
	// is kept in it as a _local document (see CheckpointID).
	Local store.Store
	// Remote is the bucket (and prefix) holding the journal.
	Remote Objects
	// Cipher seals and opens packs as whole objects (an *e2ee.Cipher for
	// the vault's passphrase and the bucket's salt); nil means plain packs.
	Cipher journal.Cipher
	// Epoch is the journal epoch the caller read from the bucket's sync
	// parameters: "<protocolVersion>:<pbkdf2salt>" (commonlib
	// JournalSyncCore.ts getJournalEpochFromSyncParams). When it differs
	// from the epoch recorded in the checkpoint and the newest pack this
	// device sent is no longer in the bucket, the bucket was wiped and the
	// received/sent bookkeeping starts over (engine/FORMAT.md §6.5). Empty skips
	// the check.
	Epoch string
	// ResendAfterWipe takes every new epoch (after one was recorded and
	// packs were sent) as a wipe, without probing for the last sent pack
	// (a wipe still deleting may not have reached it; packs sealed under
	// the old salt are lost to devices on the new one anyway), and makes
	// a wipe also forget lastLocalSeq, so that the next Send packs every
	// local change again, as ResetCheckpoint does. For a replica that
	// must refill the bucket (a relay bridging it). With it, every run
	// also checks (one listing) that the newest pack this device sent is
	// still there, so packs deleted while the sync parameters stayed are
	// a wipe as well. Without it
	// lastLocalSeq is kept, as upstream keeps it: only changes made after
	// it are sent again.
	ResendAfterWipe bool
	// OnWipe, if set, is called when a wipe is detected, before the
	// operation that detected it continues.
	OnWipe func()

	// Activity, if set, is the boundary of every run (*activity.Tracker):
	// Receive and Sync run inside RunFinite, Send inside RunBounded.
	Activity replicate.Activity
	// Holder, if set, gets every received metadata revision that was
	// written locally, with source Remote.ID() (the chunk source's
	// ThrottleKey), so metadata whose chunks are not local waits in the
	// purgatory.
	Holder replicate.Holder
	// Arrivals, if set, is told the ids of the chunks every received pack
	// carried.
	Arrivals replicate.Arrivals
	// Progress, if set, is called after every pack received or sent, on
	// the goroutine running the operation.
	Progress func(Progress)
	// Log is the logger; nil discards. Pack keys, document ids and error
	// texts are logged, never contents.
	Log *slog.Logger
	// Now is the clock that names sent packs; nil means time.Now.
	Now func() time.Time

	// MaxPackRecords: a pack is sealed when its buffer holds more than
	// this many records (default 250, as upstream: packs of 251).
	MaxPackRecords int
	// MaxPackBytes: a pack is sealed when its payload (before compression)
	// exceeds this many bytes (default 10 MiB, as upstream).
	MaxPackBytes int
	// ChangesBatch is the page size of the local changes feed read by
	// Send (default 100, as upstream).
	ChangesBatch int
	// InflateLimit bounds the inflated size of one pack (default
	// journal.DefaultInflateLimit); a larger pack is quarantined.
	InflateLimit int64

	// DirectFetch is the capability flag of the journal's chunk source:
	// when true, ChunkSource().CanFetchDirect() reports true and readers
	// may fetch chunks by id through the pack index. When false (the
	// default), the journal behaves as upstream's sequential replicator:
	// chunks arrive only through Receive (engine/FORMAT.md §6.6).
	DirectFetch bool
	// PackCacheBytes bounds the decoded packs the chunk source keeps in
	// memory (default 32 MiB; negative disables the cache).
	PackCacheBytes int64
	// RetryQuarantined makes every Receive try the quarantined packs
	// again (see ClearQuarantine for a one-time retry).
	RetryQuarantined bool
	// LateWindow is how far before the newest received pack Receive
	// lists again (default DefaultLateWindow; negative lists strictly
	// after it, as upstream). Pack keys are the sender's clock, so a
	// device whose clock runs behind uploads packs whose keys sort before
	// packs others already received; upstream never sees them. Packs in
	// the window that were already received are skipped without a
	// download, so the cost is the longer listing.
	LateWindow time.Duration
}

// DefaultLateWindow is Config.LateWindow's default.
const DefaultLateWindow = 10 * time.Minute

// Validate reports a configuration error.
func (c Config) Validate() error {
	switch {
	case c.Local == nil:
		return errors.New("journalsync: Local store is required")
	case c.Remote == nil:
		return errors.New("journalsync: Remote objects are required")
	case c.MaxPackRecords < 0 || c.MaxPackBytes < 0 || c.ChangesBatch < 0 || c.InflateLimit < 0:
		return errors.New("journalsync: negative MaxPackRecords, MaxPackBytes, ChangesBatch or InflateLimit")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MaxPackRecords == 0 {
		c.MaxPackRecords = DefaultMaxPackRecords
	}
	if c.MaxPackBytes == 0 {
		c.MaxPackBytes = DefaultMaxPackBytes
	}
	if c.ChangesBatch == 0 {
		c.ChangesBatch = DefaultChangesBatch
	}
	if c.InflateLimit == 0 {
		c.InflateLimit = journal.DefaultInflateLimit
	}
	if c.PackCacheBytes == 0 {
		c.PackCacheBytes = DefaultPackCacheBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.LateWindow == 0 {
		c.LateWindow = DefaultLateWindow
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// Direction names the operation a Progress report belongs to.
type Direction string

// Directions of Progress.
const (
	Receiving Direction = "receive"
	Sending   Direction = "send"
)

// Progress is reported after every pack, for progress bars. Counts are
// totals of the current operation.
type Progress struct {
	Direction Direction
	// Key is the object key of the pack just received or sent.
	Key string
	// Packs counts the packs received (applied or quarantined) or sent.
	Packs int
	// Total is the number of packs this Receive has to look at (0 for
	// Send, which cannot know it in advance).
	Total int
	// Docs and Chunks count document revisions written locally (Receive)
	// or packed (Send), and chunk records received or packed.
	Docs, Chunks int
}

// Quarantine describes a pack that was downloaded but could not be
// opened: its content is never recorded, only why it failed.
type Quarantine struct {
	// Key is the object key of the pack.
	Key string
	// Stage is where opening failed: engine.StageDecrypt (wrong key or
	// altered data) or engine.StageDecode (broken DEFLATE, a malformed
	// record, too large).
	Stage string
	// Err is the error text (without contents).
	Err string
	// At is when it failed last.
	At time.Time
}

// Result is the outcome of one Receive, Send or Sync.
type Result struct {
	// PacksReceived counts packs opened and applied to the local store.
	PacksReceived int
	// DocsWritten counts document revisions the local store lacked and
	// got; ChunksReceived counts chunk records handed to the store (it
	// keeps a chunk only when absent).
	DocsWritten, ChunksReceived int
	// Rejected counts received documents the local store refused one by
	// one (each is logged).
	Rejected int
	// Quarantined lists the packs set aside by this run.
	Quarantined []Quarantine

	// PacksSent, RecordsSent and BytesSent count what Send uploaded
	// (BytesSent: object bytes, after compression and encryption).
	PacksSent, RecordsSent int
	BytesSent              int64
	// Skipped counts local revisions Send did not pack because they came
	// from the journal or were sent before (knownIDs, sentIDs), or could
	// not be packed (each of those is logged).
	Skipped int
}

func (r *Result) add(o Result) {
	r.PacksReceived += o.PacksReceived
	r.DocsWritten += o.DocsWritten
	r.ChunksReceived += o.ChunksReceived
	r.Rejected += o.Rejected
	r.Quarantined = append(r.Quarantined, o.Quarantined...)
	r.PacksSent += o.PacksSent
	r.RecordsSent += o.RecordsSent
	r.BytesSent += o.BytesSent
	r.Skipped += o.Skipped
}
