package e2ee

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
)

// refPBKDF2 is PBKDF2-HMAC-SHA256 written from RFC 8018 with crypto/hmac,
// independent of crypto/pbkdf2, standing in for the host's WebCrypto.
func refPBKDF2(password, salt []byte, iter, keyLen int) []byte {
	var out []byte
	for block := uint32(1); len(out) < keyLen; block++ {
		mac := hmac.New(sha256.New, password)
		mac.Write(salt)
		var be [4]byte
		binary.BigEndian.PutUint32(be[:], block)
		mac.Write(be[:])
		u := mac.Sum(nil)
		t := append([]byte(nil), u...)
		for range iter - 1 {
			mac.Reset()
			mac.Write(u)
			u = mac.Sum(u[:0])
			for i := range t {
				t[i] ^= u[i]
			}
		}
		out = append(out, t...)
	}
	return out[:keyLen]
}

// countingHook installs refPBKDF2 as the deriver and counts its calls.
func countingHook(t *testing.T) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	restore := SetPBKDF2(func(password, salt []byte, iter, keyLen int) ([]byte, error) {
		n.Add(1)
		return refPBKDF2(password, salt, iter, keyLen), nil
	})
	t.Cleanup(restore)
	return &n
}

// TestPBKDF2HookDerivesVectorKey checks that DeriveKey goes through the
// installed deriver, that its result equals the vectors' master key (made
// by WebCrypto in octagonal-wheels), and that the cache still holds it.
func TestPBKDF2HookDerivesVectorKey(t *testing.T) {
	v, _ := vectors(t)
	n := countingHook(t)
	for range 3 {
		k, err := DeriveKey(v.Passphrase, vectorSalt(t))
		if err != nil {
			t.Fatal(err)
		}
		if !k.Equal(vectorKey(t)) {
			t.Fatal("hook-derived master key differs from the vector")
		}
	}
	if got := n.Load(); got != 1 {
		t.Errorf("deriver called %d times, want 1 (cached)", got)
	}
}

// TestPBKDF2HookConcurrentSingleDerivation checks that concurrent callers
// of one input still share one derivation through the hook.
func TestPBKDF2HookConcurrentSingleDerivation(t *testing.T) {
	n := countingHook(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := cachedPBKDF2(kdfV2Master, []byte("pw"), []byte("salt-concurrent"), 1000); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := n.Load(); got != 1 {
		t.Errorf("deriver called %d times, want 1", got)
	}
}

// TestPBKDF2HookAllSchemes decrypts the upstream vectors of every scheme
// that derives a key from the passphrase ("%$" setup strings, legacy V1 in
// both iteration modes, V3 "%~") with the hook installed: the hook is
// called and the plaintexts match, so its results equal Go's.
func TestPBKDF2HookAllSchemes(t *testing.T) {
	v, up := vectors(t)
	n := countingHook(t)
	for _, s := range up.Salted {
		got, err := DecryptSetupString(s.Ciphertext, up.Passphrase)
		if err != nil || got != s.Plaintext {
			t.Errorf("salted: %q, %v", got, err)
		}
	}
	for _, lv := range v.LegacyV1.Vectors {
		c := New(v.Passphrase, vectorSalt(t), Options{DynamicIterationCount: lv.Dynamic})
		got, err := c.DecryptString(lv.Ciphertext)
		if err != nil || got != lv.Plaintext {
			t.Errorf("legacy %s: %q, %v", lv.Name, got, err)
		}
	}
	for _, x := range up.V3 {
		c := New(up.Passphrase, nil, Options{})
		got, err := c.DecryptString(x.Ciphertext)
		if err != nil || got != x.Plaintext {
			t.Errorf("v3: %q, %v", got, err)
		}
	}
	if n.Load() == 0 {
		t.Error("the deriver was never called")
	}
}

// TestPBKDF2HookIsUsed shows the hook's output is what keys data: a
// deriver returning wrong bytes makes the vector undecryptable.
func TestPBKDF2HookIsUsed(t *testing.T) {
	_, up := vectors(t)
	if len(up.Salted) == 0 {
		t.Fatal("no salted vectors")
	}
	restore := SetPBKDF2(func(_, _ []byte, _, keyLen int) ([]byte, error) {
		return bytes.Repeat([]byte{7}, keyLen), nil
	})
	_, err := DecryptSetupString(up.Salted[0].Ciphertext, up.Passphrase)
	restore()
	if !errors.Is(err, engine.ErrDecrypt) {
		t.Fatalf("with a wrong deriver: %v, want ErrDecrypt", err)
	}
	// Restoring empties the cache: Go's derivation opens it again.
	got, err := DecryptSetupString(up.Salted[0].Ciphertext, up.Passphrase)
	if err != nil || got != up.Salted[0].Plaintext {
		t.Fatalf("after restore: %q, %v", got, err)
	}
}

// TestPBKDF2HookFailures checks that a failing or short deriver gives
// ErrUnsupported without repeating its error text, and that a failure is
// not cached.
func TestPBKDF2HookFailures(t *testing.T) {
	fail := true
	restore := SetPBKDF2(func(password, salt []byte, iter, keyLen int) ([]byte, error) {
		if fail {
			return nil, errors.New("host said: secret-pw")
		}
		return pbkdf2.Key(sha256.New, string(password), salt, iter, keyLen)
	})
	defer restore()
	_, err := DeriveKey("secret-pw", []byte("salt-failures"))
	if !errors.Is(err, engine.ErrUnsupported) || strings.Contains(err.Error(), "secret-pw") {
		t.Fatalf("failing deriver: %v", err)
	}
	fail = false
	if _, err := DeriveKey("secret-pw", []byte("salt-failures")); err != nil {
		t.Fatalf("retry after a failure: %v", err)
	}
	SetPBKDF2(func(_, _ []byte, _, keyLen int) ([]byte, error) { return make([]byte, keyLen-1), nil })
	if _, err := DeriveKey("secret-pw", []byte("salt-short")); !errors.Is(err, engine.ErrUnsupported) {
		t.Fatalf("short deriver: %v", err)
	}
}

// TestRefPBKDF2 pins the reference deriver to crypto/pbkdf2.
func TestRefPBKDF2(t *testing.T) {
	want, _ := pbkdf2.Key(sha256.New, "pw", []byte("salt"), 1000, 32)
	if got := refPBKDF2([]byte("pw"), []byte("salt"), 1000, 32); !bytes.Equal(got, want) {
		t.Fatal("refPBKDF2 differs from crypto/pbkdf2")
	}
}
