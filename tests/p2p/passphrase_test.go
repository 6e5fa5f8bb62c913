//go:build !js

package p2ptest

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/adapters/p2p/discovery"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// A device with another vault passphrase is told so when it attaches to
// a peer (a *vault.PassphraseError naming the peer, before anything is
// written), while a device with the right one attaches and reads.
func TestPassphraseMismatchIsClear(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := settings()
	st := memStore(t, "alpha")
	v := openVault(t, st, s, "alpha")
	if _, err := v.Write(ctx, "note.md", []byte("# encrypted on the wire\n"), vault.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	allow := p2p.NewAllowList()
	h := newHost(t, nil)
	t.Cleanup(p2p.Serve(h, p2p.ServeConfig{DB: *p2p.ServedVault(v, groupName, s), Allow: allow}))

	attach := func(name, passphrase string) (*vault.Vault, *vault.Link, error) {
		key, id := newKey(t)
		allow.Allow(id, name)
		ws := s
		ws.Passphrase = passphrase
		cv := openVault(t, memStore(t, name), ws, name)
		r := p2p.NewRemote(newHost(t, key), addrInfo(h), p2p.RemoteOptions{Group: groupName})
		l, err := cv.Attach(ctx, r, attachOptions(passphrase))
		return cv, l, err
	}
	// The first device writes the peer's salt; then the wrong passphrase
	// is caught against the peer's own (encrypted) documents.
	good, link, err := attach("beta", vaultPassphrase)
	if err != nil {
		t.Fatalf("attach with the right passphrase: %v", err)
	}
	if _, err := good.Pull(ctx, link, vault.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	if data, err := good.Read(ctx, "note.md"); err != nil || string(data) != "# encrypted on the wire\n" {
		t.Fatalf("read with the right passphrase: %q, %v", data, err)
	}

	_, _, err = attach("gamma", "not the passphrase")
	var pe *vault.PassphraseError
	if !errors.As(err, &pe) || !errors.Is(err, engine.ErrDecrypt) {
		t.Fatalf("attach with a wrong passphrase: %v (%T); want a *vault.PassphraseError", err, err)
	}
	if !strings.HasPrefix(pe.Remote, "p2p://") || !strings.Contains(pe.Error(), "passphrase is wrong") {
		t.Errorf("the error %q (remote %q) does not name the peer and the passphrase", pe.Error(), pe.Remote)
	}
	if strings.Contains(err.Error(), vaultPassphrase) || strings.Contains(err.Error(), "not the passphrase") {
		t.Errorf("the error shows a passphrase: %q", err.Error())
	}
}

// encodings are the common spellings of s a leak could take.
func encodings(s string) []string {
	b := []byte(s)
	sum := sha256.Sum256(b)
	out := []string{
		s, strings.ToLower(s), strings.ToUpper(s),
		hex.EncodeToString(b),
		base64.StdEncoding.EncodeToString(b), base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b),
		base32.StdEncoding.EncodeToString(b), strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)),
		hex.EncodeToString(sum[:]),
	}
	var long []string
	for _, e := range out {
		if len(e) >= 6 { // a shorter spelling could appear by chance in 64 hex digits
			long = append(long, strings.ToLower(e))
		}
	}
	return long
}

// The room tag, the only thing the Nostr relays see of a group besides
// sealed content, reveals neither the group's id nor its passphrase in any
// common encoding, and tells groups apart: the same passphrase in two
// groups, or two passphrases in one group, give different tags. A sealed
// announcement reveals neither either, and another passphrase cannot
// open it.
func TestRoomTagLeaksNothing(t *testing.T) {
	room, err := discovery.NewRoom(groupName, groupPassphrase)
	if err != nil {
		t.Fatal(err)
	}
	otherGroup, err := discovery.NewRoom("office-notes", groupPassphrase)
	if err != nil {
		t.Fatal(err)
	}
	otherPass, err := discovery.NewRoom(groupName, "another group passphrase")
	if err != nil {
		t.Fatal(err)
	}
	tag := room.Tag()
	if len(tag) < 32 {
		t.Fatalf("the room tag %q is too short to keep groups apart", tag)
	}
	if tag == otherGroup.Tag() || tag == otherPass.Tag() || otherGroup.Tag() == otherPass.Tag() {
		t.Errorf("tags collide: %s, %s (other group), %s (other passphrase)", tag, otherGroup.Tag(), otherPass.Tag())
	}
	_, id := newKey(t)
	now := time.Now()
	sealed, err := room.Seal(discovery.Announcement{PeerID: id.String(), Addrs: []string{"/ip4/127.0.0.1/tcp/4001"}, DeviceName: "laptop", Expires: now.Add(time.Minute)}, now)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := discovery.AnnouncementEvent(room, discovery.NewNostrKey(), discovery.Announcement{PeerID: id.String(), Expires: now.Add(time.Minute)}, now)
	if err != nil {
		t.Fatal(err)
	}
	event, _ := ev.MarshalJSON()
	for _, secret := range []string{groupName, groupPassphrase} {
		for _, enc := range encodings(secret) {
			for what, public := range map[string]string{"room tag": tag, "sealed announcement": sealed, "Nostr event": string(event)} {
				if strings.Contains(strings.ToLower(public), enc) {
					t.Errorf("the %s contains %q, a spelling of a group secret", what, enc)
				}
			}
		}
	}
	if _, err := otherPass.Open(sealed, now); !errors.Is(err, discovery.ErrUndecryptable) {
		t.Errorf("another passphrase opened the announcement: %v", err)
	}
	if a, err := room.Open(sealed, now); err != nil || a.PeerID != id.String() {
		t.Errorf("the group's own room opens %+v, %v", a, err)
	}
}
