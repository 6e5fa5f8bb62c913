package rpcroom

import "time"

// Clock is the Room's source of time: the current time for ids, and
// timers for call timeouts, the missing-chunk retry and stale streams.
// The zero Config uses the system clock, which testing/synctest fakes.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d, unless the
	// returned timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether
	// it did.
	Stop() bool
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
func (systemClock) AfterFunc(d time.Duration, f func()) Timer {
	return time.AfterFunc(d, f)
}
