package e2ee

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/livesync-go/livesync-go/engine"
)

// String markers of the encrypted forms (octagonal-wheels src/encryption/
// hkdf.ts, encryption.ts, encryptionv3.ts; engine/FORMAT.md §4.1).
const (
	// PrefixHKDF starts V2 data: "%=" + base64(iv | hkdfSalt | ct | tag).
	PrefixHKDF = "%="
	// PrefixHKDFSalted starts V2 data that carries its own PBKDF2 salt
	// (Setup URIs, P2P configuration): "%$" + base64(pbkdf2Salt | iv |
	// hkdfSalt | ct | tag).
	PrefixHKDFSalted = "%$"
	// PrefixLegacy starts legacy V1 data: "%" + hex(iv16) + hex(salt16) +
	// base64(ct | tag). Also the prefix of the V1 obfuscated path.
	PrefixLegacy = "%"
	// PrefixV3 starts the deprecated fixed-salt form: "%~" + hex(iv12) +
	// base64(ct | tag).
	PrefixV3 = "%~"
	// EncryptedMetaPrefix starts the `path` of an obfuscated ("f:")
	// metadata document on a V2 remote; the rest is a "%=" string
	// (commonlib src/pouchdb/encryption.ts). Callers strip it before
	// DecryptString.
	EncryptedMetaPrefix = "/\\:"
)

// Algorithm is the E2EE algorithm setting of a vault (upstream setting
// E2EEAlgorithm, commonlib src/common/models/setting.const.ts). Its zero
// value is AlgV2, the default of every new vault; note that upstream's
// empty string means legacy V1, so convert with ParseAlgorithm and
// Algorithm.Setting rather than by hand.
type Algorithm int

const (
	// AlgV2 is upstream "v2": write HKDF V2; read V2 and legacy "%" data.
	AlgV2 Algorithm = iota
	// AlgV1 is upstream "" (legacy V1): write legacy "%" data; read like
	// AlgV2 (upstream uses the HKDF reader for everything but forceV1).
	AlgV1
	// AlgForceV1 is upstream "forceV1": write and read legacy data only.
	AlgForceV1
)

// ParseAlgorithm maps upstream's E2EEAlgorithm setting value ("v2", "",
// "forceV1") to an Algorithm. Any other value is ErrUnsupported.
func ParseAlgorithm(setting string) (Algorithm, error) {
	switch setting {
	case "v2":
		return AlgV2, nil
	case "":
		return AlgV1, nil
	case "forceV1":
		return AlgForceV1, nil
	}
	return AlgV2, fmt.Errorf("e2ee: unknown E2EE algorithm setting: %w", engine.ErrUnsupported)
}

// Setting returns upstream's E2EEAlgorithm value for a: "v2", "" or
// "forceV1". Unknown values return "v2".
func (a Algorithm) Setting() string {
	switch a {
	case AlgV1:
		return ""
	case AlgForceV1:
		return "forceV1"
	}
	return "v2"
}

// String returns a readable name of a (not the setting value).
func (a Algorithm) String() string {
	switch a {
	case AlgV2:
		return "v2"
	case AlgV1:
		return "v1"
	case AlgForceV1:
		return "forceV1"
	}
	return fmt.Sprintf("Algorithm(%d)", int(a))
}

// Options configures a Cipher. The zero value means: E2EE V2, fixed
// legacy iteration count, randomness from crypto/rand.
type Options struct {
	// Rand supplies IVs and salts; nil means crypto/rand. A V2 message
	// draws its 32-byte HKDF salt first and then its 12-byte IV, as
	// upstream does; the draws of one message are made under a lock so a
	// deterministic reader yields reproducible output even when the
	// Cipher is shared.
	Rand io.Reader
	// Algorithm selects the written format and the reader (see Algorithm).
	Algorithm Algorithm
	// DynamicIterationCount is upstream's useDynamicIterationCount: legacy
	// V1 keys use max(15-n,0)*1000 + 121 - (15-n) PBKDF2 iterations,
	// n = passphrase length in UTF-16 units, instead of 100000. It has no
	// effect on V2.
	DynamicIterationCount bool
}

// Cipher encrypts and decrypts LiveSync E2EE data for one passphrase and
// one vault PBKDF2 salt. It is safe for concurrent use. Keys are derived
// lazily and cached process-wide: the V2 master key on the first V2
// operation, legacy keys only when legacy data is met.
type Cipher struct {
	opts       Options
	passphrase string
	hasPass    bool
	salt       []byte
	key        atomic.Pointer[Key]
	randMu     sync.Mutex
	legacy     legacyWriter
	// legacyIter overrides the fixed legacy iteration count; tests lower
	// it to fuzz without spending 100000 PBKDF2 rounds per input.
	legacyIter int
}

// New returns a Cipher for passphrase and the vault's PBKDF2 salt (the
// decoded `pbkdf2salt` of the sync-parameters document). No key is derived
// until it is needed; key derivation errors are returned by the operation
// that needed the key. salt is copied.
func New(passphrase string, salt []byte, o Options) *Cipher {
	return &Cipher{opts: o, passphrase: passphrase, hasPass: true, salt: append([]byte(nil), salt...)}
}

// NewWithKey returns a Cipher that uses the V2 master key k. Without the
// passphrase it handles V2 data only: legacy formats, legacy writing and
// ObfuscatePathV1 return ErrUnsupported, and DecryptBinary does not fall
// back to the legacy layout. A nil k makes every operation fail with
// ErrUnsupported.
func NewWithKey(k *Key, o Options) *Cipher {
	c := &Cipher{opts: o}
	if k != nil {
		c.key.Store(k)
	}
	return c
}

// Shared errors. None of them carries data, keys or the passphrase.
var (
	errEmpty     = fmt.Errorf("e2ee: empty ciphertext: %w", engine.ErrMalformed)
	errShort     = fmt.Errorf("e2ee: ciphertext too short: %w", engine.ErrMalformed)
	errBase64    = fmt.Errorf("e2ee: invalid base64: %w", engine.ErrMalformed)
	errHex       = fmt.Errorf("e2ee: invalid hex IV or salt: %w", engine.ErrMalformed)
	errAuth      = fmt.Errorf("e2ee: authentication failed (wrong passphrase or salt, or altered data): %w", engine.ErrDecrypt)
	errUnknown   = fmt.Errorf("e2ee: unknown encryption marker: %w", engine.ErrUnsupported)
	errNoPass    = fmt.Errorf("e2ee: legacy format needs the passphrase, cipher has only a master key: %w", engine.ErrUnsupported)
	errNoKey     = fmt.Errorf("e2ee: cipher has no key: %w", engine.ErrUnsupported)
	errSaltedStr = fmt.Errorf("e2ee: %%$ data carries its own salt, use DecryptSetupString: %w", engine.ErrUnsupported)
	errHKDFForce = fmt.Errorf("e2ee: %%= data cannot be read with the forceV1 algorithm: %w", engine.ErrUnsupported)
)

// v2Key returns the master key, deriving it on first use.
func (c *Cipher) v2Key() (*Key, error) {
	if k := c.key.Load(); k != nil {
		return k, nil
	}
	if !c.hasPass {
		return nil, errNoKey
	}
	k, err := DeriveKey(c.passphrase, c.salt)
	if err != nil {
		return nil, err
	}
	c.key.Store(k)
	return k, nil
}

func (c *Cipher) rand() io.Reader {
	if c.opts.Rand != nil {
		return c.opts.Rand
	}
	return rand.Reader
}

// readRand fills the given buffers in order, atomically with respect to
// other draws of c.
func (c *Cipher) readRand(bufs ...[]byte) error {
	return drawRand(c.rand(), &c.randMu, bufs...)
}

func drawRand(r io.Reader, mu *sync.Mutex, bufs ...[]byte) error {
	if mu != nil {
		mu.Lock()
		defer mu.Unlock()
	}
	for _, b := range bufs {
		if _, err := io.ReadFull(r, b); err != nil {
			return fmt.Errorf("e2ee: reading random bytes: %w", err)
		}
	}
	return nil
}

// EncryptString encrypts plain (its UTF-8 bytes) in the format upstream
// writes for the configured algorithm (commonlib src/pouchdb/encryption.ts
// incoming hooks): "%=" HKDF V2 for AlgV2, legacy "%" V1 for AlgV1 and
// AlgForceV1. Every call uses a fresh HKDF salt and IV (V2) or the next
// IV of a key that is renewed every 100 messages (V1), as upstream does.
func (c *Cipher) EncryptString(plain string) (string, error) {
	if c.opts.Algorithm != AlgV2 {
		return c.encryptLegacyString([]byte(plain))
	}
	k, err := c.v2Key()
	if err != nil {
		return "", err
	}
	// One read for both draws: the HKDF salt is the first 32 bytes of
	// the stream, the IV the next 12, as upstream draws them.
	var r [HKDFSaltSize + IVSize]byte
	if err := c.readRand(r[:]); err != nil {
		return "", err
	}
	return encodeV2String(PrefixHKDF, nil, k, (*[HKDFSaltSize]byte)(r[:HKDFSaltSize]), (*[IVSize]byte)(r[HKDFSaltSize:]), plain)
}

// encodeV2String builds prefix + base64(head | iv | hkdfSalt | ct | tag)
// where head is the optional embedded PBKDF2 salt of "%$".
func encodeV2String(prefix string, head []byte, k *Key, hs *[HKDFSaltSize]byte, iv *[IVSize]byte, plain string) (string, error) {
	n := len(head) + IVSize + HKDFSaltSize + len(plain) + TagSize
	bp := getBuf(n)
	defer putBuf(bp)
	bin := *bp
	off := copy(bin, head)
	copy(bin[off:], iv[:])
	copy(bin[off+IVSize:], hs[:])
	body := bin[off+IVSize+HKDFSaltSize:]
	copy(body, plain)
	aead, err := v2AEAD(k, hs[:])
	if err != nil {
		return "", err
	}
	aead.Seal(body[:0], iv[:], body[:len(plain)], nil)
	out := make([]byte, len(prefix), len(prefix)+base64.StdEncoding.EncodedLen(n))
	copy(out, prefix)
	return string(base64.StdEncoding.AppendEncode(out, bin)), nil
}

// v2AEAD returns AES-256-GCM keyed with the HKDF chunk key of hkdfSalt.
func v2AEAD(k *Key, hkdfSalt []byte) (cipher.AEAD, error) {
	ck := chunkKey(&k.master, hkdfSalt)
	return newGCM(ck[:], IVSize)
}

func newGCM(key []byte, nonceSize int) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("e2ee: AES key setup: %w", engine.ErrUnsupported)
	}
	var aead cipher.AEAD
	if nonceSize == IVSize {
		aead, err = cipher.NewGCM(block)
	} else {
		aead, err = cipher.NewGCMWithNonceSize(block, nonceSize)
	}
	if err != nil {
		return nil, fmt.Errorf("e2ee: GCM setup: %w", engine.ErrUnsupported)
	}
	return aead, nil
}

// openV2 opens the V2 binary layout iv(12) | hkdfSalt(32) | ct | tag
// (octagonal-wheels src/encryption/hkdf.ts decryptBinary). With inPlace the
// plaintext overwrites the ciphertext part of bin; otherwise it is a new
// slice.
func openV2(k *Key, bin []byte, inPlace bool) ([]byte, error) {
	if len(bin) < IVSize+HKDFSaltSize+TagSize {
		return nil, errShort
	}
	aead, err := v2AEAD(k, bin[IVSize:IVSize+HKDFSaltSize])
	if err != nil {
		return nil, err
	}
	ct := bin[IVSize+HKDFSaltSize:]
	var dst []byte
	if inPlace {
		dst = ct[:0]
	}
	out, err := aead.Open(dst, bin[:IVSize], ct, nil)
	if err != nil {
		return nil, errAuth
	}
	return out, nil
}

// DecryptString decrypts one encrypted string value (chunk `data`, the
// part of an obfuscated `path` after EncryptedMetaPrefix, eden data) the
// way upstream's remote read hook does (commonlib src/pouchdb/encryption.ts
// outgoingDecryptHKDF / outgoingDecryptV1, engine/FORMAT.md §4.4).
//
// With AlgV2 and AlgV1 (the HKDF reader):
//   - "%=": HKDF V2 with the vault key.
//   - any other "%..." ("%" legacy V1, "%~" V3): the legacy decoder with
//     the configured iteration count, then, if that fails and the dynamic
//     count is configured, again with 100000 (tryDecryptV1AsFallback).
//     "%$" is rejected with ErrUnsupported (upstream fails on it too; use
//     DecryptSetupString).
//   - anything else, including the oldest "[...]" JSON form:
//     ErrUnsupported, as upstream's "Unknown encryption version".
//
// With AlgForceV1 (the legacy reader): "%" V1, "%~" V3 and "[b64,ivhex,
// salthex]" (whose plaintext is a JSON string) with the same iteration
// fallback; "%=" and "%$" are ErrUnsupported, other input ErrUnsupported.
//
// The empty string is ErrMalformed. The plaintext bytes are returned as
// they are (upstream writes only valid UTF-8). Errors wrap
// engine.ErrDecrypt (authentication failed: wrong passphrase or salt,
// altered data), engine.ErrMalformed (bad base64 or hex, too short) or
// engine.ErrUnsupported.
func (c *Cipher) DecryptString(s string) (string, error) {
	if s == "" {
		return "", errEmpty
	}
	if c.opts.Algorithm == AlgForceV1 {
		switch {
		case strings.HasPrefix(s, PrefixHKDF):
			return "", errHKDFForce
		case strings.HasPrefix(s, PrefixHKDFSalted):
			return "", errSaltedStr
		}
		return c.decryptLegacyWithFallback(s, c.opts.DynamicIterationCount)
	}
	if strings.HasPrefix(s, PrefixHKDF) {
		k, err := c.v2Key()
		if err != nil {
			return "", err
		}
		return decryptV2String(k, s[len(PrefixHKDF):])
	}
	if s[0] != '%' {
		return "", errUnknown
	}
	if strings.HasPrefix(s, PrefixHKDFSalted) {
		return "", errSaltedStr
	}
	return c.decryptLegacyWithFallback(s, c.opts.DynamicIterationCount)
}

// decryptV2String decodes b64 into a pooled buffer and opens it in place.
func decryptV2String(k *Key, b64 string) (string, error) {
	bp, bin, err := decodeBase64Pooled(b64)
	if err != nil {
		return "", err
	}
	defer putBuf(bp)
	out, err := openV2(k, bin, true)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// EncryptBinary encrypts p in the binary layout upstream uses for journal
// packs (commonlib src/replication/journal/JournalSyncCore.ts
// encryptForUpload): for AlgV2 iv(12) | hkdfSalt(32) | ct | tag, for
// AlgV1 and AlgForceV1 the legacy iv(16) | salt(16) | ct | tag. No marker
// and no base64. The result is a new slice.
func (c *Cipher) EncryptBinary(p []byte) ([]byte, error) {
	if c.opts.Algorithm != AlgV2 {
		return c.encryptLegacyBinary(p)
	}
	k, err := c.v2Key()
	if err != nil {
		return nil, err
	}
	out := make([]byte, IVSize+HKDFSaltSize, IVSize+HKDFSaltSize+len(p)+TagSize)
	if err := c.readRand(out[IVSize:IVSize+HKDFSaltSize], out[:IVSize]); err != nil {
		return nil, err
	}
	aead, err := v2AEAD(k, out[IVSize:IVSize+HKDFSaltSize])
	if err != nil {
		return nil, err
	}
	return aead.Seal(out, out[:IVSize], p, nil), nil
}

// DecryptBinary decrypts a journal pack body as upstream's
// decryptDownloaded does (commonlib src/replication/journal/
// JournalSyncCore.ts): with AlgForceV1 only the legacy layout is tried;
// otherwise the V2 layout first and, if that fails for any reason, the
// legacy layout iv(16) | salt(16) | ct | tag with the configured
// iteration count (no 100000 fallback here, as upstream). When both fail
// the legacy error is returned, unless the Cipher has no passphrase, in
// which case the V2 error is. Note that, as upstream, a wrong passphrase
// costs one legacy key derivation per failing input. The result is a new
// slice; c is never modified.
func (c *Cipher) DecryptBinary(b []byte) ([]byte, error) {
	if c.opts.Algorithm == AlgForceV1 {
		return c.decryptLegacyBinary(b, c.legacyIterations(c.opts.DynamicIterationCount))
	}
	k, err := c.v2Key()
	if err == nil {
		var out []byte
		if out, err = openV2(k, b, false); err == nil {
			return out, nil
		}
	}
	if !c.hasPass {
		return nil, err
	}
	return c.decryptLegacyBinary(b, c.legacyIterations(c.opts.DynamicIterationCount))
}

// Pooled scratch buffers for decoding; big buffers are not kept.
const maxPooledBuf = 4 << 20

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

func getBuf(n int) *[]byte {
	p := bufPool.Get().(*[]byte)
	if cap(*p) < n {
		*p = make([]byte, n)
	}
	*p = (*p)[:n]
	return p
}

func putBuf(p *[]byte) {
	if cap(*p) > maxPooledBuf {
		return
	}
	bufPool.Put(p)
}

// decodeBase64Pooled decodes standard base64 into a pooled buffer. The
// returned slice aliases *bp; release it with putBuf. It accepts what the
// browser's atob accepts (which upstream uses on Node and older runtimes):
// ASCII whitespace anywhere and missing padding.
func decodeBase64Pooled(s string) (bp *[]byte, bin []byte, err error) {
	// RawStdEncoding.DecodedLen bounds both the padded and the loose
	// (unpadded) decode.
	dl := base64.RawStdEncoding.DecodedLen(len(s))
	bp = getBuf(dl)
	if n, ok := decodeBase64Fast(*bp, s); ok {
		return bp, (*bp)[:n], nil
	}
	// Rare: unpadded, wrapped or invalid input. Copy it for the forgiving
	// decoder, which compacts its input in place.
	src := []byte(s)
	n, err := decodeBase64Loose(*bp, src)
	if err != nil {
		putBuf(bp)
		return nil, nil, err
	}
	return bp, (*bp)[:n], nil
}

// decodeBase64Loose follows the WHATWG forgiving-base64 decode that atob
// uses: strip ASCII whitespace, drop one or two "=" when the length is a
// multiple of 4, reject a remainder of 1, decode without padding. src is
// compacted in place.
func decodeBase64Loose(dst, src []byte) (int, error) {
	w := 0
	for _, ch := range src {
		switch ch {
		case ' ', '\t', '\n', '\f', '\r':
			continue
		}
		src[w] = ch
		w++
	}
	src = src[:w]
	if len(src)%4 == 0 {
		if len(src) > 0 && src[len(src)-1] == '=' {
			src = src[:len(src)-1]
			if len(src) > 0 && src[len(src)-1] == '=' {
				src = src[:len(src)-1]
			}
		}
	}
	if len(src)%4 == 1 {
		return 0, errBase64
	}
	n, err := base64.RawStdEncoding.Decode(dst, src)
	if err != nil {
		return 0, errBase64
	}
	return n, nil
}

// decodeBase64 is decodeBase64Pooled for the cold paths; it returns an
// owned slice.
func decodeBase64(s string) ([]byte, error) {
	bp, bin, err := decodeBase64Pooled(s)
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), bin...)
	putBuf(bp)
	return out, nil
}
