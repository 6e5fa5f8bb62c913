//go:build !js

package p2p

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func newPeerID(t testing.TB) peer.ID {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func openBook(t *testing.T, path string) *PeerBook {
	t.Helper()
	b, err := OpenPeerBook(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// allowEvents records an allow-list's watcher calls.
type allowEvents struct {
	mu  sync.Mutex
	got []string
}

func (a *allowEvents) note(id peer.ID, approved bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	verb := "revoked"
	if approved {
		verb = "approved"
	}
	a.got = append(a.got, verb+" "+id.String())
}

func (a *allowEvents) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.got
	a.got = nil
	return out
}

func TestPeerBookPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), PeerBookFileName)
	b := openBook(t, path)
	laptop, phone := newPeerID(t), newPeerID(t)
	seen := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	if err := b.NotePending(laptop, "laptop", []string{"/ip4/127.0.0.1/tcp/4001/p2p/" + laptop.String()}, seen); err != nil {
		t.Fatal(err)
	}
	if err := b.NotePending(phone, "phone", nil, seen); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Allow().Device(laptop); ok {
		t.Fatal("a pending peer is allowed")
	}
	if err := b.Approve(laptop, ""); err != nil {
		t.Fatal(err)
	}
	if name, ok := b.Allow().Device(laptop); !ok || name != "laptop" {
		t.Fatalf("Allow().Device(laptop) = %q, %v; want the announced name, approved", name, ok)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("peer book mode %v, want 0600", fi.Mode().Perm())
	}

	again := openBook(t, path)
	app, pend := again.Approved(), again.Pending()
	if len(app) != 1 || app[0].ID != laptop || app[0].Device != "laptop" || len(app[0].Addrs) != 1 || !app[0].LastSeen.Equal(seen) {
		t.Errorf("approved after reopening = %+v; want the laptop with its address and last sighting", app)
	}
	if len(pend) != 1 || pend[0].ID != phone || pend[0].Device != "phone" {
		t.Errorf("pending after reopening = %+v; want only the phone (approving removes from pending)", pend)
	}
	if _, ok := again.Allow().Device(laptop); !ok {
		t.Error("the reopened book's allow-list lacks the approved peer")
	}
	if err := again.Revoke(laptop); err != nil {
		t.Fatal(err)
	}
	if len(openBook(t, path).Approved()) != 0 {
		t.Error("a revoked peer is still approved after reopening")
	}
}

func TestPeerBookInMemory(t *testing.T) {
	b := openBook(t, "")
	id := newPeerID(t)
	if err := b.Approve(id, "desk"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Allow().Device(id); !ok {
		t.Fatal("not approved")
	}
	if err := b.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Allow().Device(id); !ok {
		t.Fatal("Reload of an in-memory book dropped an approval")
	}
}

// Another process (another PeerBook on the same file) approves and
// revokes; Reload brings the changes, and the allow-list's watchers hear
// of them.
func TestPeerBookReloadFollowsAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), PeerBookFileName)
	running, cli := openBook(t, path), openBook(t, path)
	var ev allowEvents
	defer running.Allow().Watch(ev.note)()
	id := newPeerID(t)

	if err := cli.Approve(id, "laptop"); err != nil {
		t.Fatal(err)
	}
	if _, ok := running.Allow().Device(id); ok {
		t.Fatal("approved before Reload")
	}
	if err := running.Reload(); err != nil {
		t.Fatal(err)
	}
	if name, ok := running.Allow().Device(id); !ok || name != "laptop" {
		t.Fatalf("after Reload: Device = %q, %v", name, ok)
	}
	if got := ev.take(); len(got) != 1 || got[0] != "approved "+id.String() {
		t.Errorf("watcher got %v, want one approval", got)
	}
	if err := running.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := ev.take(); len(got) != 0 {
		t.Errorf("Reload of an unchanged file notified %v", got)
	}

	if err := cli.Revoke(id); err != nil {
		t.Fatal(err)
	}
	if err := running.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := running.Allow().Device(id); ok {
		t.Fatal("still approved after another process revoked it")
	}
	if got := ev.take(); len(got) != 1 || got[0] != "revoked "+id.String() {
		t.Errorf("watcher got %v, want one revocation", got)
	}

	// A change in this process re-reads the file first: the other
	// process's approval is kept.
	other := newPeerID(t)
	if err := cli.Approve(other, "phone"); err != nil {
		t.Fatal(err)
	}
	if err := running.NotePending(newPeerID(t), "stranger", nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, ok := openBook(t, path).Allow().Device(other); !ok {
		t.Error("a write of this process lost the other process's approval")
	}
}

func TestPeerBookCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), PeerBookFileName)
	b := openBook(t, path)
	id := newPeerID(t)
	if err := b.Approve(id, "laptop"); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Each reads as JSON, but as fewer approvals than the user gave: an
	// error, never an empty allow-list that the next change writes back.
	for _, bad := range []string{"{not json", "", "null", "{}", `{"version":0}`, `[]`,
		`{"version":1,"approved":[{"id":"laptop"}]}`, `{"version":9,"approved":[]}`} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := b.Reload(); err == nil {
			t.Fatalf("Reload of %q succeeded", bad)
		}
		if _, ok := b.Allow().Device(id); !ok {
			t.Fatalf("%q revoked the approvals", bad)
		}
		if _, err := OpenPeerBook(path); err == nil {
			t.Fatalf("OpenPeerBook of %q succeeded", bad)
		}
		if err := b.NotePending(newPeerID(t), "knocker", nil, time.Now()); err == nil {
			t.Fatalf("a knock rewrote the file %q", bad)
		}
		if raw, _ := os.ReadFile(path); string(raw) != bad {
			t.Fatalf("the file %q was rewritten", bad)
		}
	}
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseBook feeds the peer book parser arbitrary files: it never
// panics, and a file it accepts has a known version and approved entries
// that are all valid peer ids, each kept by entriesOf.
func FuzzParseBook(f *testing.F) {
	id, _ := peer.Decode("12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf")
	f.Add([]byte(`{"version":1,"approved":[{"id":"` + id.String() + `","device":"a\u202eb","since":"2026-12-02T08:00:00Z"}],"pending":[{"id":"x"}]}`))
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		bf, err := parseBook(raw)
		if err != nil {
			return
		}
		if bf.Version != peerBookVersion {
			t.Fatalf("version %d accepted", bf.Version)
		}
		if got := entriesOf(bf.Approved); len(got) != len(uniqueIDs(bf.Approved)) {
			t.Fatalf("%d approved entries kept of %d", len(got), len(uniqueIDs(bf.Approved)))
		}
	})
}

func uniqueIDs(es []bookEntry) map[string]bool {
	out := map[string]bool{}
	for _, e := range es {
		id, _ := peer.Decode(e.ID)
		out[string(id)] = true
	}
	return out
}

// Any stranger can knock: the pending list keeps the MaxPending seen most
// recently.
func TestPeerBookBoundsPending(t *testing.T) {
	b := openBook(t, filepath.Join(t.TempDir(), PeerBookFileName))
	start := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	var first peer.ID
	for i := range MaxPending + 10 {
		id := newPeerID(t)
		if i == 0 {
			first = id
		}
		if err := b.NotePending(id, "knocker", nil, start.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	pend := b.Pending()
	if len(pend) != MaxPending {
		t.Fatalf("%d pending, want %d", len(pend), MaxPending)
	}
	for _, e := range pend {
		if e.ID == first {
			t.Fatal("the oldest knocker was kept")
		}
		if e.LastSeen.Before(start.Add(10 * time.Second)) {
			t.Fatalf("kept a knocker seen at %v, among the oldest", e.LastSeen)
		}
	}
}

// A peer that knocks again, however often, makes the host rewrite the
// file at most once per pendingRewrite.
func TestPeerBookKnockingDoesNotRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), PeerBookFileName)
	b := openBook(t, path)
	id := newPeerID(t)
	at := time.Now()
	added, err := b.notePending(id, "x", nil, at)
	if err != nil || !added {
		t.Fatalf("first knock: added %v, %v", added, err)
	}
	before, _ := os.Stat(path)
	for i := range 40 {
		if added, err := b.notePending(id, "x", nil, at.Add(time.Duration(i)*pendingRewrite/40)); err != nil || added {
			t.Fatalf("knock %d: added %v, %v", i, added, err)
		}
	}
	after, _ := os.Stat(path)
	if !os.SameFile(before, after) {
		t.Error("repeated knocks rewrote the peer book")
	}
	later := at.Add(pendingRewrite)
	if added, err := b.notePending(id, "x", nil, later); err != nil || added {
		t.Fatalf("knock after pendingRewrite: added %v, %v", added, err)
	}
	if got := openBook(t, path).Pending()[0].LastSeen; !got.Equal(later.UTC().Truncate(0)) {
		t.Errorf("LastSeen in the file = %v, want the knock pendingRewrite later", got)
	}
}

func TestSanitizeDevice(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"laptop", "laptop"},
		{"  my\tphone \n", "my phone"},
		{"evil\x1b[2Jname", "evil[2Jname"},
		{"a\u202egnp.exe", "agnp.exe"}, // right-to-left override dropped
		{"bad\xffutf8", "badutf8"},
		{strings.Repeat("é", 100), strings.Repeat("é", MaxDeviceName)},
	} {
		if got := SanitizeDevice(tc.in); got != tc.want {
			t.Errorf("SanitizeDevice(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	b := openBook(t, "")
	id := newPeerID(t)
	if err := b.Approve(id, "x\x00y"); err != nil {
		t.Fatal(err)
	}
	if name, _ := b.Allow().Device(id); name != "xy" {
		t.Errorf("approved under %q, want the sanitised name", name)
	}
}

// Two processes changing the book at the same time lose nothing.
func TestPeerBookConcurrentProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), PeerBookFileName)
	books := []*PeerBook{openBook(t, path), openBook(t, path)}
	const each = 25
	ids := make([][]peer.ID, len(books))
	var wg sync.WaitGroup
	for i, b := range books {
		for range each {
			ids[i] = append(ids[i], newPeerID(t))
		}
		wg.Go(func() {
			for _, id := range ids[i] {
				if err := b.Approve(id, "d"); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	final := openBook(t, path)
	for _, list := range ids {
		for _, id := range list {
			if _, ok := final.Allow().Device(id); !ok {
				t.Fatalf("an approval was lost (%d of %d kept)", len(final.Approved()), 2*each)
			}
		}
	}
}
