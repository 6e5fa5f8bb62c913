package trystero

import "fmt"

// Frame versions: the first byte of every data-channel message Trystero
// sends over a (shared) peer connection (trystero core dist
// shared-peer.mjs).
const (
	frameRoom     = 1
	framePresence = 2
)

// MaxFrameBytes bounds the data-channel messages ParseFrame accepts.
// Trystero itself sends at most 3 + 64 (room token) + 16384 (action
// header and body) bytes in one room frame, so the bound only stops a
// hostile peer from handing us large buffers.
const MaxFrameBytes = 64 << 10

// FrameKind tells a room frame from a presence frame.
type FrameKind uint8

// The two kinds of frame.
const (
	// FrameRoom carries one action frame for the room named by its token.
	FrameRoom FrameKind = frameRoom
	// FramePresence says whether the sender has joined (Present) or left
	// the room named by its token on this connection.
	FramePresence FrameKind = framePresence
)

// Frame is one decoded data-channel message.
type Frame struct {
	Kind FrameKind
	// RoomToken is the room's token (RoomToken), decoded as text.
	RoomToken string
	// Payload is a room frame's action frame (see ParseAction); it
	// aliases the buffer given to ParseFrame. Nil for presence frames.
	Payload []byte
	// Present is a presence frame's flag: true only when the byte is 1.
	Present bool
}

// RoomFrame wraps an action frame for the room with the given token:
// [0x01, len(token)>>8, len(token)&0xFF, token..., payload...]
// (shared-peer.mjs wrapRoomFrame). token is normally RoomToken(appID,
// roomID); it must be shorter than 64 KiB.
func RoomFrame(token string, payload []byte) []byte {
	t := jsUTF8(token)
	f := make([]byte, 0, 3+len(t)+len(payload))
	f = append(f, frameRoom, byte(len(t)>>8), byte(len(t)))
	f = append(f, t...)
	return append(f, payload...)
}

// PresenceFrame announces (present) or withdraws the sender's membership
// of the room with the given token: [0x02, present?1:0, len>>8, len&0xFF,
// token...] (shared-peer.mjs wrapRoomPresenceFrame).
func PresenceFrame(token string, present bool) []byte {
	t := jsUTF8(token)
	p := byte(0)
	if present {
		p = 1
	}
	f := make([]byte, 0, 4+len(t))
	f = append(f, framePresence, p, byte(len(t)>>8), byte(len(t)))
	return append(f, t...)
}

// ParseFrame decodes a data-channel message as Trystero's unwrapFrame
// does (shared-peer.mjs): a room frame needs at least 3 bytes and a token
// of 1 or more bytes that fits; a presence frame at least 4 bytes and the
// same. Anything else, which Trystero silently ignores, is an error
// wrapping ErrMalformed; a message over MaxFrameBytes wraps ErrTooLarge.
func ParseFrame(b []byte) (Frame, error) {
	if len(b) > MaxFrameBytes {
		return Frame{}, fmt.Errorf("%w: frame of %d bytes exceeds %d", ErrTooLarge, len(b), MaxFrameBytes)
	}
	if len(b) < 3 {
		return Frame{}, fmt.Errorf("%w: frame of %d bytes", ErrMalformed, len(b))
	}
	switch b[0] {
	case frameRoom:
		n := int(b[1])<<8 | int(b[2])
		if n == 0 || len(b) < 3+n {
			return Frame{}, fmt.Errorf("%w: room frame token of %d bytes in %d", ErrMalformed, n, len(b))
		}
		return Frame{Kind: FrameRoom, RoomToken: decodeText(b[3 : 3+n]), Payload: b[3+n:]}, nil
	case framePresence:
		if len(b) < 4 {
			return Frame{}, fmt.Errorf("%w: presence frame of %d bytes", ErrMalformed, len(b))
		}
		n := int(b[2])<<8 | int(b[3])
		if n == 0 || len(b) < 4+n {
			return Frame{}, fmt.Errorf("%w: presence frame token of %d bytes in %d", ErrMalformed, n, len(b))
		}
		return Frame{Kind: FramePresence, RoomToken: decodeText(b[4 : 4+n]), Present: b[1] == 1}, nil
	}
	return Frame{}, fmt.Errorf("%w: frame version %d", ErrMalformed, b[0])
}
