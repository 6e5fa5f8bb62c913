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
	// too. Default 30 s.
	SaveInterval time.Duration
	// Logger receives one line per decision that is not routine (a
	// revision held, released after waiting, dropped unserved, metadata
	// that cannot be judged); nil discards. Note contents, passphrases
	// and keys are never logged.
	Logger *slog.Logger
}

// Validate reports negative durations and an invalid purgatory
// configuration.
func (c Config) Validate() error {
	var errs []error
	if c.SaveInterval < 0 {
		errs = append(errs, fmt.Errorf("holdback: SaveInterval %v is negative", c.SaveInterval))
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
