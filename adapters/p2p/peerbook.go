//go:build !js

package p2p

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/folder"
)

// PeerBookFileName is the conventional name of the peer book beside a
// replica (or in the relay's data directory).
const PeerBookFileName = "p2p-peers.json"

// Bounds of the peer book. Any stranger who reaches the host can knock,
// so the pending list is bounded: past MaxPending the entry seen longest
// ago is dropped.
const (
	MaxPending      = 256
	MaxDeviceName   = 64 // runes, after SanitizeDevice
	maxBookAddrs    = 32
	maxBookAddrLen  = 512
	peerBookVersion = 1
	// pendingRewrite is how long a pending peer's LastSeen may lag: a
	// peer that announces or knocks again sooner (with the same name and
	// addresses) changes nothing, so that a stranger cannot make the host
	// rewrite the file at will, and other processes do not reload it on
	// every announcement.
	pendingRewrite = 10 * time.Minute
)

// PeerEntry is one peer in the book.
type PeerEntry struct {
	ID       peer.ID
	Device   string
	Addrs    []string
	Since    time.Time // approved, or first seen pending
	LastSeen time.Time
}

// PeerBook is the persistent allow-list (approved peers) and the pending
// peers (seen, not approved), kept in a JSON file written 0600 and
// replaced atomically. Several processes may share the file (the CLI
// approves while a live sync runs): every change re-reads the file first,
// and Reload picks up another process's changes. Allow is the live
// AllowList: approvals and revocations, including those Reload finds,
// reach it (and its watchers) at once. Safe for concurrent use.
type PeerBook struct {
	path  string
	allow *AllowList

	knocks newcomers // new pending peers

	mu       sync.Mutex
	approved map[peer.ID]PeerEntry
	pending  map[peer.ID]PeerEntry
	stamp    fileStamp // of the file as last read or written
}

// fileStamp tells whether the file changed since it was read: the file
// is replaced on every write, so a change is a new file (inode), most
// often with another modification time or size too.
type fileStamp struct {
	fi fs.FileInfo // nil: no file
}

func (s fileStamp) same(o fileStamp) bool {
	if s.fi == nil || o.fi == nil {
		return s.fi == nil && o.fi == nil
	}
	return os.SameFile(s.fi, o.fi) && s.fi.ModTime().Equal(o.fi.ModTime()) && s.fi.Size() == o.fi.Size()
}

// bookFile is the file's JSON.
type bookFile struct {
	Version  int         `json:"version"`
	Approved []bookEntry `json:"approved"`
	Pending  []bookEntry `json:"pending"`
}

type bookEntry struct {
	ID       string    `json:"id"`
	Device   string    `json:"device,omitempty"`
	Addrs    []string  `json:"addrs,omitempty"`
	Since    time.Time `json:"since"`
	LastSeen time.Time `json:"last_seen,omitzero"`
}

// OpenPeerBook reads (or starts) the book at path; "" keeps it in memory.
// A missing file is an empty book (nothing is written until a change).
func OpenPeerBook(path string) (*PeerBook, error) {
	b := &PeerBook{path: path, allow: NewAllowList(), approved: map[peer.ID]PeerEntry{}, pending: map[peer.ID]PeerEntry{}}
	b.mu.Lock()
	changes, err := b.reloadLocked(true)
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	b.apply(changes)
	return b, nil
}

// Allow is the live allow-list of the approved peers.
func (b *PeerBook) Allow() *AllowList { return b.allow }

// Path is the book's file ("" in memory).
func (b *PeerBook) Path() string { return b.path }

// Approve approves id under device (sanitised; "" keeps the name it
// announced or knocked with) and removes it from the pending peers.
func (b *PeerBook) Approve(id peer.ID, device string) error {
	if err := id.Validate(); err != nil {
		return fmt.Errorf("p2p: approve: invalid peer id: %w", err)
	}
	return b.change(func(now time.Time) {
		e, ok := b.approved[id]
		if !ok {
			e = PeerEntry{ID: id, Since: now}
			if p, was := b.pending[id]; was {
				e.Device, e.Addrs, e.LastSeen = p.Device, p.Addrs, p.LastSeen
			}
		}
		if d := SanitizeDevice(device); d != "" {
			e.Device = d
		}
		b.approved[id] = e
		delete(b.pending, id)
	})
}

// Revoke withdraws id's approval (and forgets it as pending). Revoking a
// peer that is not approved is not an error.
func (b *PeerBook) Revoke(id peer.ID) error {
	return b.change(func(time.Time) {
		delete(b.approved, id)
		delete(b.pending, id)
	})
}

// NotePending records that id, not approved, announced itself or asked
// to be served. An approved id is left alone; a new id beyond a burst of
// newcomers (see newcomerBurst) is ignored.
func (b *PeerBook) NotePending(id peer.ID, device string, addrs []string, at time.Time) error {
	_, err := b.notePending(id, device, addrs, at)
	return err
}

// notePending is NotePending; added says whether id was not pending yet.
func (b *PeerBook) notePending(id peer.ID, device string, addrs []string, at time.Time) (added bool, err error) {
	if id.Validate() != nil {
		return false, errors.New("p2p: note pending: invalid peer id")
	}
	device, addrs = SanitizeDevice(device), boundAddrs(addrs)
	b.mu.Lock()
	if _, ok := b.approved[id]; ok {
		b.mu.Unlock()
		return false, nil
	}
	old, was := b.pending[id]
	if was && (device == "" || device == old.Device) && (len(addrs) == 0 || slices.Equal(addrs, old.Addrs)) &&
		at.Sub(old.LastSeen) < pendingRewrite {
		b.mu.Unlock()
		return false, nil
	}
	b.mu.Unlock()
	if !was && !b.knocks.take(at) {
		return false, nil // one of too many strangers at once
	}
	err = b.change(func(time.Time) {
		if _, ok := b.approved[id]; ok {
			return
		}
		e, ok := b.pending[id]
		added = !ok
		if !ok {
			e = PeerEntry{ID: id, Since: at}
		}
		if device != "" {
			e.Device = device
		}
		if len(addrs) > 0 {
			e.Addrs = addrs
		}
		if at.After(e.LastSeen) {
			e.LastSeen = at
		}
		b.pending[id] = e
		b.boundPending()
	})
	return added, err
}

// boundPending drops the pending entries seen longest ago beyond
// MaxPending.
func (b *PeerBook) boundPending() {
	for len(b.pending) > MaxPending {
		var oldest peer.ID
		var at time.Time
		first := true
		for id, e := range b.pending {
			if first || e.LastSeen.Before(at) || (e.LastSeen.Equal(at) && id < oldest) {
				oldest, at, first = id, e.LastSeen, false
			}
		}
		delete(b.pending, oldest)
	}
}

// Approved lists the approved peers, by peer id.
func (b *PeerBook) Approved() []PeerEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	return sortedEntries(b.approved)
}

// Pending lists the pending peers, by peer id.
func (b *PeerBook) Pending() []PeerEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	return sortedEntries(b.pending)
}

// Entry returns id's entry and whether it is approved; ok is false when
// the book does not know id.
func (b *PeerBook) Entry(id peer.ID) (e PeerEntry, approved, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.approved[id]; ok {
		return cloneEntry(e), true, true
	}
	e, ok = b.pending[id]
	return cloneEntry(e), false, ok
}

// Reload re-reads the file (another process approved or revoked) when it
// changed since it was last read or written; the allow-list follows. A
// file that does not parse is an error and changes nothing.
func (b *PeerBook) Reload() error {
	b.mu.Lock()
	changes, err := b.reloadLocked(false)
	b.mu.Unlock()
	b.apply(changes)
	return err
}

// allowChange is one change the allow-list must follow.
type allowChange struct {
	id      peer.ID
	device  string
	approve bool
}

// change re-reads the file, applies fn, writes the file and updates the
// allow-list.
func (b *PeerBook) change(fn func(now time.Time)) error {
	b.mu.Lock()
	if b.path != "" {
		unlock, err := lockBook(b.path)
		if err != nil {
			b.mu.Unlock()
			return err
		}
		defer unlock() // after b.mu's unlock and apply: harmless
	}
	changes, err := b.reloadLocked(true)
	if err != nil {
		b.mu.Unlock()
		b.apply(changes)
		return err
	}
	before := maps2(b.approved)
	fn(time.Now())
	changes = append(changes, diffApproved(before, b.approved)...)
	err = b.writeLocked()
	b.mu.Unlock()
	b.apply(changes)
	return err
}

func (b *PeerBook) apply(changes []allowChange) {
	for _, c := range changes {
		if c.approve {
			b.allow.Allow(c.id, c.device)
		} else {
			b.allow.Revoke(c.id)
		}
	}
}

// reloadLocked reads the file when its stamp changed (always when
// force) and returns the allow-list changes.
func (b *PeerBook) reloadLocked(force bool) ([]allowChange, error) {
	if b.path == "" {
		return nil, nil
	}
	st, err := stampOf(b.path)
	if err != nil {
		return nil, fmt.Errorf("p2p: peer book: %w", err)
	}
	if !force && st.same(b.stamp) {
		return nil, nil
	}
	var f bookFile
	if st.fi != nil {
		raw, err := os.ReadFile(b.path)
		if err != nil {
			return nil, fmt.Errorf("p2p: peer book: %w", err)
		}
		if f, err = parseBook(raw); err != nil {
			return nil, fmt.Errorf("p2p: peer book %s: %w", b.path, err)
		}
	}
	before := b.approved
	b.approved, b.pending = entriesOf(f.Approved), entriesOf(f.Pending)
	for id := range b.approved {
		delete(b.pending, id)
	}
	b.boundPending()
	b.stamp = st
	return diffApproved(before, b.approved), nil
}

func (b *PeerBook) writeLocked() error {
	if b.path == "" {
		return nil
	}
	f := bookFile{Version: peerBookVersion, Approved: wireEntries(b.approved), Pending: wireEntries(b.pending)}
	raw, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("p2p: peer book: %w", err)
	}
	if err := folder.WritePrivate(b.path, append(raw, '\n')); err != nil {
		return fmt.Errorf("p2p: write peer book: %w", err)
	}
	st, err := stampOf(b.path)
	if err != nil {
		return fmt.Errorf("p2p: peer book: %w", err)
	}
	b.stamp = st
	return nil
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileStamp{}, nil
	}
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi: fi}, nil
}

func diffApproved(before, after map[peer.ID]PeerEntry) []allowChange {
	var out []allowChange
	for id := range before {
		if _, ok := after[id]; !ok {
			out = append(out, allowChange{id: id})
		}
	}
	for id, e := range after {
		if old, ok := before[id]; !ok || old.Device != e.Device {
			out = append(out, allowChange{id: id, device: e.Device, approve: true})
		}
	}
	slices.SortFunc(out, func(a, b allowChange) int { return strings.Compare(string(a.id), string(b.id)) })
	return out
}

func maps2(m map[peer.ID]PeerEntry) map[peer.ID]PeerEntry {
	out := make(map[peer.ID]PeerEntry, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// parseBook parses the file. Anything but a peer book of a version this
// program knows is an error, and so is an approved entry whose peer id
// does not parse: a damaged or hand-edited file must never read as fewer
// approvals, which the next change would write back over the user's.
func parseBook(raw []byte) (bookFile, error) {
	var f bookFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return bookFile{}, fmt.Errorf("not a peer book: %w", err)
	}
	if f.Version < 1 {
		return bookFile{}, errors.New("not a peer book: no version")
	}
	if f.Version > peerBookVersion {
		return bookFile{}, fmt.Errorf("version %d is newer than this program knows (%d)", f.Version, peerBookVersion)
	}
	for _, e := range f.Approved {
		if _, err := peer.Decode(e.ID); err != nil {
			return bookFile{}, fmt.Errorf("approved peer %.80q: not a peer id: %w", e.ID, err)
		}
	}
	return f, nil
}

// entriesOf keeps the valid entries of the file (a pending entry with an
// invalid peer id is dropped; parseBook refused approved ones), sanitised.
func entriesOf(in []bookEntry) map[peer.ID]PeerEntry {
	out := make(map[peer.ID]PeerEntry, len(in))
	for _, w := range in {
		id, err := peer.Decode(w.ID)
		if err != nil {
			continue
		}
		out[id] = PeerEntry{ID: id, Device: SanitizeDevice(w.Device), Addrs: boundAddrs(w.Addrs), Since: w.Since, LastSeen: w.LastSeen}
	}
	return out
}

func wireEntries(m map[peer.ID]PeerEntry) []bookEntry {
	out := make([]bookEntry, 0, len(m))
	for _, e := range sortedEntries(m) {
		out = append(out, bookEntry{ID: e.ID.String(), Device: e.Device, Addrs: e.Addrs, Since: e.Since.UTC(), LastSeen: e.LastSeen.UTC()})
	}
	return out
}

func sortedEntries(m map[peer.ID]PeerEntry) []PeerEntry {
	out := make([]PeerEntry, 0, len(m))
	for _, e := range m {
		out = append(out, cloneEntry(e))
	}
	slices.SortFunc(out, func(a, b PeerEntry) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return out
}

func cloneEntry(e PeerEntry) PeerEntry {
	e.Addrs = slices.Clone(e.Addrs)
	return e
}

// SanitizeDevice makes a device name safe to show and store: control and
// formatting characters (which could rewrite a terminal line or reorder
// text) are dropped, invalid UTF-8 is dropped, white space is trimmed and
// the name is cut to MaxDeviceName runes.
func SanitizeDevice(s string) string {
	var sb strings.Builder
	n := 0
	for _, r := range s {
		if n >= MaxDeviceName {
			break
		}
		if unicode.IsSpace(r) {
			r = ' '
		} else if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			continue
		}
		sb.WriteRune(r)
		n++
	}
	return strings.TrimSpace(sb.String())
}

// boundAddrs keeps at most maxBookAddrs addresses of sane length.
func boundAddrs(in []string) []string {
	var out []string
	for _, a := range in {
		if len(out) == maxBookAddrs {
			break
		}
		if a != "" && len(a) <= maxBookAddrLen && utf8.ValidString(a) {
			out = append(out, a)
		}
	}
	return out
}
