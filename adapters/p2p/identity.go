//go:build !js

package p2p

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// IdentityFileName is the conventional name of the identity file beside a
// replica's data.
const IdentityFileName = "p2p-identity.key"

// LoadOrCreateIdentity returns the ed25519 private key stored at path,
// creating it (mode 0600, in libp2p's protobuf key encoding) when the file
// does not exist, so the replica keeps the same peer id across restarts.
// A file that exists but does not hold a key is an error, never silently
// replaced: that would change the peer id every peer approved.
func LoadOrCreateIdentity(path string) (crypto.PrivKey, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		key, err := crypto.UnmarshalPrivateKey(b)
		if err != nil {
			return nil, fmt.Errorf("p2p: identity file %s: %w", path, err)
		}
		return key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("p2p: identity: %w", err)
	}
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("p2p: identity: %w", err)
	}
	b, err = crypto.MarshalPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("p2p: identity: %w", err)
	}
	if err := writePrivate(path, b); err != nil {
		return nil, fmt.Errorf("p2p: identity: %w", err)
	}
	return key, nil
}

// writePrivate writes b to path with mode 0600 through a temporary file in
// the same directory, so a crash never leaves a half-written key.
func writePrivate(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".p2p-identity-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// PeerID returns the peer id of a private key.
func PeerID(key crypto.PrivKey) (peer.ID, error) {
	return peer.IDFromPrivateKey(key)
}
