package couchapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/bridge"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/lease"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Timing of the relays in these tests.
const (
	testTTL     = 3 * time.Second
	testRefresh = time.Second
)

// oneStore is a Databases whose only database, "vault", is one store
// shared by several HeldDatabases, as one CouchDB database is by several
// relays. Each relay's view can be cut off (every call fails with
// store.ErrUnavailable), as when a relay loses CouchDB or hangs.
type oneStore struct {
	st   store.Store
	cut  *atomic.Bool
	hang *hang
}

func (o oneStore) Open(ctx context.Context, name string) (store.Store, error) {
	if name != "vault" {
		return nil, engine.ErrNotFound
	}
	return cutStore{Store: o.st, cut: o.cut, hang: o.hang}, nil
}
func (o oneStore) Create(ctx context.Context, name string) error { return ErrExists }
func (o oneStore) Delete(ctx context.Context, name string) error { return ErrForbidden }
func (o oneStore) List(ctx context.Context) ([]string, error)    { return []string{"vault"}, nil }

// cutStore is a relay's view of the shared store. While cut, its
// _local documents and its changes feed fail at once; while hung, the
// lease document answers only when the caller gives up or the hang ends
// (only the lease: a goroutine that waits for a mutex held by a hung
// call keeps synctest's clock from advancing).
type cutStore struct {
	store.Store
	cut  *atomic.Bool
	hang *hang
}

// hang is a store that stops answering, from start to stop.
type hang struct{ ch atomic.Pointer[chan struct{}] }

func (h *hang) start() {
	ch := make(chan struct{})
	h.ch.Store(&ch)
}

func (h *hang) stop() {
	if ch := h.ch.Swap(nil); ch != nil {
		close(*ch)
	}
}

var errCut = fmt.Errorf("the test cut this relay off: %w", store.ErrUnavailable)

func (c cutStore) failure(ctx context.Context, id string) error {
	if ch := c.hang.ch.Load(); ch != nil && id == lease.DefaultID {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-*ch:
		}
	}
	if c.cut.Load() {
		return errCut
	}
	return nil
}

func (c cutStore) UpdateLocal(ctx context.Context, id string, fn func(old json.RawMessage) (json.RawMessage, error)) error {
	if err := c.failure(ctx, id); err != nil {
		return err
	}
	return c.Store.(store.LocalUpdater).UpdateLocal(ctx, id, fn)
}

func (c cutStore) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	if err := c.failure(ctx, id); err != nil {
		return nil, err
	}
	return c.Store.GetLocal(ctx, id)
}

func (c cutStore) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	if err := c.failure(ctx, ""); err != nil {
		return engine.ChangesPage{}, err
	}
	return c.Store.Changes(ctx, req)
}

// relay is one "relay": a HeldDatabases over the shared store, with
// bridges that have no upstreams (a bridge's hunt is what the lease hands
// over).
type relay struct {
	name   string
	h      *HeldDatabases
	d      *HeldDatabase
	cut    atomic.Bool
	hang   hang
	builds atomic.Int32
}

// openRelay opens the relay name over st, with the vault passphrase
// passphrase[0] if given.
func openRelay(t *testing.T, st store.Store, name string, passphrase ...string) *relay {
	t.Helper()
	r := &relay{name: name}
	var pw map[string]string
	if len(passphrase) > 0 {
		pw = map[string]string{"vault": passphrase[0]}
	}
	r.h = NewHeld(oneStore{st: st, cut: &r.cut, hang: &r.hang}, HeldConfig{Passphrases: pw,
		Bridge: func(db string, local bridge.Local, log *slog.Logger) (*bridge.Bridge, error) {
			r.builds.Add(1)
			return bridge.New(local, bridge.Config{DB: db, UUID: "uuid", Log: log})
		},
		Shared: func(db string) *SharedConfig {
			return &SharedConfig{LeaseTTL: testTTL, Refresh: testRefresh, Holder: name}
		},
	})
	d, err := r.h.OpenHeld(t.Context(), "vault")
	if err != nil {
		t.Fatalf("relay %s: %v", name, err)
	}
	r.d = d
	t.Cleanup(func() { r.close(t) })
	return r
}

func (r *relay) close(t *testing.T) {
	t.Helper()
	r.cut.Store(false)
	r.hang.stop()
	if err := r.h.Close(); err != nil {
		t.Errorf("closing relay %s: %v", r.name, err)
	}
}

// leaders names the relays that lead, and checks that each one's Bridge
// agrees with its status.
func leaders(t *testing.T, rs ...*relay) []string {
	t.Helper()
	var out []string
	for _, r := range rs {
		s := r.d.SharedStatus()
		if s.Leader != (r.d.Bridge() != nil) {
			t.Errorf("relay %s: leader %v but bridge %v", r.name, s.Leader, r.d.Bridge())
		}
		if s.Leader {
			out = append(out, r.name)
		}
	}
	return out
}

func newSharedStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.NewMemory(StoreOptions(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestSharedLeaseFailover: of three relays exactly one leads; when it
// closes, another takes over at its next attempt (TTL/3 later at most)
// with the hunt's state the leader saved (a throttle window start
// carries over); when the new leader is cut off from the store, it
// stops leading before its lease runs out and a third takes over the
// moment it does, counting the hunt's windows as full (the lease was not
// released).
func TestSharedLeaseFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore(t)
		start := time.Now()
		a := openRelay(t, st, "A")
		synctest.Wait()
		if got := leaders(t, a); len(got) != 1 {
			t.Fatalf("a lone relay does not lead: %+v", a.d.SharedStatus())
		}
		time.Sleep(100 * time.Millisecond) // B and C act 100 ms after A in each period
		b, c := openRelay(t, st, "B"), openRelay(t, st, "C")
		synctest.Wait()
		if got := leaders(t, a, b, c); len(got) != 1 || got[0] != "A" {
			t.Fatalf("leaders %q, want [A]", got)
		}
		if s := b.d.SharedStatus(); s.Holder != "A" || !s.LeaseUntil.Equal(start.Add(testTTL)) || s.Self != "B" {
			t.Errorf("B's status %+v: want holder A until %v", s, start.Add(testTTL))
		}
		t0 := time.Now()
		const key = "upstream.example:5984"
		a.d.Bridge().Hunt().Restore(hunt.State{Throttles: map[string][]time.Time{key: {t0}}})

		time.Sleep(1400 * time.Millisecond) // t=1.5 s: A renewed at 1 s
		synctest.Wait()
		a.close(t)
		closed := time.Now()
		if got := leaders(t, b, c); len(got) != 0 {
			t.Fatalf("leaders %q right after A released the lease", got)
		}
		time.Sleep(600 * time.Millisecond) // t=2.1 s: B and C try again
		synctest.Wait()
		got := leaders(t, b, c)
		if len(got) != 1 {
			t.Fatalf("leaders %q %v after A closed, want one", got, time.Since(closed))
		}
		lead, other := b, c
		if got[0] == "C" {
			lead, other = c, b
		}
		if s := lead.d.SharedStatus(); s.Takeovers != 1 || !s.LeaseUntil.Equal(time.Now().Add(testTTL)) {
			t.Errorf("the new leader's status: %+v", s)
		}
		if th := lead.d.Bridge().Hunt().State().Throttles[key]; len(th) != 1 || !th[0].Equal(t0) {
			t.Errorf("the new leader's throttle %q: %v, want [%v] carried over", key, th, t0)
		}

		// The leader is cut off at 2.5 s: its renewals at 3.1 and 4.1 s
		// fail, and at 4.1 s the next one (5.1 s) would come too late.
		time.Sleep(400 * time.Millisecond)
		lead.cut.Store(true)
		time.Sleep(1550 * time.Millisecond) // 4.05 s
		synctest.Wait()
		if got := leaders(t, lead, other); len(got) != 1 || got[0] != lead.name {
			t.Fatalf("at 4.05 s leaders %q, want [%s] (its lease lasts until 5.1 s)", got, lead.name)
		}
		if s := lead.d.SharedStatus(); !strings.Contains(s.LastError, "lease") {
			t.Errorf("the cut-off leader's LastError: %q", s.LastError)
		}
		time.Sleep(100 * time.Millisecond) // 4.15 s
		synctest.Wait()
		if got := leaders(t, lead, other); len(got) != 0 {
			t.Fatalf("at 4.15 s leaders %q, want none: the cut-off leader steps down before its lease ends", got)
		}
		time.Sleep(time.Second) // 5.15 s: the other took the lease at 5.1 s, when it expired
		synctest.Wait()
		if got := leaders(t, lead, other); len(got) != 1 || got[0] != other.name {
			t.Fatalf("at 5.15 s leaders %q, want [%s]", got, other.name)
		}
		// The lease ran out unreleased: what the cut-off leader's hunt did
		// after its last renewal is unknown, so the third leader counts the
		// window as full from its takeover (hunt.DefaultMaxPerWindow starts).
		th := other.d.Bridge().Hunt().State().Throttles[key]
		if takeover := time.Now().Add(-50 * time.Millisecond); len(th) != hunt.DefaultMaxPerWindow || !th[0].Equal(takeover) {
			t.Errorf("the third leader's throttle: %v, want %d starts at %v", th, hunt.DefaultMaxPerWindow, takeover)
		}
		// Back in touch, the old leader follows.
		lead.cut.Store(false)
		time.Sleep(testTTL)
		synctest.Wait()
		if got := leaders(t, lead, other); len(got) != 1 || got[0] != other.name {
			t.Fatalf("after the cut ended leaders %q, want [%s]", got, other.name)
		}
		if s := lead.d.SharedStatus(); s.LastError != "" || s.Holder != other.name {
			t.Errorf("the old leader's status once back: %+v", s)
		}
		b.close(t)
		c.close(t)
	})
}

// TestSharedHungLeader: a leader whose lease requests stop being answered gives up
// its renewal after TTL/3 and stops leading before its lease ends; a
// follower takes over when it does.
func TestSharedHungLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore(t)
		a := openRelay(t, st, "A") // takes the lease at 0 s, until 3 s
		time.Sleep(100 * time.Millisecond)
		b := openRelay(t, st, "B") // tries at 0.1, 1.1, 2.1, 3.1 s
		time.Sleep(400 * time.Millisecond)
		a.hang.start() // A's renewal at 1 s hangs until 2 s
		time.Sleep(1450 * time.Millisecond)
		synctest.Wait()
		if got := leaders(t, a, b); len(got) != 1 || got[0] != "A" {
			t.Fatalf("at 1.95 s leaders %q, want [A]", got)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := leaders(t, a, b); len(got) != 0 {
			t.Fatalf("at 2.05 s leaders %q, want none", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := leaders(t, a, b); len(got) != 0 {
			t.Fatalf("at 3.05 s leaders %q, want none", got)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := leaders(t, a, b); len(got) != 1 || got[0] != "B" {
			t.Fatalf("at 3.15 s leaders %q, want [B]", got)
		}
	})
}

// Documents of the tests: a plain note and its chunks.
func testNote(id string, chunks ...string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"_id": id, "_rev": "1-a1", "_revisions": map[string]any{"start": 1, "ids": []string{"a1"}},
		"path": id, "children": chunks, "ctime": 1700000000000, "mtime": 1700000000000, "size": 10, "type": "plain", "eden": map[string]any{}})
	return b
}

func testChunk(id string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"_id": id, "_rev": "1-c" + strings.TrimPrefix(id, "h:"), "type": "leaf", "data": "piece " + id})
	return b
}

func push(t *testing.T, r *relay, docs ...json.RawMessage) {
	t.Helper()
	res, err := r.d.BulkDocs(t.Context(), docs)
	if err != nil {
		t.Fatalf("push through %s: %v", r.name, err)
	}
	for _, x := range res {
		if x.Error != "" {
			t.Fatalf("push through %s: %+v", r.name, x)
		}
	}
}

func visible(t *testing.T, r *relay, id string) bool {
	t.Helper()
	_, err := r.d.Get(t.Context(), id, store.GetOptions{})
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// TestSharedChunksThroughAnotherRelay: a note pushed metadata-first
// through A is hidden on every relay until its chunks arrive through C;
// A's changes feed then releases it, once.
func TestSharedChunksThroughAnotherRelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore(t)
		a, b, c := openRelay(t, st, "A"), openRelay(t, st, "B"), openRelay(t, st, "C")
		synctest.Wait()
		push(t, a, testNote("note.md", "h:one", "h:two"))
		if _, n := a.d.HeldFirst(10); n != 1 {
			t.Fatalf("A holds %d, want the note", n)
		}
		for _, r := range []*relay{a, b, c} {
			if visible(t, r, "note.md") {
				t.Fatalf("the held note is visible through %s", r.name)
			}
		}
		push(t, c, testChunk("h:one"), testChunk("h:two"))
		synctest.Wait()
		for _, r := range []*relay{a, b, c} {
			if !visible(t, r, "note.md") {
				t.Errorf("the note is not visible through %s once its chunks arrived", r.name)
			}
		}
		if s := a.d.SharedStatus(); s.Arrivals < 2 {
			t.Errorf("A's arrivals: %+v", s)
		}
		revs, err := st.GetRevs(t.Context(), "note.md", store.RevsOptions{All: true})
		if err != nil || len(revs) != 1 {
			t.Errorf("the note's leaves: %+v, %v; want one revision", revs, err)
		}
		time.Sleep(testRefresh) // every relay agrees the note is no longer held
		synctest.Wait()
		for _, r := range []*relay{a, b, c} {
			if _, n := r.d.HeldFirst(10); n != 0 {
				t.Errorf("%s still holds %d", r.name, n)
			}
		}
		a.close(t)
		b.close(t)
		c.close(t)
	})
}

// TestSharedRefreshAdoption: a hold made through a follower is adopted
// by the leader at its next refresh and handed to its hunt; when the
// leader writes the chunks, the follower forgets the hold at its next
// refresh.
func TestSharedRefreshAdoption(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore(t)
		a := openRelay(t, st, "A")
		synctest.Wait()
		b := openRelay(t, st, "B")
		synctest.Wait()
		push(t, b, testNote("note.md", "h:one"))
		if _, n := a.d.HeldFirst(10); n != 0 {
			t.Fatalf("A holds %d before its refresh", n)
		}
		time.Sleep(testRefresh)
		synctest.Wait()
		if held, n := a.d.HeldFirst(10); n != 1 || held[0].Doc != "note.md" {
			t.Fatalf("A holds %+v after its refresh, want note.md adopted", held)
		}
		if _, ok := a.d.Bridge().Hunt().State().Docs["note.md"]; !ok {
			t.Errorf("the leader's hunt does not hunt the adopted note: %+v", a.d.Bridge().Hunt().State())
		}
		if s := a.d.SharedStatus(); s.Refreshes == 0 {
			t.Errorf("A's refreshes: %+v", s)
		}
		push(t, a, testChunk("h:one"))
		synctest.Wait()
		if !visible(t, b, "note.md") {
			t.Fatal("the note is not released")
		}
		time.Sleep(testRefresh)
		synctest.Wait()
		if _, n := b.d.HeldFirst(10); n != 0 {
			t.Errorf("B still holds %d after its refresh", n)
		}
		a.close(t)
		b.close(t)
	})
}

// TestSharedNeedsLocalUpdater: a shared database over a store that
// cannot update _local documents atomically is refused; a database that
// is not shared has no SharedStatus.
func TestSharedNeedsLocalUpdater(t *testing.T) {
	st := newSharedStore(t)
	h := NewHeld(plainDatabases{st}, HeldConfig{Shared: func(string) *SharedConfig { return &SharedConfig{} }})
	defer h.Close()
	if _, err := h.OpenHeld(t.Context(), "vault"); err == nil || !strings.Contains(err.Error(), "atomically") {
		t.Errorf("OpenHeld over a store without UpdateLocal: %v", err)
	}
	inner := NewMemoryDatabases()
	h2 := NewHeld(inner, HeldConfig{})
	defer h2.Close()
	if err := h2.Create(t.Context(), "plain"); err != nil {
		t.Fatal(err)
	}
	d, err := h2.OpenHeld(t.Context(), "plain")
	if err != nil || d.SharedStatus() != nil {
		t.Errorf("a database that is not shared: %v, %+v", err, d.SharedStatus())
	}
}

// plainDatabases serves a store through a wrapper that hides its
// optional interfaces.
type plainDatabases struct{ st store.Store }

type plainStore struct{ store.Store }

func (p plainDatabases) Open(ctx context.Context, name string) (store.Store, error) {
	return plainStore{p.st}, nil
}
func (p plainDatabases) Create(ctx context.Context, name string) error { return nil }
func (p plainDatabases) Delete(ctx context.Context, name string) error { return nil }
func (p plainDatabases) List(ctx context.Context) ([]string, error)    { return []string{"vault"}, nil }

// TestSharedVaultSalt: the first client writes the vault's salt through
// A; B, opened before, adopts the vault's codec at its next refresh, so
// it can judge obfuscated metadata too.
func TestSharedVaultSalt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newSharedStore(t)
		a, b := openRelay(t, st, "A", "secret"), openRelay(t, st, "B", "secret")
		synctest.Wait()
		if c, _ := b.d.Codec(); c != nil {
			t.Fatal("B has a codec before the vault has a salt")
		}
		salt, err := negotiate.NewSalt(nil)
		if err != nil {
			t.Fatal(err)
		}
		params, _ := json.Marshal(negotiate.NewSyncParameters(salt))
		if err := a.d.PutLocal(t.Context(), negotiate.SyncParametersLocalID, params); err != nil {
			t.Fatal(err)
		}
		if c, _ := a.d.Codec(); c == nil {
			t.Fatal("A has no codec after the salt was written through it")
		}
		time.Sleep(testRefresh)
		synctest.Wait()
		if c, got := b.d.Codec(); c == nil || !bytes.Equal(got, salt) {
			t.Fatalf("B's codec after its refresh: %v, salt %x", c, got)
		}
	})
}
