package chunkid

import (
	"encoding/base64"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
)

// benchText returns about n bytes of markdown-like text with some
// non-ASCII characters, cut at a character boundary.
func benchText(n int) string {
	s := strings.Repeat("# Note\nHello, wörld — a line of text ✓ with an emoji 🎉.\n", n/40+1)
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// benchBase64 returns the base64 piece of a 100 KiB binary chunk (the
// default V3 binary chunk size).
func benchBase64() string {
	return base64.StdEncoding.EncodeToString(testPattern(100 * 1024))
}

func benchID(b *testing.B, alg HashAlg, encrypt bool, piece string) {
	h, err := New(alg, encrypt, "vector-passphrase")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(piece)))
	b.ReportAllocs()
	for b.Loop() {
		_ = h.ID(piece)
	}
}

func BenchmarkIDXXHash64(b *testing.B) {
	b.Run("text256", func(b *testing.B) { benchID(b, XXHash64, false, benchText(256)) })
	b.Run("text1KiB", func(b *testing.B) { benchID(b, XXHash64, false, benchText(1024)) })
	b.Run("text1KiB-e2ee", func(b *testing.B) { benchID(b, XXHash64, true, benchText(1024)) })
	b.Run("base64-100KiB", func(b *testing.B) { benchID(b, XXHash64, false, benchBase64()) })
}

func BenchmarkID(b *testing.B) {
	piece := benchText(256)
	for _, alg := range []HashAlg{XXHash32, Legacy, MixedPureJS, SHA1} {
		name := string(alg)
		if alg == Legacy {
			name = "legacy"
		}
		b.Run(name+"/text256", func(b *testing.B) { benchID(b, alg, false, piece) })
		b.Run(name+"/text256-e2ee", func(b *testing.B) { benchID(b, alg, true, piece) })
	}
}

func BenchmarkXXH32(b *testing.B) {
	data := testPattern(100 * 1024)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		_ = XXH32(data, 0)
	}
}

func BenchmarkUTF16Len(b *testing.B) {
	md, err := os.ReadFile(testvectors.Path("inputs/large.md"))
	if err != nil {
		b.Fatal(err)
	}
	// The vectors' markdown: 200 KiB, about 9% non-ASCII bytes.
	for _, tc := range []struct{ name, s string }{{"text1KiB", benchText(1024)}, {"markdown", string(md)}, {"base64-100KiB", benchBase64()}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.s)))
			for b.Loop() {
				_, _ = utf16Len(tc.s)
			}
		})
	}
}

func BenchmarkIDXXHash64Scripts(b *testing.B) {
	ascii := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 23)[:1024]
	cjk := strings.Repeat("日本語のテキストです。", 32)[:1023]
	b.Run("ascii1KiB", func(b *testing.B) { benchID(b, XXHash64, false, ascii) })
	b.Run("cjk1KiB", func(b *testing.B) { benchID(b, XXHash64, false, cjk) })
}
