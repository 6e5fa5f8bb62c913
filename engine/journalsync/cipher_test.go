package journalsync

import (
	"bytes"
	"errors"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/e2ee"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// TestCipherFor: plain settings give no cipher; encrypted ones give a
// cipher in the vault's scheme, told apart by a reader that accepts only
// the legacy layout (forceV1) and by the iteration count.
func TestCipherFor(t *testing.T) {
	salt := bytes.Repeat([]byte{7}, negotiate.SaltSize)
	const pass = "cipher-for"
	for _, tc := range []struct {
		name   string
		s      livesync.Settings
		legacy bool // the body has the legacy layout
	}{
		{"default is V2", livesync.Settings{Encrypt: true, Passphrase: pass}, false},
		{"v2", livesync.Settings{Encrypt: true, Passphrase: pass, E2EEAlgorithm: livesync.E2EEV2}, false},
		{"v1", livesync.Settings{Encrypt: true, Passphrase: pass, E2EEAlgorithm: livesync.E2EEV1}, true},
		{"forceV1", livesync.Settings{Encrypt: true, Passphrase: pass, E2EEAlgorithm: livesync.E2EEForceV1}, true},
		{"forceV1, dynamic iterations", livesync.Settings{Encrypt: true, Passphrase: pass, E2EEAlgorithm: livesync.E2EEForceV1, DynamicIterationCount: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := CipherFor(tc.s, salt)
			if err != nil || c == nil {
				t.Fatalf("CipherFor: %v, %v", c, err)
			}
			body, err := c.EncryptBinary([]byte("a pack"))
			if err != nil {
				t.Fatal(err)
			}
			ref := e2ee.New(pass, salt, e2ee.Options{Algorithm: e2ee.AlgV2, DynamicIterationCount: tc.s.DynamicIterationCount})
			if p, err := ref.DecryptBinary(body); err != nil || string(p) != "a pack" {
				t.Fatalf("V2 reader: %q, %v", p, err)
			}
			legacy := e2ee.New(pass, salt, e2ee.Options{Algorithm: e2ee.AlgForceV1, DynamicIterationCount: tc.s.DynamicIterationCount})
			if _, err := legacy.DecryptBinary(body); (err == nil) != tc.legacy {
				t.Fatalf("legacy-only reader: %v; want it to open the body: %v", err, tc.legacy)
			}
			if tc.s.DynamicIterationCount {
				fixed := e2ee.New(pass, salt, e2ee.Options{Algorithm: e2ee.AlgForceV1})
				if _, err := fixed.DecryptBinary(body); err == nil {
					t.Fatal("a reader with the fixed iteration count opened a body sealed with the dynamic one")
				}
			}
		})
	}

	if c, err := CipherFor(livesync.Settings{Passphrase: pass}, nil); c != nil || err != nil {
		t.Fatalf("plain settings: %v, %v; want no cipher", c, err)
	}
	for name, tc := range map[string]struct {
		s    livesync.Settings
		salt []byte
		want error
	}{
		"no passphrase":     {livesync.Settings{Encrypt: true}, salt, engine.ErrUnsupported},
		"unknown algorithm": {livesync.Settings{Encrypt: true, Passphrase: pass, E2EEAlgorithm: "v9"}, salt, engine.ErrUnsupported},
		"no salt":           {livesync.Settings{Encrypt: true, Passphrase: pass}, nil, negotiate.ErrNoSalt},
	} {
		if c, err := CipherFor(tc.s, tc.salt); c != nil || !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, %v; want %v", name, c, err, tc.want)
		}
	}
}
