package trystero

import (
	"errors"

	"github.com/livesync-go/livesync-go/engine"
)

// sentinel is an error value with its own message that also matches a
// broader engine sentinel under errors.Is.
type sentinel struct {
	msg  string
	base error
}

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Unwrap() error { return e.base }

// Errors of this package. Every error it returns wraps one of these;
// callers test with errors.Is and never match messages.
var (
	// ErrIncorrectPassword means sealed signalling data (an offer, an
	// answer or an ICE candidate) could not be opened with the room key,
	// or a peer failed the room-password handshake. Trystero reports both
	// as a join error: "incorrect room password when decrypting offer"
	// (or answer) from its signal handler, and "incorrect password for
	// overlapping room" from its handshake (trystero core dist
	// signal-handler.mjs, handshake.mjs). It also matches
	// engine.ErrDecrypt.
	ErrIncorrectPassword error = &sentinel{"trystero: incorrect room password", engine.ErrDecrypt}
	// ErrMalformed means input does not follow Trystero's wire format: a
	// frame with an unknown version or a short header, a signalling
	// message that is not a JSON object or has an empty or non-string
	// signal field, metadata or a JSON body that does not parse. It also
	// matches engine.ErrMalformed.
	ErrMalformed error = &sentinel{"trystero: malformed message", engine.ErrMalformed}
	// ErrTooLarge means input exceeds one of the bounds this package puts
	// on what a peer controls (MaxFrameBytes, MaxSealedBytes, a
	// Reassembler's limits). It also matches engine.ErrTooLarge.
	ErrTooLarge error = &sentinel{"trystero: too large", engine.ErrTooLarge}
	// ErrActionName means an action name is empty or longer than 32 bytes
	// of UTF-8, which Trystero refuses to send.
	ErrActionName = errors.New("trystero: action name must be 1 to 32 bytes of UTF-8")
)
