package main

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p"
)

// statusP2P is the "p2p" member of status --json.
type statusP2P struct {
	PeerID   *string `json:"peer_id"`
	Approved *int    `json:"approved"`
	Pending  []struct {
		PeerID string `json:"peer_id"`
		Device string `json:"device"`
	} `json:"pending"`
	IdentityError string `json:"identity_error"`
	BookError     string `json:"peer_book_error"`
}

func statusJSON(t *testing.T, s *session) *statusP2P {
	t.Helper()
	var got struct {
		OK  bool       `json:"ok"`
		P2P *statusP2P `json:"p2p"`
	}
	out := s.ok("", "status", "--json")
	if err := json.Unmarshal([]byte(out), &got); err != nil || !got.OK {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return got.P2P
}

func randomPeerID(t *testing.T) peer.ID {
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

// status shows peer-to-peer state once the replica has a peer book: this
// device's peer id (read, never created), the number of approved peers
// and each pending one with its device name; without a book it says
// nothing of peers, and a broken book or identity is reported, not fatal.
func TestStatusP2P(t *testing.T) {
	s := newSession(t)
	s.ok("text\n", "put", "a.md")
	dir := filepath.Dir(s.store)
	if out := s.ok("", "status"); strings.Contains(out, "p2p") {
		t.Errorf("status without a peer book mentions p2p:\n%s", out)
	}
	if got := statusJSON(t, s); got != nil {
		t.Errorf("status --json without a peer book: p2p = %+v, want null", got)
	}

	book, err := p2p.OpenPeerBook(filepath.Join(dir, p2p.PeerBookFileName))
	if err != nil {
		t.Fatal(err)
	}
	laptop, desktop, phone, stranger := randomPeerID(t), randomPeerID(t), randomPeerID(t), randomPeerID(t)
	for id, name := range map[peer.ID]string{laptop: "laptop", desktop: "desktop"} {
		if err := book.Approve(id, name); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	if err := book.NotePending(phone, "phone", nil, now); err != nil {
		t.Fatal(err)
	}
	if err := book.NotePending(stranger, "", nil, now); err != nil {
		t.Fatal(err)
	}

	// No identity yet: status says so and does not create one.
	out := s.ok("", "status")
	for _, want := range []string{
		"p2p peer id  none yet (livesync p2p id creates it)",
		"p2p peers    2 approved, 2 pending",
		"  pending    " + phone.String() + " (phone) (livesync p2p approve " + phone.String() + ")",
		"  pending    " + stranger.String() + " (livesync p2p approve " + stranger.String() + ")",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, laptop.String()) || strings.Contains(out, desktop.String()) {
		t.Errorf("status lists approved peers by id:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, p2p.IdentityFileName)); !os.IsNotExist(err) {
		t.Errorf("status created the identity file: %v", err)
	}
	got := statusJSON(t, s)
	if got == nil || got.PeerID != nil || got.Approved == nil || *got.Approved != 2 || len(got.Pending) != 2 {
		t.Fatalf("status --json: %+v", got)
	}
	pend := map[string]string{}
	for _, p := range got.Pending {
		pend[p.PeerID] = p.Device
	}
	if d, ok := pend[phone.String()]; !ok || d != "phone" {
		t.Errorf("status --json pending: %+v", got.Pending)
	}
	if _, ok := pend[stranger.String()]; !ok {
		t.Errorf("status --json pending: %+v", got.Pending)
	}

	// With an identity: its peer id, the one p2p id prints.
	own := strings.TrimSpace(s.ok("", "p2p", "id"))
	if out := s.ok("", "status"); !strings.Contains(out, "p2p peer id  "+own+"\n") {
		t.Errorf("status lacks this device's peer id %s:\n%s", own, out)
	}
	if got := statusJSON(t, s); got == nil || got.PeerID == nil || *got.PeerID != own {
		t.Errorf("status --json peer id: %+v, want %s", got, own)
	}

	// A broken identity or book is a line of the status, not a failure.
	if err := os.WriteFile(filepath.Join(dir, p2p.IdentityFileName), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, p2p.PeerBookFileName), []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	out = s.ok("", "status")
	if !strings.Contains(out, "p2p peer id  unreadable identity file (p2p-identity.key)") ||
		!strings.Contains(out, "p2p peers    unreadable peer book (p2p-peers.json)") {
		t.Errorf("status with a broken identity and book:\n%s", out)
	}
	if got := statusJSON(t, s); got == nil || got.IdentityError == "" || got.BookError == "" || got.Approved != nil {
		t.Errorf("status --json with a broken identity and book: %+v", got)
	}
}
