package rpcroom

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The RPC protocol version this package speaks (commonlib src/rpc/types.ts
// RPC_VERSION_MAJOR and RPC_VERSION_MINOR).
const (
	VersionMajor = 1
	VersionMinor = 0
)

// Envelope kinds.
const (
	KindHandshake = "handshake"
	KindRequest   = "request"
	KindResponse  = "response"
	KindCancel    = "cancel"
)

// ValidMethod reports whether method is namespaced, as commonlib requires
// of every registered or invoked method: it contains "." or "/".
func ValidMethod(method string) bool {
	return strings.ContainsAny(method, "./")
}

// ErrorShape is the error object of a failed response.
type ErrorShape struct {
	Code    Code            `json:"code"`
	Message string          `json:"message"`
	Details json.RawMessage `json:"details,omitempty"`
}

// Envelope is one decoded RPC envelope. Which fields are meaningful
// depends on Kind: VersionMajor/VersionMinor for a handshake; RequestID,
// Method and Args for a request; RequestID, OK and Data or Error for a
// response; RequestID for a cancel. Data and Args elements are raw JSON
// in which any lone surrogate of the sender's string appears as a
// \udxxx escape (encoding/json would turn it into U+FFFD when decoding
// into a Go string; UnquoteUTF16 keeps it). HasData tells a response
// whose data was absent (a JavaScript handler returned undefined) from
// one whose data was null.
type Envelope struct {
	Kind         string
	RequestID    string
	Method       string
	Args         []json.RawMessage
	OK           bool
	Data         json.RawMessage
	HasData      bool
	Error        *ErrorShape
	VersionMajor float64
	VersionMinor float64
}

type envelopeFields struct {
	Kind         string             `json:"kind"`
	RequestID    *string            `json:"requestId"`
	Method       *string            `json:"method"`
	Args         *[]json.RawMessage `json:"args"`
	OK           *bool              `json:"ok"`
	Data         json.RawMessage    `json:"data"`
	Error        *ErrorShape        `json:"error"`
	VersionMajor *float64           `json:"versionMajor"`
	VersionMinor *float64           `json:"versionMinor"`
}

// ParseEnvelope decodes the envelope JSON text b (valid UTF-8, as
// envelope reassembly produces). A handshake needs numeric versions; a
// request, response or cancel needs a string requestId; a request also
// a string method and an args array; a response a boolean ok and, when
// not ok, an error object. Errors wrap ErrMalformed; when the envelope
// had a requestId, the returned Envelope still carries Kind and
// RequestID so that a request can be answered with PROTOCOL_ERROR.
func ParseEnvelope(b []byte) (Envelope, error) {
	var f envelopeFields
	if err := json.Unmarshal(b, &f); err != nil {
		return Envelope{}, fmt.Errorf("%w: envelope: %v", ErrMalformed, err)
	}
	e := Envelope{Kind: f.Kind}
	if f.Kind == KindHandshake {
		if f.VersionMajor == nil || f.VersionMinor == nil {
			return e, fmt.Errorf("%w: handshake without versions", ErrMalformed)
		}
		e.VersionMajor, e.VersionMinor = *f.VersionMajor, *f.VersionMinor
		return e, nil
	}
	switch f.Kind {
	case KindRequest, KindResponse, KindCancel:
	default:
		return e, fmt.Errorf("%w: unknown envelope kind %q", ErrMalformed, f.Kind)
	}
	if f.RequestID == nil {
		return e, fmt.Errorf("%w: %s without requestId", ErrMalformed, f.Kind)
	}
	e.RequestID = *f.RequestID
	switch f.Kind {
	case KindRequest:
		if f.Method != nil {
			e.Method = *f.Method
		}
		if f.Method == nil || f.Args == nil {
			return e, fmt.Errorf("%w: request without method or args", ErrMalformed)
		}
		e.Args = *f.Args
	case KindResponse:
		if f.OK == nil || (!*f.OK && f.Error == nil) {
			return e, fmt.Errorf("%w: response without ok or error", ErrMalformed)
		}
		e.OK, e.Error = *f.OK, f.Error
		e.HasData = f.Data != nil
		e.Data = f.Data
	}
	return e, nil
}

// marshalJSON encodes v as JSON.stringify would in the cases that matter
// here: no HTML escaping, no trailing newline.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

type handshakeJSON struct {
	Kind         string `json:"kind"`
	VersionMajor int    `json:"versionMajor"`
	VersionMinor int    `json:"versionMinor"`
}

type requestJSON struct {
	Kind      string            `json:"kind"`
	RequestID string            `json:"requestId"`
	Method    string            `json:"method"`
	Args      []json.RawMessage `json:"args"`
}

type responseJSON struct {
	Kind      string          `json:"kind"`
	RequestID string          `json:"requestId"`
	OK        bool            `json:"ok"`
	Data      json.RawMessage `json:"data,omitempty"`
	Error     *ErrorShape     `json:"error,omitempty"`
}

type cancelJSON struct {
	Kind      string `json:"kind"`
	RequestID string `json:"requestId"`
}

func handshakeEnvelope() ([]byte, error) {
	return marshalJSON(handshakeJSON{KindHandshake, VersionMajor, VersionMinor})
}

func requestEnvelope(id, method string, args []json.RawMessage) ([]byte, error) {
	if args == nil {
		args = []json.RawMessage{}
	}
	return marshalJSON(requestJSON{KindRequest, id, method, args})
}

// okEnvelope encodes a successful response; nil data leaves the field
// out, as JSON.stringify does for undefined.
func okEnvelope(id string, data json.RawMessage) ([]byte, error) {
	return marshalJSON(responseJSON{Kind: KindResponse, RequestID: id, OK: true, Data: data})
}

func errorEnvelope(id string, shape ErrorShape) ([]byte, error) {
	return marshalJSON(responseJSON{Kind: KindResponse, RequestID: id, Error: &shape})
}

func cancelEnvelope(id string) ([]byte, error) {
	return marshalJSON(cancelJSON{KindCancel, id})
}
