package trystero

import (
	"fmt"
	"math"
	"strings"
)

// Layout of an action frame, the payload of a room frame (trystero core
// dist action-wire.mjs).
const (
	// ActionNameBytes is the width of the NUL-padded action name.
	ActionNameBytes = 32
	// ActionHeaderBytes is the size of the header before each body:
	// name (32), nonce (2, big-endian), flags (1), progress (1).
	ActionHeaderBytes = 36
	// ChunkBytes is the largest body of one action frame, 16 KiB less
	// the header: 16348.
	ChunkBytes = 16<<10 - ActionHeaderBytes
)

// Flag bits of an action frame.
const (
	flagLast     = 1
	flagMetadata = 2
	flagBinary   = 4
	flagJSON     = 8
)

// Trystero's internal actions (room.mjs, "@_" + name). Only ActionLeave,
// ActionHandshakeData and ActionHandshakeReady are received from a peer
// whose handshake has not finished (see ReceiveWhilePending).
const (
	ActionPing           = "@_ping"
	ActionPong           = "@_pong"
	ActionSignal         = "@_signal"
	ActionStream         = "@_stream"
	ActionTrack          = "@_track"
	ActionLeave          = "@_leave"
	ActionHandshakeData  = "@_hsdata"
	ActionHandshakeReady = "@_hsready"
	// ActionResponse carries answers of request-kind actions (actions.mjs).
	ActionResponse = "@_response"
)

// ReceiveWhilePending reports whether Trystero processes frames of the
// action from a peer that is connected but has not finished the
// handshake (room.mjs receiveWhilePending). Frames of every other action
// from such a peer are dropped before reassembly.
func ReceiveWhilePending(action string) bool {
	switch action {
	case ActionLeave, ActionHandshakeData, ActionHandshakeReady:
		return true
	}
	return false
}

// ActionHeader is the 36-byte header of an action frame.
type ActionHeader struct {
	// Name is the action's name, at most 32 bytes of UTF-8. A decoded
	// name has every NUL removed, as Trystero strips the padding.
	Name string
	// Nonce numbers the sends of one action by one room; all frames of a
	// message carry the same nonce. It wraps after 65535.
	Nonce uint16
	// Last marks the final frame of a message.
	Last bool
	// Metadata marks a frame whose body is the message's metadata (JSON);
	// Trystero sends it first.
	Metadata bool
	// Binary marks a message whose body is raw bytes; JSON marks one
	// whose body is JSON text. Neither means a string. Every frame of a
	// message carries them; a receiver uses those of the last frame.
	Binary, JSON bool
	// Progress is round(255 * (index+1) / frames).
	Progress uint8
}

// flags packs the header's flag bits.
func (h ActionHeader) flags() byte {
	var f byte
	if h.Last {
		f |= flagLast
	}
	if h.Metadata {
		f |= flagMetadata
	}
	if h.Binary {
		f |= flagBinary
	}
	if h.JSON {
		f |= flagJSON
	}
	return f
}

// AppendFrame appends the header and body as one action frame to dst. It
// returns ErrActionName for an empty or over-long name.
func (h ActionHeader) AppendFrame(dst, body []byte) ([]byte, error) {
	name := jsUTF8(h.Name)
	if len(name) == 0 || len(name) > ActionNameBytes {
		return dst, fmt.Errorf("%w: %d bytes", ErrActionName, len(name))
	}
	dst = append(dst, name...)
	for range ActionNameBytes - len(name) {
		dst = append(dst, 0)
	}
	dst = append(dst, byte(h.Nonce>>8), byte(h.Nonce), h.flags(), h.Progress)
	return append(dst, body...), nil
}

// ParseAction splits an action frame into its header and body, as
// Trystero's receiver reads it (action-wire.mjs handleData): the name is
// the text of bytes 0-31 with every NUL removed, and the body starts at
// byte 36. Like Trystero it reads missing header bytes of a short frame
// as zero (an empty frame is an unnamed, non-final chunk with an empty
// body), so it never fails. body aliases b.
func ParseAction(b []byte) (h ActionHeader, body []byte) {
	at := func(i int) byte {
		if i < len(b) {
			return b[i]
		}
		return 0
	}
	name := b[:min(len(b), ActionNameBytes)]
	h.Name = strings.ReplaceAll(decodeText(name), "\x00", "")
	h.Nonce = uint16(at(32))<<8 | uint16(at(33))
	f := at(34)
	h.Last, h.Metadata = f&flagLast != 0, f&flagMetadata != 0
	h.Binary, h.JSON = f&flagBinary != 0, f&flagJSON != 0
	h.Progress = at(35)
	if len(b) > ActionHeaderBytes {
		body = b[ActionHeaderBytes:]
	}
	return h, body
}

// BodyKind says how a message body is typed on the wire.
type BodyKind uint8

// Body kinds, as Trystero derives them from the JavaScript value sent.
const (
	// BodyString is a JavaScript string, sent as its UTF-8.
	BodyString BodyKind = iota
	// BodyJSON is any other non-binary value, sent as the UTF-8 of its
	// JSON.stringify text; the body given to SplitAction is that text.
	BodyJSON
	// BodyBinary is an ArrayBuffer, typed array or Blob: raw bytes.
	BodyBinary
)

// SplitAction cuts one message into the action frames Trystero's sender
// produces for it (action-wire.mjs send): when meta is non-nil (JSON
// text) it travels alone in the first frame with the metadata flag; the
// body follows in ChunkBytes pieces (at least one frame in all, even for
// an empty body); every frame carries the name, the nonce, the kind's
// flag and progress round(255*(i+1)/n), and the last one the last flag.
// The caller picks the nonce: Trystero counts sends per action and room
// from 0 (see Sender). It returns ErrActionName for an invalid name.
func SplitAction(name string, nonce uint16, body []byte, kind BodyKind, meta []byte) ([][]byte, error) {
	hasMeta := meta != nil
	n := (len(body) + ChunkBytes - 1) / ChunkBytes
	if hasMeta {
		n++
	}
	n = max(n, 1)
	frames := make([][]byte, 0, n)
	for i := range n {
		h := ActionHeader{
			Name:     name,
			Nonce:    nonce,
			Last:     i == n-1,
			Metadata: hasMeta && i == 0,
			Binary:   kind == BodyBinary,
			// Trystero's isJson is typeof data !== "string", so binary
			// messages carry the JSON flag as well (action-wire.mjs).
			JSON:     kind != BodyString,
			Progress: progress(i, n),
		}
		var part []byte
		switch {
		case h.Metadata:
			part = meta
		default:
			k := i
			if hasMeta {
				k--
			}
			part = body[min(k*ChunkBytes, len(body)):min((k+1)*ChunkBytes, len(body))]
		}
		f, err := h.AppendFrame(make([]byte, 0, ActionHeaderBytes+len(part)), part)
		if err != nil {
			return nil, err
		}
		frames = append(frames, f)
	}
	return frames, nil
}

// progress is JavaScript Math.round((i + 1) / n * 255): the nearest
// integer, halves rounded up.
func progress(i, n int) uint8 {
	x := float64(i+1) / float64(n) * 255
	r := math.Floor(x)
	if x-r >= 0.5 {
		r++
	}
	return uint8(r)
}

// Sender numbers the messages one room sends, as Trystero keeps one
// nonce counter per action (starting at 0 and wrapping after 65535) for
// all peers of the room. The zero value is ready; it is not safe for
// concurrent use.
type Sender struct {
	nonces map[string]uint16
}

// Split returns the frames of the next message on the action (see
// SplitAction) and advances the action's nonce.
func (s *Sender) Split(name string, body []byte, kind BodyKind, meta []byte) ([][]byte, error) {
	if s.nonces == nil {
		s.nonces = make(map[string]uint16)
	}
	nonce := s.nonces[name]
	frames, err := SplitAction(name, nonce, body, kind, meta)
	if err != nil {
		return nil, err
	}
	s.nonces[name] = nonce + 1
	return frames, nil
}
