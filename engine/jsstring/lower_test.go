package jsstring

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
)

// TestToLowerVectors checks the jsToLowerCase field that the real LiveSync
// library's JavaScript produced for every path of ids.json.
func TestToLowerVectors(t *testing.T) {
	raw, err := os.ReadFile(testvectors.Path("ids.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Entries []struct {
			Path          string `json:"path"`
			JSToLowerCase string `json:"jsToLowerCase"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Entries) != 29 {
		t.Fatalf("ids.json has %d entries, want 29", len(v.Entries))
	}
	for _, e := range v.Entries {
		if got := ToLower(e.Path); got != e.JSToLowerCase {
			t.Errorf("ToLower(%q) = %q, want %q", e.Path, got, e.JSToLowerCase)
		}
	}
}

// TestToLower pins results that Node 20 (V8 with ICU 78, Unicode 17.0)
// gives for String.prototype.toLowerCase().
func TestToLower(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"ascii unchanged", "notes/a.md", "notes/a.md"},
		{"ascii", "Notes/README.MD", "notes/readme.md"},
		{"capital I dot", "İstanbul", "i\u0307stanbul"},
		{"capital I dot alone", "İ", "i\u0307"},
		{"dotless i stays", "ı", "ı"},
		{"final sigma word end", "ΟΔΟΣ", "οδος"},
		{"final sigma before full stop", "ΑΣ.", "ας."},
		{"sigma alone", "Σ", "σ"},
		{"sigma inside word", "aΣb", "aσb"},
		{"sigma after digit", "1Σ", "1σ"},
		{"sigma before digit", "AΣ1", "aς1"},
		{"sigma after full stop (case-ignorable)", "A.Σ", "a.ς"},
		{"sigma after soft hyphen (Cf)", "A\u00adΣ", "a\u00adς"},
		{"sigma with combining acute", "AΣ\u0301", "aς\u0301"},
		{"soft hyphen then cased", "AΣ\u00adb", "aσ\u00adb"},
		{"titlecase dz before sigma", "ǅΣ", "ǆς"},
		{"feminine ordinal is cased", "ªΣ", "ªς"},
		{"cased and ignorable is skipped (ICU)", "ʰΣ", "ʰσ"},
		{"cased and ignorable after cased", "AʰΣ", "aʰς"},
		{"ypogegrammeni skipped", "\u0345Σ", "\u0345σ"},
		{"ypogegrammeni after cased", "A\u0345Σ", "a\u0345ς"},
		{"followed by cased-ignorable only", "AΣʰ", "aςʰ"},
		{"followed by ignorable then cased", "AΣʰb", "aσʰb"},
		{"replacement char after", "AΣ\ufffd", "aς\ufffd"},
		{"replacement char before", "\ufffdΣ", "\ufffdσ"},
		{"U+0295 no longer cased (Unicode 16)", "\u0295Σ", "\u0295σ"},
		{"sharp s and capital sharp s", "Straße/GROẞ", "straße/groß"},
		{"kelvin sign", "K", "k"},
		{"ohm sign", "Ω", "ω"},
		{"deseret", "𐐀", "𐐨"},
		{"cherokee", "Ꭰ", "ꭰ"},
		{"ligature ff unchanged", "ﬀ", "ﬀ"},
		{"Unicode 16 Garay", "\U00010D50", "\U00010D70"},
		{"Unicode 16 lambda with stroke", "\uA7DC", "\u019B"},
		{"Unicode 17 Beria Erfe", "\U00016EA0", "\U00016EBB"},
		{"Unicode 16 Cyrillic tje", "\u1C89", "\u1C8A"},
		{"emoji unchanged", "👩‍💻 Log", "👩‍💻 log"},
		{"invalid byte kept", "A\xffB", "a\xffb"},
		{"invalid byte is not cased", "\xffΣ", "\xffσ"},
		{"truncated sequence kept", "Σ\xce", "σ\xce"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ToLower(tt.in); got != tt.want {
				t.Errorf("ToLower(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestToLowerDiffersFromGo documents why the package exists: the cases
// where strings.ToLower gives a different answer.
// TestNewerUnicodeProperties pins entries of the Unicode 16/17 supplement
// tables (values from Node 20: /\p{Cased}/u, /\p{Case_Ignorable}/u).
func TestNewerUnicodeProperties(t *testing.T) {
	tests := []struct {
		r                rune
		cased, ignorable bool
	}{
		{'A', true, false},
		{'\'', false, true},
		{':', false, true},
		{'\u00b7', false, true},
		{'\u0295', false, false},     // Ll -> Lo in Unicode 16
		{'\u0897', false, true},      // new Mn
		{'\ua7f1', true, true},       // new Lm, Other_Lowercase
		{'\U0001171E', false, false}, // Mn -> Mc in Unicode 16
		{'\U00010D70', true, false},
		{'\U0001E6FF', false, true},
		{'\ufffd', false, false},
	}
	for _, tt := range tests {
		if got := isCased(tt.r); got != tt.cased {
			t.Errorf("isCased(%U) = %v, want %v", tt.r, got, tt.cased)
		}
		if got := isCaseIgnorable(tt.r); got != tt.ignorable {
			t.Errorf("isCaseIgnorable(%U) = %v, want %v", tt.r, got, tt.ignorable)
		}
	}
}

func TestToLowerDiffersFromGo(t *testing.T) {
	for _, s := range []string{"İ", "ΟΔΟΣ"} {
		if ToLower(s) == strings.ToLower(s) {
			t.Errorf("ToLower(%q) agrees with strings.ToLower; expected JavaScript semantics", s)
		}
	}
}

func TestToLowerNoAllocWhenUnchanged(t *testing.T) {
	for _, s := range []string{"notes/a.md", "日本語/ノート.md", "ας"} {
		if n := testing.AllocsPerRun(10, func() { _ = ToLower(s) }); n != 0 {
			t.Errorf("ToLower(%q) allocates %v times, want 0", s, n)
		}
	}
}

func TestUTF16(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		units []uint16
	}{
		{"empty", "", []uint16{}},
		{"ascii", "ab", []uint16{'a', 'b'}},
		{"bmp", "é日", []uint16{0xE9, 0x65E5}},
		{"astral", "a🎉", []uint16{'a', 0xD83C, 0xDF89}},
		{"invalid bytes", "\xff\xfe", []uint16{0xFFFD, 0xFFFD}},
		{"encoded surrogate is invalid", "\xed\xa0\x80", []uint16{0xFFFD, 0xFFFD, 0xFFFD}},
		{"real replacement char", "\ufffd", []uint16{0xFFFD}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UTF16Len(tt.in); got != len(tt.units) {
				t.Errorf("UTF16Len(%q) = %d, want %d", tt.in, got, len(tt.units))
			}
			if got := UTF16Units(tt.in); !equalUnits(got, tt.units) {
				t.Errorf("UTF16Units(%q) = %x, want %x", tt.in, got, tt.units)
			}
		})
	}
}

func TestUTF16LenVector(t *testing.T) {
	// ids.json notes that this path is 319 UTF-16 units long.
	p := "very-long-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-/" +
		strings.Repeat("Ä", 40) + "/" + strings.Repeat("x", 180) + " End.md"
	if got := UTF16Len(p); got != 319 {
		t.Errorf("UTF16Len = %d, want 319", got)
	}
}

func TestUTF16Prefix(t *testing.T) {
	s := "a🎉b"
	tests := []struct {
		n    int
		want []uint16
	}{
		{-1, []uint16{}},
		{0, []uint16{}},
		{1, []uint16{'a'}},
		{2, []uint16{'a', 0xD83C}}, // lone high surrogate, as JS substring allows
		{3, []uint16{'a', 0xD83C, 0xDF89}},
		{4, []uint16{'a', 0xD83C, 0xDF89, 'b'}},
		{99, []uint16{'a', 0xD83C, 0xDF89, 'b'}},
	}
	for _, tt := range tests {
		if got := UTF16Prefix(s, tt.n); !equalUnits(got, tt.want) {
			t.Errorf("UTF16Prefix(%q, %d) = %x, want %x", s, tt.n, got, tt.want)
		}
	}
}

func equalUnits(a, b []uint16) bool {
	if a == nil || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func FuzzToLower(f *testing.F) {
	for _, s := range []string{"", "ABC", "İstanbul", "ΟΔΟΣ", "ΑΣ.", "aΣb", "A\xffΣ", "Σ\xce", "a🎉b", "ʰΣ"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := ToLower(s)
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("ToLower(%q) = %q is not valid UTF-8", s, got)
		}
		if isASCII(s) && got != strings.ToLower(s) {
			t.Fatalf("ToLower(%q) = %q, want %q", s, got, strings.ToLower(s))
		}
		units := UTF16Units(s)
		if len(units) != UTF16Len(s) {
			t.Fatalf("len(UTF16Units(%q)) = %d, UTF16Len = %d", s, len(units), UTF16Len(s))
		}
		if utf8.ValidString(s) && string(utf16.Decode(units)) != s {
			t.Fatalf("UTF16Units(%q) does not decode back", s)
		}
		p := UTF16Prefix(s, n)
		want := min(max(n, 0), len(units))
		if len(p) != want || !equalUnits(p, units[:want]) {
			t.Fatalf("UTF16Prefix(%q, %d) = %x, want %x", s, n, p, units[:want])
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func BenchmarkToLower(b *testing.B) {
	cases := []struct{ name, in string }{
		{"ASCII", "Notes/Daily/2024-01-01 Meeting With The Team.md"},
		{"ASCIILower", "notes/daily/2024-01-01 meeting with the team.md"},
		{"NonASCII", "Café/Crème Brûlée/ΟΔΟΣ ΑΣ/İstanbul Ünïcode Ñame.md"},
		{"CJK", "日本語/ノート/会議メモ 2024年1月1日.md"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			for b.Loop() {
				_ = ToLower(c.in)
			}
		})
	}
}

func BenchmarkUTF16Len(b *testing.B) {
	s := "Café/Crème Brûlée/emoji 🎉/👩‍💻 work log.md"
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		_ = UTF16Len(s)
	}
}
