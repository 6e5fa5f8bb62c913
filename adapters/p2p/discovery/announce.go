// Package discovery lets peers of one sync group find each other through
// Nostr relays without revealing the group to the relays.
//
// A peer publishes a short-lived Announcement (its libp2p peer id, its
// multiaddrs, a device name and an expiry). The announcement is sealed with
// AES-256-GCM under a key derived from the group id and the group passphrase,
// and carries a room tag so that peers of the same group can ask relays for
// each other's announcements. Neither the room tag nor the sealed content
// reveals the group id or the passphrase.
//
// Key derivation (version 1):
//
//	base    = PBKDF2-HMAC-SHA256(passphrase, salt = "livesync-p2p-discovery/v1\x00" || groupID, 600000 iterations, 32 bytes)
//	sealKey = HKDF-SHA256(secret = base, salt = none, info = "livesync-p2p-discovery/v1 seal", 32 bytes)
//	roomKey = HKDF-SHA256(secret = base, salt = none, info = "livesync-p2p-discovery/v1 room", 32 bytes)
//	room    = lowercase hex of HMAC-SHA256(roomKey, "room")
//
// Sealed content (version 1) is standard base64 of
// 0x01 || 12-byte random nonce || AES-256-GCM(sealKey, nonce, plaintext, aad),
// where aad = "livesync-p2p-discovery/v1 announce " || room and the plaintext
// is the JSON object {"peer":..., "addrs":[...], "device":..., "exp":unix-seconds,
// "sig":base64}. sig is the peer's own signature (its libp2p key) over
// Room.SignedBytes: anyone who knows the group passphrase can seal an
// announcement, but only the peer can sign one for its id; the group
// checks it (this package carries it and bounds its size).
//
// Announcements whose expiry has passed, or whose expiry lies more than
// MaxTTL in the future, are rejected with a typed *Error.
package discovery

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

const (
	derivationLabel = "livesync-p2p-discovery/v1"
	// PBKDF2Iterations is the PBKDF2-HMAC-SHA256 work factor of the base key.
	PBKDF2Iterations = 600_000
	sealVersion      = 1
	nonceSize        = 12

	// MaxTTL bounds how far in the future an announcement's expiry may lie.
	MaxTTL = time.Hour
	// MaxContentLen bounds the sealed content accepted by Open.
	MaxContentLen = 16 << 10
	// MaxAddrs bounds the number of multiaddrs in one announcement.
	MaxAddrs     = 32
	maxAddrLen   = 512
	maxPeerIDLen = 256
	maxDeviceLen = 128
)

// Announcement is what a peer tells the other peers of its group.
type Announcement struct {
	PeerID     string    // libp2p peer id, in its string form
	Addrs      []string  // multiaddrs the peer listens on
	DeviceName string    // human-readable device name, may be empty
	Expires    time.Time // the announcement is ignored after this instant
	// Sig is the peer's signature over Room.SignedBytes of the
	// announcement, made with the private key of PeerID.
	Sig []byte
}

// ErrorKind classifies why an announcement was rejected.
type ErrorKind int

// The kinds of *Error.
const (
	KindMalformed     ErrorKind = iota + 1 // not sealed content of a known version
	KindUndecryptable                      // wrong group key, or forged/tampered content
	KindInvalid                            // decrypted, but fields are out of bounds
	KindExpired                            // decrypted and valid, but past its expiry
)

// String names the kind.
func (k ErrorKind) String() string {
	switch k {
	case KindMalformed:
		return "malformed"
	case KindUndecryptable:
		return "undecryptable"
	case KindInvalid:
		return "invalid"
	case KindExpired:
		return "expired"
	}
	return fmt.Sprintf("ErrorKind(%d)", int(k))
}

// Error is the typed error of Open and Seal. errors.Is matches it against the
// sentinel of the same kind (ErrMalformed, ErrUndecryptable, ...).
type Error struct {
	Kind   ErrorKind
	Detail string
}

// Error says what was rejected and why.
func (e *Error) Error() string {
	if e.Detail == "" {
		return "discovery: " + e.Kind.String() + " announcement"
	}
	return "discovery: " + e.Kind.String() + " announcement: " + e.Detail
}

// Is reports whether target is an *Error of the same kind.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Kind == e.Kind
}

// Sentinels for errors.Is.
var (
	ErrMalformed     = &Error{Kind: KindMalformed}
	ErrUndecryptable = &Error{Kind: KindUndecryptable}
	ErrInvalid       = &Error{Kind: KindInvalid}
	ErrExpired       = &Error{Kind: KindExpired}
)

// Room holds the keys of one sync group. It never exposes the passphrase or
// the keys; only the room tag is public.
type Room struct {
	aead cipher.AEAD
	tag  string
}

// NewRoom derives the room of the group from its id and passphrase. It is
// deliberately slow (PBKDF2); derive it once per group.
func NewRoom(groupID, passphrase string) (*Room, error) {
	if groupID == "" || passphrase == "" {
		return nil, errors.New("discovery: group id and passphrase are required")
	}
	salt := append([]byte(derivationLabel+"\x00"), groupID...)
	base, err := pbkdf2.Key(sha256.New, passphrase, salt, PBKDF2Iterations, 32)
	if err != nil {
		return nil, fmt.Errorf("discovery: derive base key: %w", err)
	}
	sealKey, err := hkdf.Key(sha256.New, base, nil, derivationLabel+" seal", 32)
	if err != nil {
		return nil, fmt.Errorf("discovery: derive seal key: %w", err)
	}
	roomKey, err := hkdf.Key(sha256.New, base, nil, derivationLabel+" room", 32)
	if err != nil {
		return nil, fmt.Errorf("discovery: derive room key: %w", err)
	}
	block, err := aes.NewCipher(sealKey)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	mac := hmac.New(sha256.New, roomKey)
	mac.Write([]byte("room"))
	return &Room{aead: aead, tag: hex.EncodeToString(mac.Sum(nil))}, nil
}

// Tag is the public room tag: peers of the same group share it, and it
// reveals neither the group id nor the passphrase.
func (r *Room) Tag() string { return r.tag }

// String never prints key material.
func (r *Room) String() string { return "discovery.Room(" + r.tag[:8] + "…)" }

func (r *Room) aad() []byte { return []byte(derivationLabel + " announce " + r.tag) }

type wireAnnouncement struct {
	Peer   string   `json:"peer"`
	Addrs  []string `json:"addrs"`
	Device string   `json:"device,omitempty"`
	Exp    int64    `json:"exp"`
	Sig    []byte   `json:"sig,omitempty"`
}

// maxSigLen bounds an announcement's signature (an RSA-4096 key's is 512
// bytes, an Ed25519 key's 64).
const maxSigLen = 512

// SignedBytes is what the peer of a signs for the room: the room tag and
// every field but the signature, the expiry in whole seconds as sealed.
func (r *Room) SignedBytes(a Announcement) []byte {
	b, _ := json.Marshal(struct {
		Label  string   `json:"label"`
		Room   string   `json:"room"`
		Peer   string   `json:"peer"`
		Addrs  []string `json:"addrs"`
		Device string   `json:"device"`
		Exp    int64    `json:"exp"`
	}{derivationLabel + " signed announcement", r.tag, a.PeerID, a.Addrs, a.DeviceName, a.Expires.Unix()})
	return b
}

// Seal encrypts a for the room. now is the caller's clock; a must be valid
// and unexpired at now.
func (r *Room) Seal(a Announcement, now time.Time) (string, error) {
	w := wireAnnouncement{Peer: a.PeerID, Addrs: a.Addrs, Device: a.DeviceName, Exp: a.Expires.Unix(), Sig: a.Sig}
	if err := w.check(now); err != nil {
		return "", err
	}
	plain, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("discovery: encode announcement: %w", err)
	}
	out := make([]byte, 1+nonceSize, 1+nonceSize+len(plain)+r.aead.Overhead())
	out[0] = sealVersion
	if _, err := rand.Read(out[1:]); err != nil {
		return "", fmt.Errorf("discovery: nonce: %w", err)
	}
	out = r.aead.Seal(out, out[1:], plain, r.aad())
	return base64.StdEncoding.EncodeToString(out), nil
}

// Open decrypts and validates sealed content. Every failure is an *Error;
// it never panics on hostile input.
func (r *Room) Open(content string, now time.Time) (Announcement, error) {
	if len(content) > MaxContentLen {
		return Announcement{}, &Error{Kind: KindMalformed, Detail: "too long"}
	}
	raw, err := base64.StdEncoding.DecodeString(content)
	if err != nil {
		return Announcement{}, &Error{Kind: KindMalformed, Detail: "not base64"}
	}
	if len(raw) < 1+nonceSize+r.aead.Overhead() {
		return Announcement{}, &Error{Kind: KindMalformed, Detail: "too short"}
	}
	if raw[0] != sealVersion {
		return Announcement{}, &Error{Kind: KindMalformed, Detail: fmt.Sprintf("unknown version %d", raw[0])}
	}
	plain, err := r.aead.Open(nil, raw[1:1+nonceSize], raw[1+nonceSize:], r.aad())
	if err != nil {
		return Announcement{}, &Error{Kind: KindUndecryptable}
	}
	var w wireAnnouncement
	if err := json.Unmarshal(plain, &w); err != nil {
		return Announcement{}, &Error{Kind: KindInvalid, Detail: "not an announcement object"}
	}
	if err := w.check(now); err != nil {
		return Announcement{}, err
	}
	return Announcement{PeerID: w.Peer, Addrs: w.Addrs, DeviceName: w.Device, Expires: time.Unix(w.Exp, 0), Sig: w.Sig}, nil
}

func (w *wireAnnouncement) check(now time.Time) error {
	switch {
	case w.Peer == "" || len(w.Peer) > maxPeerIDLen:
		return &Error{Kind: KindInvalid, Detail: "peer id missing or too long"}
	case len(w.Addrs) > MaxAddrs:
		return &Error{Kind: KindInvalid, Detail: "too many addresses"}
	case len(w.Device) > maxDeviceLen:
		return &Error{Kind: KindInvalid, Detail: "device name too long"}
	case len(w.Sig) > maxSigLen:
		return &Error{Kind: KindInvalid, Detail: "signature too long"}
	}
	for _, a := range w.Addrs {
		if a == "" || len(a) > maxAddrLen {
			return &Error{Kind: KindInvalid, Detail: "empty or too long address"}
		}
	}
	exp := time.Unix(w.Exp, 0)
	if !exp.After(now) {
		return &Error{Kind: KindExpired}
	}
	if exp.Sub(now) > MaxTTL {
		return &Error{Kind: KindInvalid, Detail: "expiry too far in the future"}
	}
	return nil
}
