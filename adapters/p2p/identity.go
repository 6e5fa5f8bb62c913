//go:build !js

package p2p

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/livesync-go/livesync-go/adapters/folder"
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
	if err := folder.WritePrivate(path, b); err != nil {
		return nil, fmt.Errorf("p2p: identity: %w", err)
	}
	return key, nil
}

// PeerID returns the peer id of a private key.
func PeerID(key crypto.PrivKey) (peer.ID, error) {
	return peer.IDFromPrivateKey(key)
}
