//go:build !js

package p2p

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// allDocs reads every document of ep's changes feed through BulkGet.
func allDocs(t *testing.T, ep engine.Endpoint) ([]json.RawMessage, error) {
	t.Helper()
	page, err := ep.Changes(t.Context(), engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var revs []engine.DocRev
	for _, c := range page.Results {
		for _, r := range c.Revs {
			revs = append(revs, engine.DocRev{ID: c.ID, Rev: r})
		}
	}
	if len(revs) == 0 {
		t.Fatal("nothing in the changes feed")
	}
	return ep.BulkGet(t.Context(), revs)
}

// An end-to-end encrypted replica serves nothing before a handshake gave
// it the group's salt, then serves its documents encrypted; a plain one
// needs no salt.
func TestServedVaultNeedsTheGroupSalt(t *testing.T) {
	p := newVaultPeer(t, "laptop", e2ee)
	p.write(t, "note.md", "plaintext marker\n")
	served := ServedVault(p.v, "g", e2ee)
	if _, err := allDocs(t, served.Endpoint); !errors.Is(err, ErrNotJoined) {
		t.Fatalf("before any handshake: %v, want ErrNotJoined", err)
	}
	salt := bytes.Repeat([]byte{7}, negotiate.SaltSize)
	raw, err := json.Marshal(negotiate.NewSyncParameters(salt))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := served.Records.Write(t.Context(), negotiate.RecordSyncParameters, raw, ""); err != nil {
		t.Fatal(err)
	}
	docs, err := allDocs(t, served.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if bytes.Contains(d, []byte("plaintext marker")) {
			t.Fatalf("served in clear: %s", d)
		}
	}
	plain := livesync.Settings{CustomChunkSize: 60}
	q := newVaultPeer(t, "desk", plain)
	q.write(t, "note.md", "plaintext marker\n")
	docs, err = allDocs(t, ServedVault(q.v, "g", plain).Endpoint)
	if err != nil {
		t.Fatalf("a plain vault without sync parameters: %v", err)
	}
	all, _ := json.Marshal(docs)
	if !bytes.Contains(all, []byte("plaintext marker")) {
		t.Error("a plain vault's note is not served as is")
	}
}

// A device whose replica serves a group registers itself on the served
// records (RegisterServed): a new device that pulls from it with no
// settings of its own adopts the served vault's (end-to-end encryption,
// path obfuscation) and salt, and reads its notes; a second registration
// changes neither.
func TestRegisterServedNewDeviceAdoptsSettings(t *testing.T) {
	obfuscated := e2ee
	obfuscated.PathObfuscation = true
	host := newVaultPeer(t, "laptop", obfuscated)
	host.write(t, "note.md", "from the laptop\n")
	served := ServedVault(host.v, "g", obfuscated)
	if err := RegisterServed(t.Context(), host.v, served, negotiate.DeviceInfo{DeviceName: "laptop"}, nil); err != nil {
		t.Fatal(err)
	}
	params, rev, err := served.Records.Read(t.Context(), negotiate.RecordSyncParameters)
	if err != nil {
		t.Fatalf("no sync parameters after RegisterServed: %v", err)
	}
	if err := RegisterServed(t.Context(), host.v, served, negotiate.DeviceInfo{DeviceName: "laptop"}, nil); err != nil {
		t.Fatal(err)
	}
	if again, rev2, _ := served.Records.Read(t.Context(), negotiate.RecordSyncParameters); !bytes.Equal(again, params) || rev2 != rev {
		t.Fatal("a second registration rewrote the sync parameters")
	}
	p := servePeer(t, *served, true, nil)
	st, err := store.NewMemory(store.Options{Name: "phone"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	phone, err := vault.Open(t.Context(), st, vault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { phone.Close() })
	link, err := phone.Attach(t.Context(), p.remote, vault.AttachOptions{Passphrase: func() (string, error) { return e2ee.Passphrase, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := phone.Pull(t.Context(), link, vault.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := phone.Settings()
	if err != nil || !got.Encrypt || !got.PathObfuscation {
		t.Fatalf("the new device's settings: %+v, %v; want the served vault's", got, err)
	}
	data, err := phone.Read(t.Context(), "note.md")
	if err != nil || string(data) != "from the laptop\n" {
		t.Fatalf("read: %q, %v", data, err)
	}
}
