package holdback

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/purgatory"
	"github.com/livesync-go/livesync-go/engine/store"
)

// DefaultSaveInterval is how often, by default, the purgatory's state is
// saved into the inner store and the holding area is pruned.
const DefaultSaveInterval = 30 * time.Second

// Defaults of the limits on held documents (Config.MaxHeldDocuments,
// Config.MaxHeldPerOwner). A plugin pushes a note's chunks before its
// metadata, so a held document is rare: a push interrupted between the
// two, or metadata pulled from an upstream whose chunks are hunted. Each
// held document costs about 2.5 KiB of memory besides its body in the
// inner store (the relay with 10,000 held: 23 MB more live heap).
const (
	DefaultMaxHeldDocuments = 10000
	DefaultMaxHeldPerOwner  = 2000
	// DefaultMaxHeldRevisions bounds the held revisions of one
	// document: a note edited this often while its chunks never came.
	DefaultMaxHeldRevisions = 100
)

// Defaults of the limits on the chunk ids of held revisions
// (Config.MaxHeldChunkIDs, Config.MaxHeldChunkIDsPerOwner). Each held
// revision keeps its distinct chunk ids in memory until it leaves: about
// 140 bytes each in the holding area and the purgatory (measured with
// 200,000 ids), some 50 more in the hunt's copy. The document limits
// alone let one user hold tens of gigabytes (2,000 notes of 50,000 chunk
// ids each). A held note is rare (see above) and a large one rarer, but
// a 50 MB text note, the relay's document limit, has some tens of
// thousands of chunks: one user may hold a few such revisions at once,
// and a database about 200 MB of chunk ids at most.
const (
	DefaultMaxHeldChunkIDs         = 1_000_000
	DefaultMaxHeldChunkIDsPerOwner = 200_000
)

// Config configures a Store. The zero value means every default.
type Config struct {
	// Purgatory configures the purgatory core: first-hunt delays (3 min
	// for a client push, 500 ms for a pulled revision), 30 min of active
	// hunting, 24 h of soft expiry, 7 days of memory. Its zero value
	// means the core's defaults. A nil Purgatory.Logger means Logger.
	Purgatory purgatory.Config
	// SaveInterval is how often the purgatory's state (its timers) is
	// saved into the inner store and the bodies of revisions the
	// purgatory gave up are dropped from the holding area. Close saves
	// too. A save writes only a state that changed. Default 30 s.
	SaveInterval time.Duration
	// MaxHeldDocuments is the most documents the Store holds at once,
	// whatever their source. A metadata revision that would make one
	// more document held is refused: its BulkDocs result has Error
	// TooManyHeld and nothing of it is kept; the rest of the batch is
	// written as usual. New revisions of documents held already are
	// not refused by this limit (see MaxHeldRevisions). 0 means
	// DefaultMaxHeldDocuments (10,000); negative is invalid.
	MaxHeldDocuments int
	// MaxHeldPerOwner is the most documents held at once for one owner:
	// the user a write came from (WithOwner). A document counts against
	// the owner of the revision that made it held, until it has no held
	// revision left (released, superseded, expired). Writes with no
	// owner (pulled from an upstream) count against MaxHeldDocuments
	// only. 0 means DefaultMaxHeldPerOwner (2,000); negative is invalid.
	MaxHeldPerOwner int
	// MaxHeldRevisions is the most revisions one document keeps held
	// at once. A new revision of a held document whose chunks are
	// missing, past it, is refused (TooManyHeld), so that one document
	// cannot grow without bound either; a revision that is complete
	// (which releases the document) is never refused. 0 means
	// DefaultMaxHeldRevisions (100); negative is invalid.
	MaxHeldRevisions int
	// MaxHeldChunkIDs is the most chunk ids the held revisions of the
	// Store need together (each revision's distinct chunk ids, counted
	// once per revision): the memory of the holding area grows with it,
	// not with the number of documents. A metadata revision that would
	// pass it is refused (TooManyHeld), as one past MaxHeldDocuments.
	// 0 means DefaultMaxHeldChunkIDs (1,000,000); negative is invalid.
	MaxHeldChunkIDs int
	// MaxHeldChunkIDsPerOwner is MaxHeldChunkIDs for the documents that
	// count against one owner (see MaxHeldPerOwner). 0 means
	// DefaultMaxHeldChunkIDsPerOwner (200,000); negative is invalid.
	MaxHeldChunkIDsPerOwner int
	// MaxHeldChunkIDsName and MaxHeldChunkIDsPerOwnerName name these two
	// limits in a refusal's reason. Empty means "the limit of held chunk
	// ids per database" and "the limit of held chunk ids per user".
	MaxHeldChunkIDsName, MaxHeldChunkIDsPerOwnerName string
	// MaxHeldDocumentsName and MaxHeldPerOwnerName name the two limits
	// in the reason of a refusal, so that its reader knows what to
	// raise (the relay gives its configuration keys). Empty means
	// "the limit of held documents per database" and "the limit of held
	// documents per user".
	MaxHeldDocumentsName, MaxHeldPerOwnerName string
	// Logger receives one line per decision that is not routine (a
	// revision held, released after waiting, dropped unserved, metadata
	// that cannot be judged); nil discards. Note contents, passphrases
	// and keys are never logged.
	Logger *slog.Logger
}

// Validate reports negative durations and limits and an invalid
// purgatory configuration.
func (c Config) Validate() error {
	var errs []error
	if c.SaveInterval < 0 {
		errs = append(errs, fmt.Errorf("holdback: SaveInterval %v is negative", c.SaveInterval))
	}
	if c.MaxHeldDocuments < 0 {
		errs = append(errs, fmt.Errorf("holdback: MaxHeldDocuments %d is negative: give 0 for the default (%d) or a positive limit", c.MaxHeldDocuments, DefaultMaxHeldDocuments))
	}
	if c.MaxHeldPerOwner < 0 {
		errs = append(errs, fmt.Errorf("holdback: MaxHeldPerOwner %d is negative: give 0 for the default (%d) or a positive limit", c.MaxHeldPerOwner, DefaultMaxHeldPerOwner))
	}
	if c.MaxHeldRevisions < 0 {
		errs = append(errs, fmt.Errorf("holdback: MaxHeldRevisions %d is negative: give 0 for the default (%d) or a positive limit", c.MaxHeldRevisions, DefaultMaxHeldRevisions))
	}
	if c.MaxHeldChunkIDs < 0 {
		errs = append(errs, fmt.Errorf("holdback: MaxHeldChunkIDs %d is negative: give 0 for the default (%d) or a positive limit", c.MaxHeldChunkIDs, DefaultMaxHeldChunkIDs))
	}
	if c.MaxHeldChunkIDsPerOwner < 0 {
		errs = append(errs, fmt.Errorf("holdback: MaxHeldChunkIDsPerOwner %d is negative: give 0 for the default (%d) or a positive limit", c.MaxHeldChunkIDsPerOwner, DefaultMaxHeldChunkIDsPerOwner))
	}
	if err := c.Purgatory.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.SaveInterval == 0 {
		c.SaveInterval = DefaultSaveInterval
	}
	if c.MaxHeldDocuments == 0 {
		c.MaxHeldDocuments = DefaultMaxHeldDocuments
	}
	if c.MaxHeldPerOwner == 0 {
		c.MaxHeldPerOwner = DefaultMaxHeldPerOwner
	}
	if c.MaxHeldRevisions == 0 {
		c.MaxHeldRevisions = DefaultMaxHeldRevisions
	}
	if c.MaxHeldChunkIDs == 0 {
		c.MaxHeldChunkIDs = DefaultMaxHeldChunkIDs
	}
	if c.MaxHeldChunkIDsPerOwner == 0 {
		c.MaxHeldChunkIDsPerOwner = DefaultMaxHeldChunkIDsPerOwner
	}
	if c.MaxHeldChunkIDsName == "" {
		c.MaxHeldChunkIDsName = "the limit of held chunk ids per database"
	}
	if c.MaxHeldChunkIDsPerOwnerName == "" {
		c.MaxHeldChunkIDsPerOwnerName = "the limit of held chunk ids per user"
	}
	if c.MaxHeldDocumentsName == "" {
		c.MaxHeldDocumentsName = "the limit of held documents per database"
	}
	if c.MaxHeldPerOwnerName == "" {
		c.MaxHeldPerOwnerName = "the limit of held documents per user"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Purgatory.Logger == nil {
		c.Purgatory.Logger = c.Logger
	}
	return c
}

// Deps are the collaborators of a Store.
type Deps struct {
	// Inner is the store that keeps and serves the documents (memory or
	// bbolt). Required. The Store owns it: Close closes it. Nothing else
	// may write to it while the Store is open, except chunks announced
	// through Store.ChunksArrived.
	Inner store.Store
	// Codec, if set, holds the vault passphrase: metadata whose chunk
	// list is encrypted (path obfuscation) is decrypted in memory to
	// decide. The stored and served documents are never changed. nil
	// means no passphrase: only metadata whose children are readable in
	// the stored form can be held; the rest passes through unheld (see
	// Mode).
	Codec *livesync.Codec
	// Hunter hunts the missing chunks of held documents across upstream
	// sources (*hunt.Hunt). nil means none yet: held documents are
	// released only when their chunks are written through the Store (or
	// announced with ChunksArrived), and still expire by the core's
	// rules.
	Hunter purgatory.Hunter
}

// Mode says how the Store can judge a database's metadata, for /status.
type Mode string

// Modes of a Store.
const (
	// ModeDecrypt: a Codec with the passphrase is configured; obfuscated
	// metadata is decrypted in memory to read its chunk list, so every
	// metadata revision can be held.
	ModeDecrypt Mode = "holdback-decrypt"
	// ModeReadable: no passphrase; metadata whose chunk list is readable
	// (no path obfuscation) is held until its chunks are present.
	ModeReadable Mode = "holdback"
	// ModePassthroughObfuscated: no passphrase, and the latest metadata
	// revision the Store judged had its chunk list encrypted (path
	// obfuscation): such metadata passes through unheld, as a plain
	// CouchDB would serve it.
	ModePassthroughObfuscated Mode = "passthrough-obfuscated"
)
