package e2ee

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/livesync-go/livesync-go/engine"
)

// Parameters of E2EE V2, as fixed by octagonal-wheels src/encryption/hkdf.ts.
const (
	// PBKDF2Iterations is the PBKDF2-HMAC-SHA256 iteration count of the V2
	// master key (OWASP's recommendation that upstream adopted).
	PBKDF2Iterations = 310000
	// MasterKeySize is the length in bytes of a V2 master key.
	MasterKeySize = 32
	// PBKDF2SaltSize is the length in bytes of the per-vault PBKDF2 salt
	// that upstream stores as base64 in the sync-parameters document, and
	// of the per-message PBKDF2 salt embedded in "%$" data.
	PBKDF2SaltSize = 32
	// HKDFSaltSize is the length in bytes of the per-message HKDF salt.
	HKDFSaltSize = 32
	// IVSize is the AES-GCM nonce length of V2 (and "%~" V3) data.
	IVSize = 12
	// TagSize is the AES-GCM authentication tag length of every scheme.
	TagSize = 16
)

// Key is the V2 master key of one (passphrase, PBKDF2 salt) pair:
// PBKDF2-HMAC-SHA256(UTF-8 passphrase, salt, 310000 iterations, 32 bytes).
// Every "%=" message key is derived from it with HKDF, so one Key opens all
// V2 data of a vault. A Key is immutable and safe for concurrent use; it
// does not remember the passphrase.
type Key struct {
	master [MasterKeySize]byte
}

// KeyFromMaster wraps a master key derived elsewhere (for example by the
// host's WebCrypto in the js/wasm build, which is much faster there than
// Go's PBKDF2). master must be exactly MasterKeySize bytes; it is copied.
func KeyFromMaster(master []byte) (*Key, error) {
	if len(master) != MasterKeySize {
		return nil, fmt.Errorf("e2ee: master key must be %d bytes: %w", MasterKeySize, engine.ErrMalformed)
	}
	k := new(Key)
	copy(k.master[:], master)
	return k, nil
}

// DeriveKey returns the V2 master key of passphrase and salt. The PBKDF2
// work (about 60 ms natively) is done once per process for each distinct
// (passphrase, salt): results are kept in a small process-wide cache whose
// index is a SHA-256 digest, never the passphrase itself. Concurrent calls
// for the same pair wait for a single derivation. Upstream memoises the
// same way (octagonal-wheels src/encryption/hkdf.ts deriveMasterKey).
func DeriveKey(passphrase string, salt []byte) (*Key, error) {
	raw, err := cachedPBKDF2(kdfV2Master, []byte(passphrase), salt, PBKDF2Iterations)
	if err != nil {
		return nil, err
	}
	k := new(Key)
	copy(k.master[:], raw[:])
	return k, nil
}

// Equal reports whether k and other hold the same master key, in constant
// time.
func (k *Key) Equal(other *Key) bool {
	if k == nil || other == nil {
		return k == other
	}
	return subtle.ConstantTimeCompare(k.master[:], other.master[:]) == 1
}

// kdfKind separates the uses of the derivation cache so that equal inputs
// of different schemes can never share an entry.
type kdfKind byte

const (
	kdfV2Master kdfKind = iota + 1 // PBKDF2(UTF-8 passphrase, salt32, 310000)
	kdfLegacy                      // PBKDF2(SHA-256(passphrase), salt16, n)
	kdfV3                          // PBKDF2(UTF-8 passphrase, fixed salt, 100000)
)

// deriveCacheSize bounds the process-wide derivation cache. Legacy V1 data
// and V1 path obfuscation use a salt per message batch or per path, so the
// cache must not grow without bound.
const deriveCacheSize = 64

type deriveEntry struct {
	once sync.Once
	key  [32]byte
	err  error
}

var deriveCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]*deriveEntry
	order   [][sha256.Size]byte // insertion order, oldest first
}

// cacheIndex digests every input of a derivation; only the digest is kept.
func cacheIndex(kind kdfKind, password, salt []byte, iter int) [sha256.Size]byte {
	h := sha256.New()
	var hdr [1 + 8 + 8 + 8]byte
	hdr[0] = byte(kind)
	binary.BigEndian.PutUint64(hdr[1:], uint64(iter))
	binary.BigEndian.PutUint64(hdr[9:], uint64(len(password)))
	binary.BigEndian.PutUint64(hdr[17:], uint64(len(salt)))
	h.Write(hdr[:])
	h.Write(password)
	h.Write(salt)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// cachedPBKDF2 returns PBKDF2-HMAC-SHA256(password, salt, iter, 32),
// computing it at most once per process while it stays in the cache.
func cachedPBKDF2(kind kdfKind, password, salt []byte, iter int) ([32]byte, error) {
	idx := cacheIndex(kind, password, salt, iter)
	deriveCache.mu.Lock()
	if deriveCache.entries == nil {
		deriveCache.entries = make(map[[sha256.Size]byte]*deriveEntry)
	}
	e, ok := deriveCache.entries[idx]
	if !ok {
		if len(deriveCache.order) >= deriveCacheSize {
			delete(deriveCache.entries, deriveCache.order[0])
			deriveCache.order = append(deriveCache.order[:0], deriveCache.order[1:]...)
		}
		e = new(deriveEntry)
		deriveCache.entries[idx] = e
		deriveCache.order = append(deriveCache.order, idx)
	}
	deriveCache.mu.Unlock()
	e.once.Do(func() { e.key, e.err = pbkdf2SHA256(password, salt, iter) })
	if e.err != nil {
		// A failure is not remembered: an installed deriver (SetPBKDF2)
		// may fail for a passing reason, and the next call retries.
		deriveCache.mu.Lock()
		if deriveCache.entries[idx] == e {
			delete(deriveCache.entries, idx)
			for i, o := range deriveCache.order {
				if o == idx {
					deriveCache.order = append(deriveCache.order[:i], deriveCache.order[i+1:]...)
					break
				}
			}
		}
		deriveCache.mu.Unlock()
	}
	return e.key, e.err
}

// PBKDF2Func computes PBKDF2-HMAC-SHA256(password, salt, iter, keyLen)
// and returns exactly keyLen bytes. It may block (for example while a
// JavaScript Promise settles) and is called from the goroutine that needs
// the key, never with a lock of this package held. It must be safe for
// concurrent use.
type PBKDF2Func func(password, salt []byte, iter, keyLen int) ([]byte, error)

// pbkdf2Hook holds the PBKDF2Func installed by SetPBKDF2, if any.
var pbkdf2Hook atomic.Pointer[PBKDF2Func]

// SetPBKDF2 makes every key derivation of this package (V2 master keys,
// "%$" setup strings, legacy V1 and V3 keys) call f instead of Go's
// crypto/pbkdf2, process-wide, and returns a function that restores the
// previous deriver. A nil f restores Go's. It exists for the js/wasm build,
// where the host's WebCrypto (crypto.subtle.deriveBits with PBKDF2) is
// several times faster than Go's PBKDF2 compiled to wasm: the wasm main
// installs it once, before opening a vault.
//
// f must compute exactly PBKDF2-HMAC-SHA256; a result of the wrong length
// fails the derivation with engine.ErrUnsupported, and an error of f is
// returned wrapped in one as well (its text is not repeated, so f's errors
// cannot leak inputs). The process-wide cache of derived keys is emptied, so
// that no key derived by the previous deriver is reused; the cache's
// semantics are otherwise unchanged (one derivation per distinct input, and
// concurrent callers wait for it).
func SetPBKDF2(f PBKDF2Func) (restore func()) {
	var prev *PBKDF2Func
	if f == nil {
		prev = pbkdf2Hook.Swap(nil)
	} else {
		prev = pbkdf2Hook.Swap(&f)
	}
	resetDeriveCache()
	return func() {
		pbkdf2Hook.Store(prev)
		resetDeriveCache()
	}
}

// resetDeriveCache forgets every cached derivation. Derivations in flight
// complete for their callers; only later lookups miss.
func resetDeriveCache() {
	deriveCache.mu.Lock()
	deriveCache.entries = nil
	deriveCache.order = nil
	deriveCache.mu.Unlock()
}

// pbkdf2SHA256 is the uncached derivation, through the SetPBKDF2 hook if
// one is installed.
func pbkdf2SHA256(password, salt []byte, iter int) ([32]byte, error) {
	var out [32]byte
	if iter < 1 {
		return out, fmt.Errorf("e2ee: invalid PBKDF2 iteration count: %w", engine.ErrUnsupported)
	}
	if f := pbkdf2Hook.Load(); f != nil {
		k, err := (*f)(append([]byte(nil), password...), append([]byte(nil), salt...), iter, len(out))
		if err != nil {
			return out, fmt.Errorf("e2ee: the installed PBKDF2 deriver failed: %w", engine.ErrUnsupported)
		}
		if len(k) != len(out) {
			return out, fmt.Errorf("e2ee: the installed PBKDF2 deriver returned %d bytes, want %d: %w", len(k), len(out), engine.ErrUnsupported)
		}
		copy(out[:], k)
		return out, nil
	}
	k, err := pbkdf2.Key(sha256.New, string(password), salt, iter, len(out))
	if err != nil {
		return out, fmt.Errorf("e2ee: key derivation refused: %w", engine.ErrUnsupported)
	}
	copy(out[:], k)
	return out, nil
}

// chunkKey is the V2 per-message key HKDF-SHA256(IKM = master, salt =
// hkdfSalt, info = empty, L = 32) (octagonal-wheels src/encryption/hkdf.ts
// deriveKey). With L = 32 the expansion is the single block
// T(1) = HMAC(PRK, 0x01), so HKDF is exactly two HMAC-SHA256 evaluations.
// They are computed here over stack buffers so that decrypting a chunk
// allocates nothing for the key schedule; the result is checked against
// crypto/hkdf and the vectors' derivedChunkKeyHex in the tests.
func chunkKey(master *[MasterKeySize]byte, hkdfSalt []byte) [32]byte {
	prk := hmacSHA256(hkdfSalt, master[:])
	return hmacSHA256(prk[:], []byte{1})
}

// hmacSHA256 computes HMAC-SHA256 (RFC 2104) for a message of at most 64
// bytes. Keys longer than the 64-byte block are first hashed, as the RFC
// requires.
func hmacSHA256(key, msg []byte) [32]byte {
	const block = 64
	var kh [32]byte
	if len(key) > block {
		kh = sha256.Sum256(key)
		key = kh[:]
	}
	var buf [block + block]byte
	for i := range block {
		var b byte
		if i < len(key) {
			b = key[i]
		}
		buf[i] = b ^ 0x36
	}
	n := copy(buf[block:], msg)
	inner := sha256.Sum256(buf[:block+n])
	for i := range block {
		buf[i] ^= 0x36 ^ 0x5c
	}
	copy(buf[block:], inner[:])
	return sha256.Sum256(buf[:block+sha256.Size])
}
