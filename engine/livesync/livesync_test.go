package livesync

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
)

func getterOf(chunks []Chunk) ChunkGetter {
	m := map[string]string{}
	for _, c := range chunks {
		m[c.ID] = c.Data
	}
	return func(id string) (string, error) {
		d, ok := m[id]
		if !ok {
			return "", engine.ErrNotFound
		}
		return d, nil
	}
}

func TestFileRoundTrip(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	bin := make([]byte, 300_000)
	for i := range bin {
		bin[i] = byte(i * 7 % 251)
	}
	cases := []struct {
		path string
		data []byte
		typ  string
	}{
		{"notes/a.md", []byte("# Title\n\nSome text with ünïcödé and 🎉\r\n"), TypePlain},
		{"empty.md", nil, TypePlain},
		{"data/x.json", []byte(`{"a":1}`), TypeNewNote},
		{"img/big.png", bin, TypeNewNote},
		{"_private/Calculus.md", []byte("∫ x dx"), TypePlain},
		{"bom.txt", []byte("\uFEFFbom kept\n"), TypePlain},
	}
	for _, tc := range cases {
		m, chunks, err := c.FileDocs(tc.path, tc.data, 1, 2)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if m.Type != tc.typ || m.Size != int64(len(tc.data)) || m.Path != tc.path {
			t.Errorf("%s: meta %+v", tc.path, m)
		}
		parsed, err := ParseMeta(m.Doc())
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(parsed, getterOf(chunks))
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if string(got) != string(tc.data) {
			t.Errorf("%s: round trip differs", tc.path)
		}
	}
}

func TestReadFileErrors(t *testing.T) {
	c, _ := New(Config{})
	m, chunks, err := c.FileDocs("a/b.bin", []byte("0123456789abcdef"), 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	var ee *engine.Error

	// A chunk that is not there.
	_, err = ReadFile(m, getterOf(nil))
	if !errors.Is(err, engine.ErrMissingChunk) || !errors.As(err, &ee) || ee.DocID != m.ID {
		t.Errorf("missing chunk: %v", err)
	}
	// A size that does not add up.
	bad := m
	bad.Size = 99
	_, err = ReadFile(bad, getterOf(chunks))
	if !errors.Is(err, engine.ErrSizeMismatch) || !errors.As(err, &ee) || ee.Stage != engine.StageSize {
		t.Errorf("size mismatch: %v", err)
	}
	// Corrupt base64 in a binary chunk.
	corrupt := []Chunk{{ID: chunks[0].ID, Data: "!!not base64!!"}}
	_, err = ReadFile(m, getterOf(corrupt))
	if !errors.Is(err, engine.ErrMalformed) || !errors.As(err, &ee) || ee.Stage != engine.StageDecode {
		t.Errorf("corrupt chunk: %v", err)
	}
}

func TestLegacyBinaryAndNotes(t *testing.T) {
	// The legacy "encodedUTF16" binary form: '%' then one unit per byte,
	// printable ASCII except ':' as itself, everything else shifted by 0xC0.
	var enc strings.Builder
	enc.WriteByte('%')
	src := []byte{0x00, 'A', ':', 0x7f, 0xff, '&'}
	for _, b := range src {
		if b >= 0x26 && b <= 0x7e && b != 0x3a {
			enc.WriteByte(b)
		} else {
			enc.WriteRune(rune(uint16(b) + 0xc0))
		}
	}
	got, err := decodeBinary([]string{enc.String()})
	if err != nil || string(got) != string(src) {
		t.Fatalf("legacy binary: %v %x", err, got)
	}
	d, err := ParseDoc([]byte(`{"_id":"old.md","data":["line 1\n","line 2"],"type":"notes","mtime":1,"ctime":1,"size":13}`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMeta(d)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ReadFile(m, getterOf(nil))
	if err != nil || string(out) != "line 1\nline 2" {
		t.Fatalf("legacy note: %v %q", err, out)
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{``, `[]`, `null`, `{"_id":1}`, `{"a":"b"}`, `{"_id":""}`, `{"_id":"x"`} {
		if _, err := ParseDoc([]byte(in)); !errors.Is(err, engine.ErrMalformed) {
			t.Errorf("ParseDoc(%q): %v", in, err)
		}
	}
	for _, in := range []string{
		`{"_id":"a.md","children":"x"}`,
		`{"_id":"a.md","size":"big"}`,
		`{"_id":"a.md","size":-1}`,
		`{"_id":"a.md","mtime":1.5}`,
		`{"_id":"a.md","data":{}}`,
	} {
		d, err := ParseDoc([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		_, err = ParseMeta(d)
		var ee *engine.Error
		if !errors.Is(err, engine.ErrMalformed) || !errors.As(err, &ee) || ee.DocID != "a.md" {
			t.Errorf("ParseMeta(%s): %v", in, err)
		}
	}
	for _, in := range []string{
		`{"_id":"a.md","type":"leaf","data":"x"}`,
		`{"_id":"h:1","type":"plain","data":"x"}`,
		`{"_id":"h:1","type":"leaf","data":1}`,
		`{"_id":"h:+1","type":"leaf","data":"%=x","e_":true}`,
	} {
		d, _ := ParseDoc([]byte(in))
		if _, err := ParseChunk(d); err == nil {
			t.Errorf("ParseChunk(%s): no error", in)
		}
	}
}

func TestCompressionRoundTrip(t *testing.T) {
	text := strings.Repeat("compressible text ", 100)
	bin := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x00\x01\x02", 500)))
	for _, in := range []string{text, bin, "short", ""} {
		z, err := compressData(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(in) > 100 && !strings.HasPrefix(z, compressedMark) {
			t.Errorf("%.10q... was not compressed", in)
		}
		out, err := decompressData(z)
		if err != nil || out != in {
			t.Errorf("round trip of %.10q...: %v", in, err)
		}
	}
	if _, err := decompressData(compressedMark + "~!!!"); !errors.Is(err, engine.ErrMalformed) {
		t.Errorf("bad compressed data: %v", err)
	}
	// Through the codec: compressed on the remote, plain locally.
	c, _ := New(Config{Settings: Settings{Compression: true}})
	_, chunks, _ := c.FileDocs("a.md", []byte(text), 1, 1)
	for _, ch := range chunks {
		r, err := c.EncodeRemote(ChunkDoc(ch))
		if err != nil {
			t.Fatal(err)
		}
		back, err := c.DecodeRemote(r)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := ParseChunk(back)
		if got != ch {
			t.Errorf("compressed chunk round trip differs")
		}
	}
}

func TestAppendJSString(t *testing.T) {
	cases := map[string]string{
		"plain":           `"plain"`,
		"<&>":             `"<&>"`,
		"q\"b\\":          `"q\"b\\"`,
		"\n\r\t\b\f":      `"\n\r\t\b\f"`,
		"\x01\x1f":        `"\u0001\u001f"`,
		"\u2028\u2029":    "\"\u2028\u2029\"",
		"ünï 🎉":           `"ünï 🎉"`,
		"bad\xffutf8":     "\"bad\uFFFDutf8\"",
		"\u007f":          "\"\u007f\"",
		"資料/概要.md":        `"資料/概要.md"`,
		"":                `""`,
		"tab\there":       `"tab\there"`,
		"slash/kept":      `"slash/kept"`,
		"nul\x00inside":   `"nul\u0000inside"`,
		"esc\x1b[0m":      `"esc\u001b[0m"`,
		"del\x7fchar":     "\"del\x7fchar\"",
		"mixed <b>&nbsp;": `"mixed <b>&nbsp;"`,
	}
	for in, want := range cases {
		if got := string(appendJSString(nil, in)); got != want {
			t.Errorf("appendJSString(%q) = %s, want %s", in, got, want)
		}
		var back string
		if err := json.Unmarshal(appendJSString(nil, in), &back); err != nil {
			t.Errorf("appendJSString(%q) is not JSON: %v", in, err)
		}
	}
}

func TestTweakValuesRoundTrip(t *testing.T) {
	for _, s := range []Settings{
		{},
		{Encrypt: true, Passphrase: "p", PathObfuscation: true, CustomChunkSize: 60},
		{Splitter: SplitterV1, HashAlg: HashLegacy, E2EEAlgorithm: E2EEV1, Encrypt: true, Passphrase: "p"},
		{Splitter: SplitterV2, HashAlg: HashSHA1, E2EEAlgorithm: E2EEForceV1, CaseSensitive: true, Compression: true, MinimumChunkSize: 40},
	} {
		got, err := FromTweakValues(Settings{Passphrase: s.Passphrase}, s.TweakValues())
		if err != nil {
			t.Fatal(err)
		}
		want := s
		if want.Splitter == "" {
			want.Splitter = SplitterV3
		}
		if want.HashAlg == "" {
			want.HashAlg = HashXXHash64
		}
		if want.E2EEAlgorithm == "" {
			want.E2EEAlgorithm = E2EEV2
		}
		if want.MinimumChunkSize == 0 {
			want.MinimumChunkSize = 20
		}
		if got != want {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
		}
	}
}
