package trystero

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/livesync-go/livesync-go/engine/jsstring"
)

// Handshake timeouts: Trystero's default, and the one LiveSync passes to
// joinRoom (commonlib src/rpc/transports/trysteroUtils.ts). A peer whose
// handshake has not finished by then is dropped.
const (
	DefaultHandshakeTimeout  = 10 * time.Second
	LiveSyncHandshakeTimeout = 30 * time.Second
)

// ErrHandshake means a peer failed the room-password handshake on
// ActionHandshakeData: it sent something other than the expected
// challenge or response, or a response with the wrong hash. Trystero
// reports it as "incorrect password for overlapping room" (handshake.mjs);
// it matches ErrIncorrectPassword.
var ErrHandshake error = &sentinel{"trystero: incorrect room password: handshake failed (incorrect password for overlapping room)", ErrIncorrectPassword}

// pwKey is the discriminating key of handshake messages.
const pwKey = "__trystero_pw"

// HandshakeHash is the answer to a challenge (handshake.mjs
// hashChallenge): lower-case hex SHA-256 of challenge + ":" + password +
// ":" + appID + ":" + roomID.
func HandshakeHash(challenge, password, appID, roomID string) string {
	sum := sha256.Sum256(jsUTF8(challenge + ":" + password + ":" + appID + ":" + roomID))
	return hex.EncodeToString(sum[:])
}

// handshakeMsg is the JSON.stringify text of {"__trystero_pw": kind, k: v}.
func handshakeMsg(kind, k, v string) []byte {
	b := append([]byte(`{"`+pwKey+`":`), jsstring.AppendJSONString(nil, kind)...)
	b = append(b, ',')
	b = jsstring.AppendJSONString(b, k)
	b = append(b, ':')
	b = jsstring.AppendJSONString(b, v)
	return append(b, '}')
}

// HandshakeChallenge returns the message the initiator (the peer whose id
// IsLeader) sends first on ActionHandshakeData, as a JSON body:
// {"__trystero_pw":"challenge","c":<ChallengeLen random id chars>}, and
// the challenge c. Randomness comes from r (crypto/rand when nil).
func HandshakeChallenge(r io.Reader) (msg []byte, c string) {
	c = NewID(r, ChallengeLen)
	return handshakeMsg("challenge", "c", c), c
}

// HandshakeResponse returns the responder's answer to challenge c, as a
// JSON body: {"__trystero_pw":"response","h":HandshakeHash(...)}.
func HandshakeResponse(c, password, appID, roomID string) []byte {
	return handshakeMsg("response", "h", HandshakeHash(c, password, appID, roomID))
}

// handshakeField reads a handshake message: a JSON object whose pwKey is
// the string kind and whose field k is a string. Anything else, which
// Trystero rejects, is an error wrapping ErrHandshake.
func handshakeField(msg []byte, kind, k string) (string, error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(msg, &obj) != nil || obj == nil {
		return "", fmt.Errorf("%w: handshake message is not a JSON object", ErrHandshake)
	}
	if got, _ := jsonString(obj[pwKey]); got != kind {
		return "", fmt.Errorf("%w: expected a %s", ErrHandshake, kind)
	}
	v, ok := jsonString(obj[k])
	if !ok {
		return "", fmt.Errorf("%w: %s without string %q", ErrHandshake, kind, k)
	}
	return v, nil
}

// ParseChallenge returns the challenge of the initiator's first message,
// the JSON text of a JSON message on ActionHandshakeData. Pass nil for a
// message that is not JSON (Trystero rejects those too). Errors wrap
// ErrHandshake.
func ParseChallenge(msg []byte) (string, error) {
	return handshakeField(msg, "challenge", "c")
}

// VerifyHandshake checks the responder's answer msg (the JSON text of a
// JSON message on ActionHandshakeData, nil for any other) to the
// challenge c. Errors wrap ErrHandshake.
func VerifyHandshake(msg []byte, c, password, appID, roomID string) error {
	h, err := handshakeField(msg, "response", "h")
	if err != nil {
		return err
	}
	want := HandshakeHash(c, password, appID, roomID)
	if subtle.ConstantTimeCompare([]byte(h), []byte(want)) != 1 {
		return fmt.Errorf("%w: wrong response hash", ErrHandshake)
	}
	return nil
}
