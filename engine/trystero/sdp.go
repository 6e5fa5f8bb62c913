package trystero

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/livesync-go/livesync-go/engine/jsstring"
)

// ivBytes is the length of the random AES-GCM IV Trystero draws for each
// sealed message (crypto.mjs encrypt).
const ivBytes = 16

// MaxSealedBytes bounds the sealed strings OpenSDP accepts. Session
// descriptions are a few kilobytes; Nostr relays cap events far below
// this.
const MaxSealedBytes = 256 << 10

// SDPKey is the AES-256-GCM key Trystero seals signalling data with
// (crypto.mjs genKey): the raw SHA-256 of password + ":" + appID + ":" +
// roomID, imported as is. An empty password still gives a key.
func SDPKey(password, appID, roomID string) []byte {
	sum := sha256.Sum256(jsUTF8(password + ":" + appID + ":" + roomID))
	return sum[:]
}

// gcm returns AES-GCM with the key and an IV of n bytes and the 128-bit
// tag WebCrypto uses by default.
func gcm(key []byte, n int) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("trystero: SDP key: %w", err)
	}
	return cipher.NewGCMWithNonceSize(block, n)
}

// SealSDP seals plain (an SDP or a serialised ICE candidate) as Trystero
// does (crypto.mjs encrypt): AES-GCM under key with a fresh 16-byte IV
// from r (crypto/rand when nil) and a 128-bit tag; the result is the IV's
// bytes in decimal joined by ",", then "$", then standard base64 (with
// padding) of ciphertext and tag.
func SealSDP(key []byte, plain string, r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	iv := make([]byte, ivBytes)
	if _, err := io.ReadFull(r, iv); err != nil {
		return "", fmt.Errorf("trystero: SDP IV: %w", err)
	}
	aead, err := gcm(key, ivBytes)
	if err != nil {
		return "", err
	}
	ct := aead.Seal(nil, iv, jsUTF8(plain), nil)
	var b strings.Builder
	for i, x := range iv {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(x)))
	}
	b.WriteByte('$')
	b.WriteString(base64.StdEncoding.EncodeToString(ct))
	return b.String(), nil
}

// OpenSDP opens a string sealed by SealSDP or by Trystero, reading it as
// Trystero's decrypt does (crypto.mjs): the text before the first "$" is
// the IV, a ","-separated list of JavaScript numbers each reduced to a
// byte; the text between the first and a second "$" (or the end) is
// forgiving base64 (atob). Any failure to open, which Trystero reports as
// "incorrect room password", returns an error wrapping
// ErrIncorrectPassword; a sealed string over MaxSealedBytes wraps
// ErrTooLarge. The plaintext is decoded as text (see Message.Body).
func OpenSDP(key []byte, sealed string) (string, error) {
	if len(sealed) > MaxSealedBytes {
		return "", fmt.Errorf("%w: sealed signal of %d bytes", ErrTooLarge, len(sealed))
	}
	ivText, rest, _ := strings.Cut(sealed, "$")
	ctText, _, _ := strings.Cut(rest, "$")
	parts := strings.Split(ivText, ",")
	iv := make([]byte, len(parts))
	for i, p := range parts {
		iv[i] = jsToUint8(jsstring.Number(p))
	}
	ct, ok := jsstring.Atob(ctText)
	if !ok {
		return "", fmt.Errorf("%w: sealed signal is not base64", ErrIncorrectPassword)
	}
	aead, err := gcm(key, len(iv))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrIncorrectPassword, err)
	}
	plain, err := aead.Open(nil, iv, ct, nil)
	if err != nil {
		return "", fmt.Errorf("%w: cannot open sealed signal", ErrIncorrectPassword)
	}
	return decodeText(plain), nil
}

// jsToUint8 is ECMAScript ToUint8, the conversion a Uint8Array applies
// to each number: NaN and infinities are 0, others are truncated and
// taken modulo 256.
func jsToUint8(f float64) byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	m := math.Mod(math.Trunc(f), 256)
	if m < 0 {
		m += 256
	}
	return byte(m)
}
