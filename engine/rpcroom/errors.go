package rpcroom

import (
	"encoding/json"
	"errors"
	"strings"
)

// Code is an RPC error code as it crosses the wire in a response's
// error.code (commonlib src/rpc/types.ts RpcErrorCode).
type Code string

// The error codes of commonlib's RpcRoom.
const (
	CodeTimeout      Code = "TIMEOUT"        // no response within the call's timeout
	CodeNotConnected Code = "NOT_CONNECTED"  // the peer left, sending failed, or the room closed
	CodeRemoteError  Code = "REMOTE_ERROR"   // the remote handler failed, or the method is unknown there
	CodeCancelled    Code = "CANCELLED"      // the call was cancelled
	CodeProtocol     Code = "PROTOCOL_ERROR" // a flat method name, a malformed envelope
)

// Error is an RPC failure: a local one (timeout, cancellation, the peer
// gone) or the error shape {code, message, details?} a peer answered
// with. Details is the raw JSON of details, nil when absent. Err is the
// local cause, if any (the transport's error, the context's error).
// errors.Is(err, ErrTimeout) and the other sentinels match by Code.
type Error struct {
	Code    Code
	Message string
	Details json.RawMessage
	Err     error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("rpcroom: ")
	b.WriteString(string(e.Code))
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same Code and either no
// Message or the same Message, so that the sentinels below match any
// error of their code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Message == "" || t.Message == e.Message)
}

// Sentinels for errors.Is, one per code.
var (
	ErrTimeout      = &Error{Code: CodeTimeout}
	ErrNotConnected = &Error{Code: CodeNotConnected}
	ErrRemote       = &Error{Code: CodeRemoteError}
	ErrCancelled    = &Error{Code: CodeCancelled}
	ErrProtocol     = &Error{Code: CodeProtocol}
)

// Protocol problems with what a peer sent. The Room reports them through
// Config.OnWarning (wrapped with the detail) and drops the message, as
// commonlib's RpcRoom does with onProtocolWarning.
var (
	// ErrMalformed means a wire message or envelope is not valid JSON of
	// the expected shape.
	ErrMalformed = errors.New("rpcroom: malformed message")
	// ErrLimit means a chunked stream exceeds Config's bounds (parts,
	// size, streams per peer) and was dropped.
	ErrLimit = errors.New("rpcroom: stream exceeds limits")
	// ErrStale means an incomplete incoming stream received no part for
	// Config.StreamIdleTimeout and was dropped.
	ErrStale = errors.New("rpcroom: incomplete stream timed out")
	// ErrVersion means a peer's handshake names another major version.
	ErrVersion = errors.New("rpcroom: RPC version mismatch")
)
