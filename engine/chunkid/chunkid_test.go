package chunkid

import (
	"errors"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
)

// TestUpstreamUnitVectors checks the compatibility table of commonlib
// src/managers/HashManager/HashManager.unit.spec.ts, quoted in engine/FORMAT.md
// §3.5: piece "helloWorld", E2EE passphrase "test".
func TestUpstreamUnitVectors(t *testing.T) {
	tests := []struct {
		alg       HashAlg
		plain     string
		encrypted string
	}{
		{XXHash64, "h:37me21jj44pcc", "h:+1ztcqdkimja8x"},
		{XXHash32, "h:1n069eb", "h:+jsnawm"},
		{MixedPureJS, "h:1b68nom123qfyd", "h:+jtawwv4wlm1n"},
		{SHA1, "h:2pGPxorWFQvCZq2k1uh76tH9ABc=", "h:+GU01wMj2+f/NPVC5z+Rz2gjLIlM="},
		{Legacy, "h:-vyucau", "h:+-gslt6r"},
	}
	for _, tt := range tests {
		name := string(tt.alg)
		if tt.alg == Legacy {
			name = "legacy"
		}
		t.Run(name, func(t *testing.T) {
			plain, err := New(tt.alg, false, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := plain.ID("helloWorld"); got != tt.plain {
				t.Errorf("plain ID = %q, want %q", got, tt.plain)
			}
			enc, err := New(tt.alg, true, "test")
			if err != nil {
				t.Fatal(err)
			}
			if got := enc.ID("helloWorld"); got != tt.encrypted {
				t.Errorf("E2EE ID = %q, want %q", got, tt.encrypted)
			}
		})
	}
}

// TestPassphraseMaterial checks hp and hp32: engine/FORMAT.md §3.5 ("hp for test
// = 1whdoaoz2hdns, hp32 = 1337046215") and e2ee.json
// intermediates.chunkIdHashing for "vector-passphrase" (see also
// TestVectorPassphraseMaterial, which reads the file).
func TestPassphraseMaterial(t *testing.T) {
	tests := []struct {
		passphrase string
		hp         string
		hp32       uint32
	}{
		{"test", "1whdoaoz2hdns", 1337046215},
		{"vector-passphrase", "1kn75ll12qr3l8", 1123823938},
	}
	for _, tt := range tests {
		h, err := New(XXHash64, true, tt.passphrase)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.HashedPassphrase(); got != tt.hp {
			t.Errorf("%q: HashedPassphrase = %q, want %q", tt.passphrase, got, tt.hp)
		}
		if got := h.HashedPassphrase32(); got != tt.hp32 {
			t.Errorf("%q: HashedPassphrase32 = %d, want %d", tt.passphrase, got, tt.hp32)
		}
	}
}

// TestExtraVectors checks the extra vectors below the table in engine/FORMAT.md
// §3.5.
func TestExtraVectors(t *testing.T) {
	tests := []struct {
		name    string
		encrypt bool
		piece   string
		want    string
	}{
		{"text", false, "# Hello\n", "h:1k1pm0uba4xzy"},
		{"text e2ee", true, "# Hello\n", "h:+hh1lfufz7xkh"},
		{"binary 00 01 02 03 FF", false, "AAECA/8=", "h:250cr2uwmouss"},
	}
	for _, tt := range tests {
		h, err := New(XXHash64, tt.encrypt, "test")
		if err != nil {
			t.Fatal(err)
		}
		if got := h.ID(tt.piece); got != tt.want {
			t.Errorf("%s: ID = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestNewUnknownAlg(t *testing.T) {
	for _, alg := range []HashAlg{"xxhash128", "XXHASH64", "sha256", " "} {
		h, err := New(alg, false, "")
		if h != nil || !errors.Is(err, engine.ErrUnsupported) {
			t.Errorf("New(%q) = %v, %v; want nil, ErrUnsupported", alg, h, err)
		}
	}
}
