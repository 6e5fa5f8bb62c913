package e2ee

import (
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf16"

	"github.com/livesync-go/livesync-go/engine"
)

// Parameters of the legacy family (octagonal-wheels src/encryption/
// encryption.ts, encryptionv3.ts, obfuscatePath.ts; engine/FORMAT.md §4.3).
const (
	// LegacyIterations is the fixed PBKDF2 iteration count of legacy V1
	// and "%~" V3 keys.
	LegacyIterations = 100000
	// LegacyIVSize is the AES-GCM nonce length of legacy V1 data: 12
	// random "semi-static" bytes and a little-endian uint32 counter. The
	// 16-byte nonce is hashed into J0 by GCM, as WebCrypto does.
	LegacyIVSize = 16
	// LegacySaltSize is the PBKDF2 salt length of legacy V1 data.
	LegacySaltSize = 16
	// legacyKeyUses is how many messages upstream encrypts with one legacy
	// key before drawing a new salt (KEY_RECYCLE_COUNT).
	legacyKeyUses = 100
	// legacyCounterLimit renews the semi-static IV part once the counter
	// passes it.
	legacyCounterLimit = 10000
	// v3Salt is appended to the passphrase to derive the fixed "%~" salt.
	v3Salt = "fancySyncForYou!"
)

var errJSONForm = fmt.Errorf("e2ee: legacy JSON form does not hold a JSON string: %w", engine.ErrMalformed)

// utf16Len is the JavaScript length of s.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// legacyIterationCount is upstream's iteration rule: 100000, or with the
// dynamic count max(d,0)*1000 + 121 - d where d = 15 - length(passphrase)
// in UTF-16 units.
func legacyIterationCount(passphrase string, dynamic bool) int {
	if !dynamic {
		return LegacyIterations
	}
	d := 15 - utf16Len(passphrase)
	return max(d, 0)*1000 + 121 - d
}

func (c *Cipher) legacyIterations(dynamic bool) int {
	if c.legacyIter > 0 && !dynamic {
		return c.legacyIter
	}
	return legacyIterationCount(c.passphrase, dynamic)
}

// legacyAEAD returns AES-256-GCM with nonceSize keyed by
// PBKDF2-SHA256(password = raw SHA-256(UTF-8 passphrase), salt, iter).
func legacyAEAD(passphrase string, salt []byte, iter, nonceSize int) (cipher.AEAD, error) {
	pw := sha256.Sum256([]byte(passphrase))
	key, err := cachedPBKDF2(kdfLegacy, pw[:], salt, iter)
	if err != nil {
		return nil, err
	}
	return newGCM(key[:], nonceSize)
}

// decryptLegacyWithFallback is commonlib's tryDecryptV1AsFallback: the
// legacy decoder with the configured iteration count and, when that was
// the dynamic count and authentication failed, once more with 100000.
// (Upstream retries on any error; the retry can only change the outcome of
// an authentication failure, so the others are returned at once.)
func (c *Cipher) decryptLegacyWithFallback(s string, dynamic bool) (string, error) {
	out, err := c.decryptLegacy(s, dynamic)
	if err != nil && dynamic && errors.Is(err, engine.ErrDecrypt) {
		return c.decryptLegacy(s, false)
	}
	return out, err
}

// decryptLegacy is octagonal-wheels src/encryption/encryption.ts decrypt:
// "%~" → V3, other "%" → V1, "[...]" → the oldest JSON form.
func (c *Cipher) decryptLegacy(s string, dynamic bool) (string, error) {
	if !c.hasPass {
		return "", errNoPass
	}
	if s == "" {
		return "", errEmpty
	}
	if s[0] == '%' {
		if strings.HasPrefix(s, PrefixV3) {
			return c.decryptV3(s)
		}
		return c.decryptV1(s, c.legacyIterations(dynamic))
	}
	if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
		return "", errUnknown
	}
	return c.decryptJSONForm(s, c.legacyIterations(dynamic))
}

// decryptV1 opens "%" + hex(iv16) + hex(salt16) + base64(ct|tag)
// (encryption.ts decryptV2, which upstream calls "V2").
func (c *Cipher) decryptV1(s string, iter int) (string, error) {
	if len(s) < 1+2*LegacyIVSize+2*LegacySaltSize {
		return "", errShort
	}
	var iv [LegacyIVSize]byte
	var salt [LegacySaltSize]byte
	if _, err := hex.Decode(iv[:], []byte(s[1:33])); err != nil {
		return "", errHex
	}
	if _, err := hex.Decode(salt[:], []byte(s[33:65])); err != nil {
		return "", errHex
	}
	ct, err := decodeBase64(s[65:])
	if err != nil {
		return "", err
	}
	out, err := c.openLegacy(salt[:], iv[:], ct, iter)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

func (c *Cipher) openLegacy(salt, iv, ct []byte, iter int) ([]byte, error) {
	if len(ct) < TagSize {
		return nil, errShort
	}
	if len(iv) == 0 {
		return nil, errHex
	}
	aead, err := legacyAEAD(c.passphrase, salt, iter, len(iv))
	if err != nil {
		return nil, err
	}
	out, err := aead.Open(ct[:0], iv, ct, nil)
	if err != nil {
		return nil, errAuth
	}
	return out, nil
}

// decryptV3 opens "%~" + hex(iv12) + base64(ct|tag) with the fixed-salt
// key PBKDF2(UTF-8 passphrase, SHA-256(passphrase||"fancySyncForYou!")
// [0:16], 100000) (octagonal-wheels src/encryption/encryptionv3.ts).
func (c *Cipher) decryptV3(s string) (string, error) {
	if len(s) < 2+2*IVSize {
		return "", errShort
	}
	var iv [IVSize]byte
	if _, err := hex.Decode(iv[:], []byte(s[2:26])); err != nil {
		return "", errHex
	}
	ct, err := decodeBase64(s[26:])
	if err != nil {
		return "", err
	}
	if len(ct) < TagSize {
		return "", errShort
	}
	iter := LegacyIterations
	if c.legacyIter > 0 {
		iter = c.legacyIter
	}
	saltSum := sha256.Sum256([]byte(c.passphrase + v3Salt))
	key, err := cachedPBKDF2(kdfV3, []byte(c.passphrase), saltSum[:16], iter)
	if err != nil {
		return "", err
	}
	aead, err := newGCM(key[:], IVSize)
	if err != nil {
		return "", err
	}
	out, err := aead.Open(ct[:0], iv[:], ct, nil)
	if err != nil {
		return "", errAuth
	}
	return string(out), nil
}

// decryptJSONForm opens the oldest form ["<b64>","<ivhex>","<salthex>"],
// whose plaintext is JSON.stringify of the string. Like upstream, the
// inside of the brackets is split at commas and one character is dropped
// from each end of a part that starts with a quote.
func (c *Cipher) decryptJSONForm(s string, iter int) (string, error) {
	parts := strings.Split(s[1:len(s)-1], ",")
	if len(parts) < 3 {
		return "", fmt.Errorf("e2ee: legacy JSON form needs three parts: %w", engine.ErrMalformed)
	}
	for i, p := range parts[:3] {
		if strings.HasPrefix(p, `"`) {
			if len(p) < 2 {
				p = `""`
			}
			parts[i] = p[1 : len(p)-1]
		}
	}
	iv, err := hex.DecodeString(parts[1])
	if err != nil {
		return "", errHex
	}
	salt, err := hex.DecodeString(parts[2])
	if err != nil {
		return "", errHex
	}
	ct, err := decodeBase64(parts[0])
	if err != nil {
		return "", err
	}
	out, err := c.openLegacy(salt, iv, ct, iter)
	if err != nil {
		return "", err
	}
	var str string
	if err := json.Unmarshal(out, &str); err != nil {
		return "", errJSONForm
	}
	return str, nil
}

// decryptLegacyBinary opens the legacy binary layout iv(16) | salt(16) |
// ct | tag (encryption.ts decryptBinary). The result is a new slice.
func (c *Cipher) decryptLegacyBinary(b []byte, iter int) ([]byte, error) {
	if !c.hasPass {
		return nil, errNoPass
	}
	if len(b) < LegacyIVSize+LegacySaltSize+TagSize {
		return nil, errShort
	}
	ct := append([]byte(nil), b[LegacyIVSize+LegacySaltSize:]...)
	return c.openLegacy(b[LegacyIVSize:LegacyIVSize+LegacySaltSize], b[:LegacyIVSize], ct, iter)
}

// legacyWriter is the state upstream keeps for legacy encryption
// (encryption.ts getKeyForEncrypt, getSemiStaticField, getNonce): a key
// with a random 16-byte salt reused for 100 messages, and an IV made of 12
// random bytes renewed after 10000 messages plus an incrementing
// little-endian uint32 counter.
type legacyWriter struct {
	mu      sync.Mutex
	aead    cipher.AEAD
	salt    [LegacySaltSize]byte
	uses    int
	fixed   [12]byte
	hasFix  bool
	counter uint32
}

// legacySeal encrypts p and returns iv, salt and ct|tag.
func (c *Cipher) legacySeal(p []byte) (iv [LegacyIVSize]byte, salt [LegacySaltSize]byte, ct []byte, err error) {
	if !c.hasPass {
		return iv, salt, nil, errNoPass
	}
	w := &c.legacy
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.uses <= 0 || w.aead == nil {
		var s [LegacySaltSize]byte
		if err = drawRand(c.rand(), &c.randMu, s[:]); err != nil {
			return
		}
		var aead cipher.AEAD
		aead, err = legacyAEAD(c.passphrase, s[:], c.legacyIterations(c.opts.DynamicIterationCount), LegacyIVSize)
		if err != nil {
			return
		}
		w.aead, w.salt, w.uses = aead, s, legacyKeyUses
	}
	if !w.hasFix {
		if err = drawRand(c.rand(), &c.randMu, w.fixed[:]); err != nil {
			return
		}
		w.hasFix = true
	}
	w.uses--
	w.counter++
	copy(iv[:], w.fixed[:])
	binary.LittleEndian.PutUint32(iv[12:], w.counter)
	if w.counter > legacyCounterLimit {
		w.hasFix = false // upstream renews the fixed part after using it
		w.counter = 0
	}
	salt = w.salt
	ct = w.aead.Seal(nil, iv[:], p, nil)
	return iv, salt, ct, nil
}

// encryptLegacyString writes "%" + hex(iv) + hex(salt) + base64(ct|tag)
// (encryption.ts encrypt).
func (c *Cipher) encryptLegacyString(p []byte) (string, error) {
	iv, salt, ct, err := c.legacySeal(p)
	if err != nil {
		return "", err
	}
	return formatLegacy(iv[:], salt[:], ct), nil
}

func formatLegacy(iv, salt, ct []byte) string {
	var sb strings.Builder
	sb.Grow(1 + 2*len(iv) + 2*len(salt) + base64.StdEncoding.EncodedLen(len(ct)))
	sb.WriteString(PrefixLegacy)
	sb.WriteString(hex.EncodeToString(iv))
	sb.WriteString(hex.EncodeToString(salt))
	sb.WriteString(base64.StdEncoding.EncodeToString(ct))
	return sb.String()
}

// encryptLegacyBinary writes iv(16) | salt(16) | ct | tag
// (encryption.ts encryptBinary).
func (c *Cipher) encryptLegacyBinary(p []byte) ([]byte, error) {
	iv, salt, ct, err := c.legacySeal(p)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(iv)+len(salt)+len(ct))
	out = append(out, iv[:]...)
	out = append(out, salt[:]...)
	return append(out, ct...), nil
}

// ObfuscatePathV1 returns the deterministic legacy obfuscation of a path
// that V1 and forceV1 vaults store in the `path` of "f:" documents
// (octagonal-wheels src/encryption/obfuscatePath.ts): h = SHA-256(UTF-8
// path || UTF-8 passphrase), salt = h[0:16], iv = h[16:32], legacy key with
// the configured iteration count, output "%" + hex(iv) + hex(salt) +
// base64(ct|tag). The same path always gives the same string; DecryptString
// reverses it. It needs the passphrase (ErrUnsupported with NewWithKey).
func (c *Cipher) ObfuscatePathV1(path string) (string, error) {
	if !c.hasPass {
		return "", errNoPass
	}
	h := sha256.Sum256([]byte(path + c.passphrase))
	salt, iv := h[:16], h[16:32]
	aead, err := legacyAEAD(c.passphrase, salt, c.legacyIterations(c.opts.DynamicIterationCount), LegacyIVSize)
	if err != nil {
		return "", err
	}
	return formatLegacy(iv, salt, aead.Seal(nil, iv, []byte(path), nil)), nil
}

// IsPathProbablyObfuscated reports whether a metadata `path` looks like a
// V1 obfuscated path: it starts with "%" and is longer than 64 UTF-16
// units (octagonal-wheels src/encryption/obfuscatePath.ts).
func IsPathProbablyObfuscated(path string) bool {
	return strings.HasPrefix(path, "%") && utf16Len(path) > 64
}
