//go:build !js

package p2p

import (
	"os"
	"path/filepath"
	"testing"
)

func TestIdentityPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), IdentityFileName)
	k1, err := LoadOrCreateIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Fatalf("identity file mode %v, want 0600", mode)
	}
	k2, err := LoadOrCreateIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	id1, _ := PeerID(k1)
	id2, _ := PeerID(k2)
	if id1 != id2 || id1 == "" {
		t.Fatalf("peer id changed across loads: %s, %s", id1, id2)
	}
	// A host started on the same path has the same peer id.
	h, err := NewHost(t.Context(), Config{IdentityPath: path})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.ID() != id1 {
		t.Fatalf("host id %s, want %s", h.ID(), id1)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("%d files beside the replica, want only the key file", len(entries))
	}
}

// A file that is not a key is an error and is left alone.
func TestIdentityCorruptNotReplaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), IdentityFileName)
	if err := os.WriteFile(path, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateIdentity(path); err == nil {
		t.Fatal("a corrupt identity file was accepted")
	}
	b, _ := os.ReadFile(path)
	if string(b) != "not a key" {
		t.Fatal("the corrupt identity file was replaced")
	}
}
