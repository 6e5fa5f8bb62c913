package purgatory

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of Config: the first hunt 3 min after a pushed revision and
// 500 ms after a pulled one, 30 min of active hunting, 24 h of soft
// expiry, and expired or rejected revisions remembered for 7 days.
const (
	DefaultPushedDelay     = 3 * time.Minute
	DefaultPulledDelay     = 500 * time.Millisecond
	DefaultActiveFor       = 30 * time.Minute
	DefaultSoftExpiry      = 24 * time.Hour
	DefaultRememberExpired = 7 * 24 * time.Hour
	DefaultReleaseRetry    = 30 * time.Second
)

// Config configures a Purgatory. The zero value means every default; a
// zero field means its default.
type Config struct {
	// PushedDelay is the delay before the first hunt for a revision a
	// client pushed to us (source ""): its chunks normally follow in the
	// same push. Default 3 minutes.
	PushedDelay time.Duration
	// PulledDelay is the delay before the first hunt for a revision our
	// replication pulled from a source; it batches bursts. Default 500 ms.
	PulledDelay time.Duration
	// ActiveFor is how long a document is hunted actively after it was
	// first held, got a new revision or was retried. Default 30 minutes.
	ActiveFor time.Duration
	// SoftExpiry is how long a document stays held, without active
	// hunting, after ActiveFor ran out. Default 24 hours.
	SoftExpiry time.Duration
	// RememberExpired is how long expired and rejected revisions, and the
	// last released revision of a held document, are remembered.
	// Default 7 days.
	RememberExpired time.Duration
	// ReleaseRetry is the wait before a release that failed for a
	// non-permanent reason (storage, a cancelled context) is tried again.
	// Default 30 s.
	ReleaseRetry time.Duration
	// Logger receives one line per state change of a document; nil
	// discards. Note contents are never logged.
	Logger *slog.Logger
}

// Validate reports negative durations.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"PushedDelay", c.PushedDelay}, {"PulledDelay", c.PulledDelay}, {"ActiveFor", c.ActiveFor},
		{"SoftExpiry", c.SoftExpiry}, {"RememberExpired", c.RememberExpired}, {"ReleaseRetry", c.ReleaseRetry},
	} {
		if f.d < 0 {
			errs = append(errs, fmt.Errorf("purgatory: %s %v is negative", f.name, f.d))
		}
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.PushedDelay, DefaultPushedDelay)
	def(&c.PulledDelay, DefaultPulledDelay)
	def(&c.ActiveFor, DefaultActiveFor)
	def(&c.SoftExpiry, DefaultSoftExpiry)
	def(&c.RememberExpired, DefaultRememberExpired)
	def(&c.ReleaseRetry, DefaultReleaseRetry)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// delayFor is the first-hunt delay of a revision from source.
func (c Config) delayFor(source string) time.Duration {
	if source == ClientPush {
		return c.PushedDelay
	}
	return c.PulledDelay
}
