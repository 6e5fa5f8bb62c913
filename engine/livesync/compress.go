package livesync

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/livesync-go/livesync-go/engine"
)

// compressedMark starts chunk data compressed by the enableCompression
// setting (commonlib src/pouchdb/compress.ts MARK_SHIFT_COMPRESSED).
const compressedMark = "\u000eLZ\u001d"

// maxInflated bounds the size of one decompressed data field, so a hostile
// remote cannot exhaust memory with a small compressed chunk.
const maxInflated = 64 << 20

// base64Alphabet reports whether s is one or more characters of the
// standard base64 alphabet followed by any number of "=" (the regular
// expression ^[A-Za-z0-9+/]+=*$, written out so that the engine does not
// link package regexp and Unicode's tables into the wasm module).
func base64Alphabet(s string) bool {
	n := 0
	for n < len(s) {
		c := s[n]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/') {
			break
		}
		n++
	}
	if n == 0 {
		return false
	}
	for _, c := range []byte(s[n:]) {
		if c != '=' {
			return false
		}
	}
	return true
}

// compressData applies upstream's chunk compression: canonical base64 is
// compressed as bytes (flag "~"), any other string as UTF-8; the result is
// kept only if it is shorter in UTF-16 units.
func compressData(data string) (string, error) {
	payload := []byte(data)
	flag := ""
	stripped := strings.NewReplacer("\r", "", "\n", "").Replace(data)
	if stripped != "" && base64Alphabet(stripped) {
		if raw, err := base64.StdEncoding.DecodeString(stripped); err == nil && base64.StdEncoding.EncodeToString(raw) == stripped {
			payload, flag = raw, "~"
		}
	}
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, 8)
	if err != nil {
		return "", err
	}
	if _, err := w.Write(payload); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	out := compressedMark + flag + base64.StdEncoding.EncodeToString(buf.Bytes())
	if utf16Len(out) < utf16Len(data) {
		return out, nil
	}
	return data, nil
}

// decompressData reverses compressData; data without the mark is returned
// unchanged. Upstream decodes text through Blob.text(), which drops a
// leading BOM; so does this.
func decompressData(data string) (string, error) {
	if !strings.HasPrefix(data, compressedMark) {
		return data, nil
	}
	rest := data[len(compressedMark):]
	isB64 := strings.HasPrefix(rest, "~")
	if isB64 {
		rest = rest[1:]
	}
	packed, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return "", fmt.Errorf("livesync: compressed data is not base64: %w", engine.ErrMalformed)
	}
	r := flate.NewReader(bytes.NewReader(packed))
	defer r.Close()
	raw, err := io.ReadAll(io.LimitReader(r, maxInflated+1))
	if err != nil {
		return "", fmt.Errorf("livesync: compressed data does not inflate: %w", engine.ErrMalformed)
	}
	if len(raw) > maxInflated {
		return "", fmt.Errorf("livesync: compressed data inflates beyond %d bytes: %w", maxInflated, engine.ErrMalformed)
	}
	if isB64 {
		return base64.StdEncoding.EncodeToString(raw), nil
	}
	s := strings.ToValidUTF8(string(raw), "\uFFFD")
	return strings.TrimPrefix(s, "\uFEFF"), nil
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 && r <= utf8.MaxRune {
			n += 2
		} else {
			n++
		}
	}
	return n
}
