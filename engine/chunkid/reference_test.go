package chunkid

import (
	"crypto/sha1"
	"encoding/base64"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
)

// referenceID computes the id the slow, obvious way, mirroring the
// JavaScript template strings of commonlib's hash managers: build the
// JavaScript string (utf16.Encode([]rune(piece))), concatenate, then hash
// its UTF-8 (or its UTF-16 units for mixed-purejs) in one shot.
func referenceID(h *Hasher, piece string) string {
	js := utf16.Encode([]rune(piece))
	text := string(utf16.Decode(js)) // what TextEncoder would produce
	n := strconv.Itoa(len(js))
	prefix := "h:"
	if h.encrypt {
		prefix = "h:+"
	}
	keyed := "-"
	if h.encrypt {
		keyed = "-" + h.hp + "-"
	}
	switch h.alg {
	case XXHash64:
		return prefix + strconv.FormatUint(xxhash.Sum64String(text+keyed+n), 36)
	case XXHash32:
		return prefix + strconv.FormatUint(uint64(XXH32([]byte(text+keyed+n), 0)), 36)
	case Legacy:
		v := XXH32([]byte(text), 0) ^ uint32(len(js))
		if h.encrypt {
			v ^= h.hp32
		}
		return prefix + strconv.FormatInt(int64(int32(v)), 36)
	case MixedPureJS:
		s := text + "-" + n
		if h.encrypt {
			s = text + h.hp + n
		}
		units := utf16.Encode([]rune(s))
		m, f := MixedHash(utf16.Encode([]rune(strconv.Itoa(len(units))+s)), 1)
		return prefix + strconv.FormatUint(uint64(m), 36) + strconv.FormatUint(uint64(f), 36)
	case SHA1:
		sum := sha1.Sum([]byte(text + keyed + n))
		return prefix + base64.StdEncoding.EncodeToString(sum[:])
	}
	panic("unreachable")
}

var allAlgs = []HashAlg{XXHash64, XXHash32, Legacy, MixedPureJS, SHA1}

// trickyPieces are pieces whose UTF-16 length or UTF-8 form is easy to
// get wrong: multi-byte sequences straddling 8-byte words, astral
// characters, U+FFFD itself and invalid UTF-8.
var trickyPieces = []string{
	"",
	"-",
	"helloWorld",
	"1234567é",
	"123456😀",
	"1234567😀89abcdef",
	strings.Repeat("ü", 33),
	strings.Repeat("🎉", 17),
	"\uFFFD",
	"a\xffb",
	"\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7",
	"\xed\xa0\x80",     // a surrogate encoded as UTF-8: three invalid bytes
	"\xf0\x9f\x98",     // a truncated 4-byte sequence
	"abcdefg\xf0\x9f",  // truncated at a word boundary
	"\xc0\xaf",         // overlong encoding
	"\U0010FFFF\u0800", // highest code point, lowest 3-byte one
	strings.Repeat("AAECA/8=", 40),
	strings.Repeat("x", 16) + "-",
}

// TestIDMatchesReference checks ID against referenceID for every mode on
// the tricky pieces, with and without E2EE.
func TestIDMatchesReference(t *testing.T) {
	for _, alg := range allAlgs {
		for _, enc := range []bool{false, true} {
			h, err := New(alg, enc, "pässwörd🔑")
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range trickyPieces {
				if got, want := h.ID(p), referenceID(h, p); got != want {
					t.Errorf("%q e2ee=%v ID(%q) = %q, want %q", alg, enc, p, got, want)
				}
			}
		}
	}
}

// TestInvalidUTF8IsReplacementChar checks the documented mapping: every
// invalid byte is hashed and counted as U+FFFD.
func TestInvalidUTF8IsReplacementChar(t *testing.T) {
	for _, alg := range allAlgs {
		h, err := New(alg, true, "test")
		if err != nil {
			t.Fatal(err)
		}
		if a, b := h.ID("a\xff\xfeb"), h.ID("a\uFFFD\uFFFDb"); a != b {
			t.Errorf("%q: ID of invalid bytes %q != ID of U+FFFD %q", alg, a, b)
		}
	}
}

// TestUTF16Len checks the word-at-a-time UTF-16 length against
// unicode/utf16 on every prefix of a mixed string.
func TestUTF16Len(t *testing.T) {
	s := "ab€😀cdé\u0800fgh\U0010FFFFijklmnopq🎉r\xffs\xe2\x82t"
	for i := 0; i <= len(s); i++ {
		for j := i; j <= len(s); j++ {
			p := s[i:j]
			n, _ := utf16Len(p)
			if want := len(utf16.Encode([]rune(p))); n != want {
				t.Fatalf("utf16Len(%q) = %d, want %d", p, n, want)
			}
		}
	}
	tests := []struct {
		in    string
		n     int
		valid bool
	}{
		{"", 0, true},
		{"helloWorld", 10, true},
		{"😀", 2, true},
		{"𠮷野家", 4, true},
		{"a\xffb", 3, false},
		{"\xed\xa0\x80", 3, false},
	}
	for _, tt := range tests {
		if n, valid := utf16Len(tt.in); n != tt.n || valid != tt.valid {
			t.Errorf("utf16Len(%q) = %d, %v; want %d, %v", tt.in, n, valid, tt.n, tt.valid)
		}
	}
}

// TestPassphraseTruncation checks that the passphrase is cut after
// floor(3/4 × length) UTF-16 units, even inside a surrogate pair.
func TestPassphraseTruncation(t *testing.T) {
	tests := []struct {
		passphrase string
		material   []uint16 // after SALT_OF_ID
	}{
		{"", nil},
		{"a", nil},
		{"test", []uint16{'t', 'e', 's'}},
		{"ab😀", []uint16{'a', 'b', 0xD83D}}, // 4 units → 3: a lone high surrogate
		{"\xff\xff\xff\xff", []uint16{0xFFFD, 0xFFFD, 0xFFFD}},
	}
	for _, tt := range tests {
		h, err := New(MixedPureJS, true, tt.passphrase)
		if err != nil {
			t.Fatal(err)
		}
		pfh := append(utf16.Encode([]rune(saltOfID)), tt.material...)
		hp32, _ := MixedHash(pfh, 0x12345678)
		if got, want := h.HashedPassphrase(), mixedEachUTF16(pfh); got != want {
			t.Errorf("%q: HashedPassphrase = %q, want %q", tt.passphrase, got, want)
		}
		if got := h.HashedPassphrase32(); got != hp32 {
			t.Errorf("%q: HashedPassphrase32 = %d, want %d", tt.passphrase, got, hp32)
		}
	}
}

// TestIDAllocations checks that the streaming modes allocate only the
// returned string.
func TestIDAllocations(t *testing.T) {
	piece := strings.Repeat("Hello, wörld 🎉\n", 64)
	for _, alg := range []HashAlg{XXHash64, XXHash32, Legacy, MixedPureJS} {
		h, err := New(alg, true, "test")
		if err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(20, func() { _ = h.ID(piece) }); n > 1 {
			t.Errorf("%q: %v allocations per ID, want ≤ 1", alg, n)
		}
	}
}

// FuzzID checks that ID never panics, is deterministic, has the "h:" or
// "h:+" prefix, and agrees with referenceID, for every mode.
func FuzzID(f *testing.F) {
	for _, p := range trickyPieces {
		f.Add(p, "test")
	}
	f.Add("# Hello\n", "vector-passphrase")
	hashers := map[string]*Hasher{}
	f.Fuzz(func(t *testing.T, piece, passphrase string) {
		for _, alg := range allAlgs {
			for _, enc := range []bool{false, true} {
				h, err := New(alg, enc, passphrase)
				if err != nil {
					t.Fatal(err)
				}
				key := string(alg) + strconv.FormatBool(enc)
				if hashers[key] == nil {
					hashers[key] = h
				}
				id := h.ID(piece)
				prefix := "h:"
				if enc {
					prefix = "h:+"
				}
				if !strings.HasPrefix(id, prefix) || len(id) == len(prefix) {
					t.Fatalf("%q e2ee=%v: ID %q lacks prefix %q or body", alg, enc, id, prefix)
				}
				if enc && strings.HasPrefix(id, "h:++") && alg != SHA1 {
					t.Fatalf("%q: ID %q has a doubled '+'", alg, id)
				}
				if again := h.ID(piece); again != id {
					t.Fatalf("%q e2ee=%v: ID not deterministic: %q then %q", alg, enc, id, again)
				}
				if want := referenceID(h, piece); id != want {
					t.Fatalf("%q e2ee=%v: ID = %q, reference %q", alg, enc, id, want)
				}
				// Without E2EE the passphrase must not matter.
				if !enc {
					if other := hashers[key].ID(piece); other != id {
						t.Fatalf("%q: plain ID depends on the passphrase", alg)
					}
				}
			}
		}
	})
}

// TestConcurrentID uses one Hasher from several goroutines (run with
// -race): IDs are the same as sequential ones.
func TestConcurrentID(t *testing.T) {
	h, err := New(XXHash64, true, "test")
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, len(trickyPieces))
	for i, p := range trickyPieces {
		want[i] = h.ID(p)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4*len(trickyPieces))
	for range 4 {
		wg.Go(func() {
			for i, p := range trickyPieces {
				if got := h.ID(p); got != want[i] {
					errs <- got
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for got := range errs {
		t.Errorf("concurrent ID %q differs from the sequential one", got)
	}
}

// TestUTF8DFA checks utf16Len's validation and count against
// utf8.ValidString and unicode/utf16 on every sequence of up to four
// bytes drawn from the edges of the UTF-8 byte classes, placed at each
// offset of a 16-byte block (the DFA path) and in the tail.
func TestUTF8DFA(t *testing.T) {
	edges := []byte{0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF,
		0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF}
	var seqs [][]byte
	var gen func(prefix []byte)
	gen = func(prefix []byte) {
		seqs = append(seqs, prefix)
		if len(prefix) == 4 {
			return
		}
		for _, b := range edges {
			gen(append(prefix[:len(prefix):len(prefix)], b))
		}
	}
	gen(nil)
	pad := strings.Repeat("x", 40)
	for _, q := range seqs {
		for _, off := range []int{0, 5, 13, 15, 30} {
			s := pad[:off] + string(q) + pad[:17]
			n, valid := utf16Len(s)
			if want := utf8.ValidString(s); valid != want {
				t.Fatalf("utf16Len(%q) valid = %v, want %v", s, valid, want)
			}
			if want := len(utf16.Encode([]rune(s))); n != want {
				t.Fatalf("utf16Len(%q) = %d, want %d", s, n, want)
			}
		}
	}
}

// TestUTF16LenLongASCII puts one non-ASCII sequence (valid or not) at
// every offset of a long ASCII string, so that it falls into each part
// of utf16Len's 16- and 32-byte ASCII loops.
func TestUTF16LenLongASCII(t *testing.T) {
	ascii := strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789+/", 6)
	for _, q := range []string{"é", "日", "😀", "\xff", "\xe2\x82", "\xf0\x9f\x98"} {
		for off := 0; off <= len(ascii); off++ {
			for _, n := range []int{off, min(off+70, len(ascii)), len(ascii)} {
				s := ascii[:off] + q + ascii[off:n]
				got, valid := utf16Len(s)
				if want := len(utf16.Encode([]rune(s))); got != want || valid != utf8.ValidString(s) {
					t.Fatalf("utf16Len(%q) = %d, %v; want %d, %v", s, got, valid, want, utf8.ValidString(s))
				}
			}
		}
	}
}
