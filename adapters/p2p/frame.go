//go:build !js

package p2p

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Protocol ids. The trailing number is the protocol version: a change that
// an older peer would misread gets a new id.
const (
	// ChunksProtocol serves chunks by id (Serve, ServeChunks,
	// ChunkClient).
	ChunksProtocol = "/livesync-go/chunks/1"
	// ReplicateProtocol serves document replication, _local documents
	// and the handshake's records (Serve, Remote).
	ReplicateProtocol = "/livesync-go/replicate/1"
)

// MaxFrameSize bounds one frame's payload, in bytes. A reader rejects a
// longer frame before allocating anything for it; a writer refuses to send
// one.
const MaxFrameSize = 32 << 20

// ErrFrameTooLarge is returned for a frame whose length exceeds
// MaxFrameSize, read or written.
var ErrFrameTooLarge = errors.New("p2p: frame larger than the limit")

// writeFrame writes payload as one frame: its length as 4 bytes big
// endian, then the bytes.
func writeFrame(w io.Writer, payload []byte) error {
	if len(payload) > MaxFrameSize {
		return fmt.Errorf("%w: %d > %d bytes", ErrFrameTooLarge, len(payload), MaxFrameSize)
	}
	buf := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(buf, uint32(len(payload)))
	copy(buf[4:], payload)
	_, err := w.Write(buf)
	return err
}

// readFrame reads one frame of at most limit bytes (at most MaxFrameSize).
// The length comes from the peer, so it is checked against the limit
// before the buffer is allocated.
func readFrame(r io.Reader, limit uint32) ([]byte, error) {
	limit = min(limit, MaxFrameSize)
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > limit {
		return nil, fmt.Errorf("%w: peer announced %d > %d bytes", ErrFrameTooLarge, n, limit)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("p2p: truncated frame: %w", err)
	}
	return buf, nil
}

// writeJSON encodes v as one frame and returns the payload's length.
func writeJSON(w io.Writer, v any) (int, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	return len(b), writeFrame(w, b)
}

// readJSON decodes one frame of at most limit bytes into v and returns
// the payload's length.
func readJSON(r io.Reader, limit uint32, v any) (int, error) {
	b, err := readFrame(r, limit)
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return len(b), fmt.Errorf("p2p: malformed message: %w", err)
	}
	return len(b), nil
}
