package fetch

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of Config, from upstream LiveSync's ChunkFetcher and
// ChunkDeliveryCoordinator (commonlib src/managers/ChunkFetcher.ts,
// ChunkDeliveryCoordinator.ts) and upstream's
// docs/design_docs/chunk_retrieval_and_waiting.md.
const (
	DefaultConcurrency  = 40
	DefaultMinInterval  = 50 * time.Millisecond
	DefaultBatchSize    = 100 // upstream BATCH_SIZE, also the ChunkSource limit
	DefaultStallTimeout = 5 * time.Minute
	DefaultRetryStep    = 2 * time.Second
	DefaultRetryCap     = 10 * time.Second
)

// Config configures a Fetcher. The zero value means every default; a zero
// field means its default (as upstream, where 0 falls back to it).
type Config struct {
	// Concurrency bounds physical requests in flight (upstream
	// concurrencyOfReadChunksOnline). Default 40.
	Concurrency int
	// MinInterval is the minimum time between two request starts
	// (minimumIntervalOfReadChunksOnline). Default 50 ms.
	MinInterval time.Duration
	// BatchSize is the most ids in one request, 1 to 100. Default 100.
	BatchSize int
	// StallTimeout is the inactivity leak fuse of a claim: with no
	// observable progress for this long, the claim and its waiters are
	// released. It is not an arrival budget and never means the remote
	// lacks a chunk. Default 5 minutes.
	StallTimeout time.Duration
	// RetryStep and RetryCap shape the per-identifier backoff after a
	// successful omission: step, 2·step, … up to cap (2, 4, 6, 8, 10, 10 s).
	RetryStep time.Duration
	RetryCap  time.Duration
	// Logger receives action-boundary logs; nil discards. Chunk contents
	// are never logged.
	Logger *slog.Logger
}

// Validate reports a negative value, a batch size above 100 or a retry
// cap below the retry step.
func (c Config) Validate() error {
	var errs []error
	if c.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("fetch: Concurrency %d is negative", c.Concurrency))
	}
	if c.MinInterval < 0 {
		errs = append(errs, fmt.Errorf("fetch: MinInterval %v is negative", c.MinInterval))
	}
	if c.BatchSize < 0 || c.BatchSize > DefaultBatchSize {
		errs = append(errs, fmt.Errorf("fetch: BatchSize %d is outside 1..%d", c.BatchSize, DefaultBatchSize))
	}
	if c.StallTimeout < 0 {
		errs = append(errs, fmt.Errorf("fetch: StallTimeout %v is negative", c.StallTimeout))
	}
	if c.RetryStep < 0 || c.RetryCap < 0 {
		errs = append(errs, fmt.Errorf("fetch: negative retry step or cap"))
	}
	if r := c.withDefaults(); r.RetryCap < r.RetryStep {
		errs = append(errs, fmt.Errorf("fetch: RetryCap %v is below RetryStep %v", r.RetryCap, r.RetryStep))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.MinInterval == 0 {
		c.MinInterval = DefaultMinInterval
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.RetryStep == 0 {
		c.RetryStep = DefaultRetryStep
	}
	if c.RetryCap == 0 {
		c.RetryCap = DefaultRetryCap
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// retryDelay is the backoff after the stage-th successful omission
// (stage ≥ 1): stage·step, capped.
func (c Config) retryDelay(stage int) time.Duration {
	return min(time.Duration(stage)*c.RetryStep, c.RetryCap)
}
