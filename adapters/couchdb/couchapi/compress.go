package couchapi

import (
	"compress/gzip"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Compression chooses whether the server compresses its answers.
type Compression int

const (
	// CompressionGzip, the default, gzips an answer when the client sends
	// Accept-Encoding: gzip, the answer is JSON (or multipart/mixed) of at
	// least CompressMinBytes, and it is not a longpoll or continuous
	// _changes feed: those are never compressed, so that every row and
	// heartbeat reaches the client as soon as it is written.
	CompressionGzip Compression = iota
	// CompressionOff never compresses answers, e.g. behind a reverse
	// proxy that compresses itself. Request bodies sent with
	// Content-Encoding: gzip are accepted either way.
	CompressionOff
)

// CompressMinBytes is the smallest answer CompressionGzip compresses:
// below it the gzip framing costs more than it saves.
const CompressMinBytes = 1024

// compressLevel favours speed: most of a LiveSync answer is encrypted
// chunk data, which no level shrinks much beyond undoing base64.
const compressLevel = gzip.BestSpeed

var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(io.Discard, compressLevel) // the level is valid
	return w
}}

// acceptsGzip reports whether Accept-Encoding values accept gzip: gzip
// (or x-gzip) listed with a non-zero q, or "*" with a non-zero q when
// gzip is not listed.
func acceptsGzip(values []string) bool {
	star := false
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "x-gzip" && coding != "*" {
				continue
			}
			ok := qNonZero(params)
			if coding == "*" {
				star = ok
				continue
			}
			return ok
		}
	}
	return star
}

// qNonZero reports whether the parameters of an Accept-Encoding element
// leave its q above zero (no q means 1; a malformed q is zero).
func qNonZero(params string) bool {
	for _, p := range strings.Split(params, ";") {
		k, v, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(k), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && q > 0
		}
	}
	return true
}

// compressible reports whether an answer with this status and header
// may be compressed: one with a body, not already encoded, JSON or
// multipart/mixed.
func compressible(status int, h http.Header) bool {
	if status < 200 || status == http.StatusNoContent || status == http.StatusNotModified {
		return false
	}
	if h.Get("Content-Encoding") != "" {
		return false
	}
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "application/json" || mt == "multipart/mixed"
}

// respWriter records the status sent, drops HEAD bodies and compresses
// answers (see Compression). An answer of unknown length is held until
// CompressMinBytes have been written, a flush, or the handler's end
// decides whether it is compressed.
type respWriter struct {
	http.ResponseWriter
	status int
	wrote  bool // the handler began its answer
	head   bool // a HEAD request: bodies are dropped

	compress bool // the server compresses answers
	gzipOK   bool // the client accepts gzip
	stream   bool // a feed: never compressed
	holding  bool // the header waits for the first bytes
	held     []byte
	gz       *gzip.Writer
}

func (w *respWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.status, w.wrote = code, true
	h := w.Header()
	if w.compress && !w.stream && compressible(code, h) {
		h.Add("Vary", "Accept-Encoding")
		if w.gzipOK && !w.head {
			n, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64)
			switch {
			case err != nil:
				w.holding = true
				return
			case n >= CompressMinBytes:
				w.startGzip()
				return
			}
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

// startGzip sends the header of a compressed answer.
func (w *respWriter) startGzip() {
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Encoding", "gzip")
	w.ResponseWriter.WriteHeader(w.status)
	w.gz = gzipWriters.Get().(*gzip.Writer)
	w.gz.Reset(w.ResponseWriter)
}

func (w *respWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.head {
		return len(b), nil
	}
	if w.holding {
		if len(w.held)+len(b) < CompressMinBytes {
			w.held = append(w.held, b...)
			return len(b), nil
		}
		w.holding = false
		w.startGzip()
		if len(w.held) > 0 {
			if _, err := w.gz.Write(w.held); err != nil {
				return 0, err
			}
			w.held = nil
		}
	}
	if w.gz != nil {
		return w.gz.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// release sends a held answer as it is, with its length when complete.
func (w *respWriter) release(complete bool) error {
	w.holding = false
	if complete {
		w.Header().Set("Content-Length", strconv.Itoa(len(w.held)))
	}
	w.ResponseWriter.WriteHeader(w.status)
	held := w.held
	w.held = nil
	if len(held) == 0 {
		return nil
	}
	_, err := w.ResponseWriter.Write(held)
	return err
}

// FlushError sends what was written so far (http.ResponseController
// calls it): a held answer goes out uncompressed, a compressed one
// flushes its gzip stream.
func (w *respWriter) FlushError() error {
	if w.holding {
		if err := w.release(false); err != nil {
			return err
		}
	}
	if w.gz != nil {
		if err := w.gz.Flush(); err != nil {
			return err
		}
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// finish completes the answer after the handler returned normally.
func (w *respWriter) finish() {
	if w.holding {
		_ = w.release(true)
	}
	if w.gz != nil {
		_ = w.gz.Close()
		w.gz.Reset(io.Discard)
		gzipWriters.Put(w.gz)
		w.gz = nil
	}
}

// Unwrap lets http.ResponseController reach the connection's other
// controls (deadlines).
func (w *respWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// gzipBody decompresses a request body sent with Content-Encoding: gzip.
// The decompressed size is capped at max: more ends in an
// *http.MaxBytesError, so a small body that inflates past the request
// limit (a gzip bomb) is refused like an oversized one.
type gzipBody struct {
	src io.ReadCloser // the compressed body, itself size-limited
	max int64
	r   io.Reader
}

func (b *gzipBody) Read(p []byte) (int, error) {
	if b.r == nil {
		zr, err := gzip.NewReader(b.src)
		if err != nil {
			return 0, err
		}
		b.r = http.MaxBytesReader(nil, io.NopCloser(zr), b.max)
	}
	return b.r.Read(p)
}

func (b *gzipBody) Close() error { return b.src.Close() }

// decodeBody replaces a compressed request body with its decompressed
// form. Only gzip (and identity) are accepted, as CouchDB does.
func (s *Server) decodeBody(r *http.Request) *apiError {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	switch strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))) {
	case "", "identity":
		return nil
	case "gzip", "x-gzip":
	default:
		return errorf(http.StatusUnsupportedMediaType, "bad_content_type", "Content-Encoding must be gzip or identity.")
	}
	r.Body = &gzipBody{src: r.Body, max: s.maxReq}
	r.ContentLength = -1
	r.Header.Del("Content-Length")
	r.Header.Del("Content-Encoding")
	return nil
}
