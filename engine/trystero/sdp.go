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
	"math/big"
	"strconv"
	"strings"
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
		iv[i] = jsToUint8(jsNumber(p))
	}
	ct, ok := atob(ctText)
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

// atob is the WHATWG forgiving-base64 decode behind JavaScript's atob:
// ASCII whitespace is ignored, one or two trailing "=" are optional when
// the length is a multiple of four, a length of 1 modulo 4 fails, and
// the unused bits of the last character are not checked.
func atob(s string) ([]byte, bool) {
	s = strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\n', '\f', '\r', ' ':
			return -1
		}
		return r
	}, s)
	if len(s)%4 == 0 {
		s = strings.TrimSuffix(s, "=")
		s = strings.TrimSuffix(s, "=")
	}
	if len(s)%4 == 1 {
		return nil, false
	}
	b, err := base64.RawStdEncoding.DecodeString(s)
	return b, err == nil
}

// jsNumber is JavaScript's Number(s) for a string (StringToNumber):
// surrounding white space is ignored, an empty string is 0, and the rest
// must be a decimal literal (optionally signed, with fraction and
// exponent), "Infinity", or an unsigned 0x, 0o or 0b integer; anything
// else is NaN.
func jsNumber(s string) float64 {
	s = strings.TrimFunc(s, isJSSpace)
	if s == "" {
		return 0
	}
	if len(s) > 2 && s[0] == '0' {
		base := 0
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			n, ok := new(big.Int).SetString(s[2:], base)
			if !ok || strings.ContainsAny(s[2:], "+-_") {
				return math.NaN()
			}
			f, _ := new(big.Float).SetInt(n).Float64()
			return f
		}
	}
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 {
		return math.NaN()
	}
	if body == "Infinity" {
		if s[0] == '-' {
			return math.Inf(-1)
		}
		return math.Inf(1)
	}
	if !isDecimalLiteral(body) {
		return math.NaN()
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !strings.Contains(err.Error(), "range") {
		return math.NaN()
	}
	return f
}

// isDecimalLiteral reports whether s is an unsigned StrDecimalLiteral
// without "Infinity": digits with an optional fraction (at least one
// digit on either side of the point) and an optional exponent.
func isDecimalLiteral(s string) bool {
	i, digits := 0, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(s)
}

// isJSSpace reports whether r is JavaScript WhiteSpace or
// LineTerminator, which Number() trims.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
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
