package journal

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"

	"github.com/livesync-go/livesync-go/engine"
)

// DefaultInflateLimit is the inflated-size bound used when a limit <= 0 is
// passed to Inflate or Open: 64 MiB. Upstream flushes a pack once its
// payload exceeds 10 MiB, so genuine packs stay far below it.
const DefaultInflateLimit int64 = 64 << 20

// ErrTooLarge is wrapped by the error Inflate and Open return when the
// inflated payload would exceed the limit (a zip-bomb guard). It wraps
// engine.ErrUnsupported: the object may be valid, but this configuration
// refuses to expand it.
var ErrTooLarge = fmt.Errorf("journal: inflated pack exceeds the size limit: %w", engine.ErrUnsupported)

// deflateLevel is the level upstream passes to fflate (commonlib
// src/replication/journal/JournalSyncCore.ts wrappedDeflate level 8).
const deflateLevel = 8

// Deflate compresses a pack payload as raw DEFLATE (RFC 1951, no zlib or
// gzip header), as commonlib does with fflate despite the ".gz" key
// suffix. The bytes differ from fflate's but every inflater reads them
// back to payload. The error is non-nil only if compress/flate fails.
func Deflate(payload []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(payload)/3 + 64)
	w, err := flate.NewWriter(&buf, deflateLevel)
	if err != nil {
		return nil, &engine.Error{Op: "deflate pack", Stage: engine.StageEncode, Err: fmt.Errorf("journal: deflate: %w", err)}
	}
	if _, err := w.Write(payload); err != nil {
		return nil, &engine.Error{Op: "deflate pack", Stage: engine.StageEncode, Err: fmt.Errorf("journal: deflate: %w", err)}
	}
	if err := w.Close(); err != nil {
		return nil, &engine.Error{Op: "deflate pack", Stage: engine.StageEncode, Err: fmt.Errorf("journal: deflate: %w", err)}
	}
	return buf.Bytes(), nil
}

// Inflate decompresses a raw DEFLATE stream and returns at most limit
// bytes (DefaultInflateLimit when limit <= 0). Like fflate's inflate, an
// empty input gives an empty output and bytes after the final block are
// ignored. Broken or truncated DEFLATE gives an *engine.Error with Stage
// engine.StageDecode wrapping engine.ErrMalformed; output beyond limit
// gives one wrapping ErrTooLarge. Memory use is bounded by limit.
func Inflate(b []byte, limit int64) ([]byte, error) {
	out, err := inflate(b, limit)
	if err != nil {
		return nil, &engine.Error{Op: "inflate pack", Stage: engine.StageDecode, Err: err}
	}
	return out, nil
}

func inflate(b []byte, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultInflateLimit
	}
	if len(b) == 0 {
		return []byte{}, nil
	}
	// A bytes.Reader is an io.ByteReader, so the decompressor reads no
	// byte past the end of the stream.
	br := bytes.NewReader(b)
	r := flate.NewReader(br)
	defer r.Close()
	// Start from a guess (packs typically shrink 1.5-4x) capped by limit.
	guess := int64(len(b)) * 4
	if guess > limit {
		guess = limit
	}
	buf := bytes.NewBuffer(make([]byte, 0, guess+1))
	n, err := io.Copy(buf, io.LimitReader(r, limit))
	if err != nil {
		return nil, inflateErr(err)
	}
	if n == limit {
		// Full: the stream is too large unless it ends exactly here.
		var one [1]byte
		m, err := io.ReadFull(r, one[:])
		if m > 0 {
			return nil, fmt.Errorf("journal: inflate: output exceeds %d bytes: %w", limit, ErrTooLarge)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, inflateErr(err)
		}
	}
	// Bytes after the end of the stream are ignored, as upstream's fflate
	// ignores them, except after an empty stream: ciphertext read without
	// the key sometimes starts with a few bits that form a complete empty
	// stream, and must not pass for an empty pack (which would then be
	// taken as received). No writer makes an empty pack with bytes after
	// it.
	if buf.Len() == 0 && br.Len() > 0 {
		return nil, fmt.Errorf("journal: inflate: an empty DEFLATE stream followed by %d more bytes is not a pack: %w", br.Len(), engine.ErrMalformed)
	}
	return buf.Bytes(), nil
}

func inflateErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("journal: inflate: truncated DEFLATE stream: %w", engine.ErrMalformed)
	}
	var ce flate.CorruptInputError
	if errors.As(err, &ce) {
		return fmt.Errorf("journal: inflate: %v: %w", ce, engine.ErrMalformed)
	}
	return fmt.Errorf("journal: inflate: %v: %w", err, engine.ErrMalformed)
}
