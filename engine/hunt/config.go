package hunt

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of Config (throttle, backoff, memo, hedge): a source gets at
// most 5 requests in flight and 30 starts a minute, an incomplete
// document waits 20 s doubling to 120 s, a lacking answer is remembered
// for 30 min, and a request is hedged after 30 s.
const (
	DefaultMaxInFlight  = 5
	DefaultMaxPerWindow = 30
	DefaultWindow       = 60 * time.Second
	DefaultBackoffBase  = 20 * time.Second
	DefaultBackoffCap   = 120 * time.Second
	DefaultHedgeAfter   = 30 * time.Second
	DefaultMemoSources  = 1024
	DefaultMemoTTL      = 30 * time.Minute
	DefaultBatchSize    = 100 // the engine.ChunkSource limit
)

// Config configures a Hunt. The zero value means every default; a zero
// field means its default.
type Config struct {
	// MaxInFlight bounds requests in flight per throttle key. Default 5.
	MaxInFlight int
	// MaxPerWindow bounds request starts per throttle key in any sliding
	// Window. Default 30.
	MaxPerWindow int
	// Window is the sliding rate window. Default 60 s.
	Window time.Duration
	// BackoffBase and BackoffCap shape the delay after a pass that left
	// chunks missing: base, 2·base, 4·base, … capped (20, 40, 80, 120 s).
	BackoffBase time.Duration
	BackoffCap  time.Duration
	// HedgeAfter is the head start of a primary request before one hedge
	// to a source on another throttle key may start. It is not a timeout.
	// Default 30 s.
	HedgeAfter time.Duration
	// MemoSources caps how many sources the lacked-ids memo remembers
	// (the oldest is evicted). Default 1024.
	MemoSources int
	// MemoTTL is the lazy expiry of one source's memo. Default 30 min.
	MemoTTL time.Duration
	// BatchSize is the most ids in one request, 1 to 100. Default 100.
	BatchSize int
	// Once makes every pass the document's last: a pass that ends with
	// chunks still missing drops the document (EventPassEnded with Next
	// 0) instead of scheduling the next one after a backoff. A caller
	// that hunts once and reports (a command line) enqueues, then Waits.
	Once bool
	// Logger receives action-boundary logs; nil discards. Chunk contents
	// are never logged.
	Logger *slog.Logger
}

// Validate reports negative values, a batch size above 100 and a backoff
// cap below its base.
func (c Config) Validate() error {
	var errs []error
	for _, v := range []struct {
		name string
		n    int
	}{{"MaxInFlight", c.MaxInFlight}, {"MaxPerWindow", c.MaxPerWindow}, {"MemoSources", c.MemoSources}} {
		if v.n < 0 {
			errs = append(errs, fmt.Errorf("hunt: %s %d is negative", v.name, v.n))
		}
	}
	for _, v := range []struct {
		name string
		d    time.Duration
	}{{"Window", c.Window}, {"BackoffBase", c.BackoffBase}, {"BackoffCap", c.BackoffCap},
		{"HedgeAfter", c.HedgeAfter}, {"MemoTTL", c.MemoTTL}} {
		if v.d < 0 {
			errs = append(errs, fmt.Errorf("hunt: %s %v is negative", v.name, v.d))
		}
	}
	if c.BatchSize < 0 || c.BatchSize > DefaultBatchSize {
		errs = append(errs, fmt.Errorf("hunt: BatchSize %d is outside 1..%d", c.BatchSize, DefaultBatchSize))
	}
	if r := c.withDefaults(); r.BackoffCap < r.BackoffBase {
		errs = append(errs, fmt.Errorf("hunt: BackoffCap %v is below BackoffBase %v", r.BackoffCap, r.BackoffBase))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	set := func(p *int, d int) {
		if *p == 0 {
			*p = d
		}
	}
	setD := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	set(&c.MaxInFlight, DefaultMaxInFlight)
	set(&c.MaxPerWindow, DefaultMaxPerWindow)
	set(&c.MemoSources, DefaultMemoSources)
	set(&c.BatchSize, DefaultBatchSize)
	setD(&c.Window, DefaultWindow)
	setD(&c.BackoffBase, DefaultBackoffBase)
	setD(&c.BackoffCap, DefaultBackoffCap)
	setD(&c.HedgeAfter, DefaultHedgeAfter)
	setD(&c.MemoTTL, DefaultMemoTTL)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// backoff is the delay after the attempt-th pass that ended incomplete
// (attempt ≥ 1): base·2^(attempt-1), capped. With the defaults: 20, 40,
// 80, then 120 s.
func (c Config) backoff(attempt int) time.Duration {
	d := c.BackoffBase
	for i := 1; i < attempt && d < c.BackoffCap; i++ {
		d *= 2
	}
	return min(d, c.BackoffCap)
}
