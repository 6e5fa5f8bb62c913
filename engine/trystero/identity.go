package trystero

import (
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/livesync-go/livesync-go/engine/chunkid"
	"github.com/livesync-go/livesync-go/engine/jsstring"
)

// DefaultAppID is the Trystero appId LiveSync uses when the P2P_AppID
// setting is empty (commonlib src/rpc/transports/trysteroUtils.ts).
const DefaultAppID = "self-hosted-livesync"

// libName is the name Trystero puts in front of topics and room tokens.
const libName = "Trystero"

// idAlphabet is the alphabet of Trystero's genId (trystero core dist
// utils.mjs): digits, then each letter upper-case before lower-case.
const idAlphabet = "0123456789AaBbCcDdEeFfGgHhIiJjKkLlMmNnOoPpQqRrSsTtUuVvWwXxYyZz"

// Lengths of Trystero's random ids.
const (
	SelfIDLen    = 20 // a peer's selfId (utils.mjs genId(20))
	OfferIDLen   = 12 // an offer's offerId (signal-handler.mjs offerIdSize)
	ChallengeLen = 36 // the password handshake's challenge (handshake.mjs genId(36))
)

// RoomPassword is the Trystero room password LiveSync derives from the
// P2P passphrase (commonlib src/rpc/transports/trysteroUtils.ts):
// octagonal-wheels mixedHash over the passphrase's UTF-16 code units with
// seed 0, the two halves printed in base 36 and concatenated. The
// passphrase "test" gives "1bhxaay1cs5qlh".
func RoomPassword(passphrase string) string {
	h, fnv := chunkid.MixedHash(jsstring.UTF16Units(passphrase), 0)
	return strconv.FormatUint(uint64(h), 36) + strconv.FormatUint(uint64(fnv), 36)
}

// SHA1B36 is Trystero's topic hash (crypto.mjs sha1): the SHA-1 of the
// UTF-8 of s, each of the 20 bytes printed in base 36 without padding and
// concatenated, so the result has 20 to 40 characters.
func SHA1B36(s string) string {
	sum := sha1.Sum(jsUTF8(s))
	b := make([]byte, 0, 40)
	for _, x := range sum {
		b = strconv.AppendUint(b, uint64(x), 36)
	}
	return string(b)
}

// rootPlain is the plaintext of a room's root topic, the "@"-joined path
// "Trystero@<appId>@<roomId>" (strategy.mjs topicPath).
func rootPlain(appID, roomID string) string {
	return libName + "@" + appID + "@" + roomID
}

// RootTopic is the signalling topic every peer of a room announces on:
// SHA1B36("Trystero@" + appID + "@" + roomID).
func RootTopic(appID, roomID string) string {
	return SHA1B36(rootPlain(appID, roomID))
}

// SelfTopic is the signalling topic on which the peer selfID receives
// offers, answers and candidates: SHA1B36 of the root topic's plaintext
// followed by "@" + selfID. Sending to a peer means publishing on
// SelfTopic(appID, roomID, thatPeersID).
func SelfTopic(appID, roomID, selfID string) string {
	return SHA1B36(rootPlain(appID, roomID) + "@" + selfID)
}

// TopicKind is the Nostr event kind Trystero's Nostr strategy uses for a
// topic (@trystero-p2p/nostr dist index.mjs topicToKind, core strToNum):
// the sum of the topic's UTF-16 code units modulo 10000, plus 20000, so
// always an ephemeral kind in [20000, 29999].
func TopicKind(topic string) int {
	sum := 0
	for _, u := range jsstring.UTF16Units(topic) {
		sum += int(u)
	}
	return sum%10000 + 20000
}

// RoomToken is the room namespace Trystero puts into every data-channel
// frame so that one connection can carry several rooms (crypto.mjs
// deriveRoomNamespace): the lower-case hex SHA-256 of
// "Trystero:" + appID + ":" + roomID, 64 characters.
func RoomToken(appID, roomID string) string {
	sum := sha256.Sum256(jsUTF8(libName + ":" + appID + ":" + roomID))
	return hex.EncodeToString(sum[:])
}

// NewID returns n characters drawn uniformly from Trystero's id alphabet
// (0-9, then A a B b ... Z z) with randomness from r, or crypto/rand when
// r is nil. It panics if r fails, as crypto/rand never does.
func NewID(r io.Reader, n int) string {
	if r == nil {
		r = rand.Reader
	}
	out := make([]byte, 0, n)
	var buf [64]byte
	for len(out) < n {
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			panic("trystero: reading random bytes: " + err.Error())
		}
		for _, b := range buf {
			// 248 = 4*62: rejecting larger bytes keeps the choice uniform.
			if b < 248 && len(out) < n {
				out = append(out, idAlphabet[b%62])
			}
		}
	}
	return string(out)
}

// NewSelfID returns a fresh peer id of SelfIDLen characters (see NewID).
func NewSelfID(r io.Reader) string { return NewID(r, SelfIDLen) }

// NewOfferID returns a fresh offer id of OfferIDLen characters (see NewID).
func NewOfferID(r io.Reader) string { return NewID(r, OfferIDLen) }

// IsLeader reports whether the peer self leads the pairing with other:
// Trystero compares the two selfIds as JavaScript strings (UTF-16 code
// unit order) and the smaller one sends the offer and, when the room has
// a password, the handshake challenge (signal-handler.mjs, handshake.mjs
// selfId < id).
func IsLeader(self, other string) bool {
	if isASCII(self) && isASCII(other) {
		return self < other
	}
	return slices.Compare(jsstring.UTF16Units(self), jsstring.UTF16Units(other)) < 0
}

func isASCII(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r >= 0x80 }) < 0
}
