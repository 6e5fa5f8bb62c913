package e2ee

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
)

// EncryptSetupString encrypts plain with passphrase alone, in the "%$"
// form that Setup URIs and P2P configuration transfers use
// (octagonal-wheels src/encryption/hkdf.ts encryptWithEphemeralSalt,
// commonlib src/encryption/stringEncryption.ts): a PBKDF2 salt of 32 bytes
// is drawn from r (nil means crypto/rand), then the HKDF salt, then the
// IV, and the output is "%$" + base64(pbkdf2Salt | iv | hkdfSalt | ct |
// tag). Each call draws a new PBKDF2 salt and so costs one full key
// derivation (upstream reuses one salt per session; P2P refreshes it per
// message). Unlike upstream's encryptString, plain is encrypted even if it
// already starts with "%".
func EncryptSetupString(plain, passphrase string, r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	var ps [PBKDF2SaltSize]byte
	var hs [HKDFSaltSize]byte
	var iv [IVSize]byte
	if err := drawRand(r, nil, ps[:], hs[:], iv[:]); err != nil {
		return "", err
	}
	k, err := DeriveKey(passphrase, ps[:])
	if err != nil {
		return "", err
	}
	return encodeV2String(PrefixHKDFSalted, ps[:], k, &hs, &iv, plain)
}

// DecryptSetupString decrypts a string made by EncryptSetupString or by
// upstream's encryptString, as commonlib src/encryption/stringEncryption.ts
// decryptString does: "%$" with the embedded PBKDF2 salt; "%", "%~" and
// "[" legacy forms with 100000 iterations, then with the dynamic count;
// anything else is ErrUnsupported ("%=" data needs the vault salt: use a
// Cipher). Errors are classified as in Cipher.DecryptString.
func DecryptSetupString(s, passphrase string) (string, error) {
	return decryptSetup(s, passphrase, PBKDF2Iterations, 0)
}

// decryptSetup takes the iteration counts so that fuzzing stays fast.
func decryptSetup(s, passphrase string, v2Iter, legacyIter int) (string, error) {
	switch {
	case s == "":
		return "", errEmpty
	case strings.HasPrefix(s, PrefixHKDFSalted):
		bp, bin, err := decodeBase64Pooled(s[len(PrefixHKDFSalted):])
		if err != nil {
			return "", err
		}
		defer putBuf(bp)
		if len(bin) < PBKDF2SaltSize+IVSize+HKDFSaltSize+TagSize {
			return "", errShort
		}
		raw, err := cachedPBKDF2(kdfV2Master, []byte(passphrase), bin[:PBKDF2SaltSize], v2Iter)
		if err != nil {
			return "", err
		}
		k := &Key{master: raw}
		out, err := openV2(k, bin[PBKDF2SaltSize:], true)
		if err != nil {
			return "", err
		}
		return string(out), nil
	case strings.HasPrefix(s, PrefixHKDF):
		return "", fmt.Errorf("e2ee: %%= data needs the vault salt: %w", engine.ErrUnsupported)
	case strings.HasPrefix(s, "%"), strings.HasPrefix(s, "["):
		c := New(passphrase, nil, Options{})
		c.legacyIter = legacyIter
		out, err := c.decryptLegacy(s, false)
		if err != nil && errors.Is(err, engine.ErrDecrypt) {
			return c.decryptLegacy(s, true)
		}
		return out, err
	}
	return "", errUnknown
}
