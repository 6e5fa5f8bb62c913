// Package negotiatetest provides an in-memory negotiate.Port and a
// conformance suite that every Port implementation runs: the record
// semantics the handshake relies on (absent records are not found, a
// conditional write on a stale or missing version loses with
// negotiate.ErrConflict), and the handshake, lock and unlock over it.
package negotiatetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// MemPort is an in-memory negotiate.Port, safe for concurrent use. Its
// version tokens are counters.
type MemPort struct {
	mu      sync.Mutex
	exists  bool
	docs    map[negotiate.Record]json.RawMessage
	vers    map[negotiate.Record]int
	writes  int
	journal bool
	// Progress is what Progress reports.
	ProgressValue string
	// ReadErr, when set, is returned by every Read (a failing server).
	// Set it before the port is used.
	ReadErr error
	// BeforeWrite, when set, runs before each Write without the port's
	// lock: it may change the records with Put (a racing client) or
	// return an error, which Write returns. Set it before the port is
	// used.
	BeforeWrite func(r negotiate.Record) error
}

var _ negotiate.Port = (*MemPort)(nil)

// NewMemPort returns an empty port whose database exists. With journal,
// it keeps no version document, as a journal bucket.
func NewMemPort(journal bool) *MemPort {
	return &MemPort{exists: true, journal: journal,
		docs: map[negotiate.Record]json.RawMessage{}, vers: map[negotiate.Record]int{}}
}

// Writes counts the writes that succeeded.
func (p *MemPort) Writes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writes
}

// SetExists makes the database exist or not.
func (p *MemPort) SetExists(exists bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exists = exists
}

// Doc returns record r as stored, nil if absent.
func (p *MemPort) Doc(r negotiate.Record) json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append(json.RawMessage(nil), p.docs[r]...)
}

// Put stores raw as record r and advances its version, as another
// client's write would (it is not counted by Writes).
func (p *MemPort) Put(r negotiate.Record, raw json.RawMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.docs[r] = append(json.RawMessage(nil), raw...)
	p.vers[r]++
}

// Records counts the records stored.
func (p *MemPort) Records() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.docs)
}

// Exists reports whether the database exists.
func (p *MemPort) Exists(context.Context) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exists, nil
}

// Create creates the database.
func (p *MemPort) Create(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exists = true
	return nil
}

// Progress reports ProgressValue.
func (p *MemPort) Progress(context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ProgressValue, nil
}

// Read returns a record and its version.
func (p *MemPort) Read(_ context.Context, r negotiate.Record) (json.RawMessage, string, error) {
	if p.ReadErr != nil {
		return nil, "", p.ReadErr
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	raw, ok := p.docs[r]
	if !ok {
		return nil, "", fmt.Errorf("negotiatetest: %s: %w", r, engine.ErrNotFound)
	}
	return append(json.RawMessage(nil), raw...), strconv.Itoa(p.vers[r]), nil
}

// Write stores a record if it is still at version.
func (p *MemPort) Write(_ context.Context, r negotiate.Record, raw json.RawMessage, version string) (string, error) {
	if p.BeforeWrite != nil {
		if err := p.BeforeWrite(r); err != nil {
			return "", err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.journal && r == negotiate.RecordVersion {
		return "", nil
	}
	cur := ""
	if _, ok := p.docs[r]; ok {
		cur = strconv.Itoa(p.vers[r])
	}
	if cur != version {
		return "", fmt.Errorf("negotiatetest: %s is at %q, not %q: %w", r, cur, version, negotiate.ErrConflict)
	}
	p.writes++
	p.docs[r] = append(json.RawMessage(nil), raw...)
	p.vers[r]++
	return strconv.Itoa(p.vers[r]), nil
}
