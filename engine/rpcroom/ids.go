package rpcroom

import (
	"io"
	"strconv"
	"time"
)

const base36 = "0123456789abcdefghijklmnopqrstuvwxyz"

// newID returns an id as commonlib's RpcRoom makes them (src/rpc/RpcRoom.ts
// newId): prefix, "-", the time in milliseconds since the Unix epoch in
// base 36, "-", and 8 random base-36 characters, e.g.
// "req-mi2k3l8e-4f9x0a1b" or "stream-mi2k3l8e-0z8y7x6w". It returns an
// error only when r fails.
func newID(prefix string, now time.Time, r io.Reader) (string, error) {
	b := make([]byte, 0, len(prefix)+22)
	b = append(b, prefix...)
	b = append(b, '-')
	b = strconv.AppendInt(b, now.UnixMilli(), 36)
	b = append(b, '-')
	var buf [16]byte
	for n := 0; n < 8; {
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			return "", err
		}
		for _, c := range buf {
			// 252 = 7*36: rejecting larger bytes keeps the digits uniform.
			if c < 252 && n < 8 {
				b = append(b, base36[c%36])
				n++
			}
		}
	}
	return string(b), nil
}
