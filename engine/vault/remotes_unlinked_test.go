//go:build nocouchdb && nos3

package vault

import (
	"errors"
	"testing"

	"github.com/livesync-go/livesync-go/engine/replicate"
)

// Built without remote adapters (go test -tags nocouchdb,nos3 -run
// TestNoRemotes), the vault refuses to attach or replicate, and a hunt
// with nothing attached finds nothing to ask.
func TestNoRemotesLinked(t *testing.T) {
	v := openVault(t, newStore(t), Options{})
	if _, err := v.Attach(t.Context(), nil, AttachOptions{}); !errors.Is(err, errNoRemotes) {
		t.Fatalf("Attach: %v, want errNoRemotes", err)
	}
	if _, err := v.Replicate(t.Context(), nil, replicate.Pull, SyncOptions{}); !errors.Is(err, errNoRemotes) {
		t.Fatalf("Replicate: %v, want errNoRemotes", err)
	}
	if _, err := v.Hunt(t.Context(), HuntOptions{Once: true}); err != nil {
		t.Fatalf("Hunt: %v", err)
	}
}
