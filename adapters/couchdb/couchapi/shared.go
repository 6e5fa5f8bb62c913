package couchapi

import "time"

// SharedConfig says how a database shared with other relays (a CouchDB
// store) is coordinated.
type SharedConfig struct {
	LeaseTTL time.Duration // 0 means lease.DefaultTTL
	Refresh  time.Duration // 0 means 2 s
	Holder   string        // this relay's name in the lease; "" means host-pid-random
}

// SharedStatus is a shared database's coordination state.
type SharedStatus struct {
	Leader     bool
	Holder     string
	LeaseUntil time.Time
	Takeovers  uint64
	Refreshes  uint64
	Arrivals   uint64
	LastError  string
}

// SharedStatus returns the coordination state of a shared database; nil
// for one that is not shared.
func (d *HeldDatabase) SharedStatus() *SharedStatus { return nil }
