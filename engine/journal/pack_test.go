package journal_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
)

func chunk(id, data string) journal.Record { return journal.Record{ID: id, ChunkData: data} }

func doc(js string) journal.Record {
	var d struct {
		ID string `json:"_id"`
	}
	if err := json.Unmarshal([]byte(js), &d); err != nil {
		panic(err)
	}
	return journal.Record{ID: d.ID, Doc: json.RawMessage(js)}
}

// TestAppendRecord pins the byte form of records (commonlib
// JournalSyncCore.ts serializeDoc, utils.ts escapeNewLineFromString).
func TestAppendRecord(t *testing.T) {
	tests := []struct {
		name string
		rec  journal.Record
		want string
	}{
		{"plain chunk", chunk("h:abc", "Hello"), "~h:abc\x1fHello\n"},
		{"empty chunk", chunk("h:abc", ""), "~h:abc\x1f\n"},
		{"LF escaped", chunk("h:a", "x\ny"), "~h:a\x1f\\fx\\ny\n"},
		{"CR escaped", chunk("h:a", "x\ry"), "~h:a\x1f\\fx\\ry\n"},
		{"backslash escaped only with a line break", chunk("h:a", "a\\b\n"), "~h:a\x1f\\fa\\\\b\\n\n"},
		{"backslash alone kept", chunk("h:a", `a\nb`), "~h:a\x1fa\\nb\n"},
		{"escape-looking data kept", chunk("h:a", `x\f`), "~h:a\x1fx\\f\n"},
		// Upstream would write `\fabc` raw and read it back as "abc";
		// we escape it so both readers get `\fabc` back.
		{"leading marker escaped", chunk("h:a", `\fabc`), "~h:a\x1f\\f\\\\fabc\n"},
		{"U+001F in data kept raw", chunk("h:a", "a\x1fb"), "~h:a\x1fa\x1fb\n"},
		{"E2EE-keyed chunk id", chunk("h:+abc", "z"), "~h:+abc\x1fz\n"},
		{"document compact", doc(`{"_id":"a.md","_rev":"1-x","n":1}`), `{"_id":"a.md","_rev":"1-x","n":1}` + "\n"},
		{"document white space removed", doc("{ \"_id\" : \"a.md\",\n \"s\":\"x y\\n\" }"), `{"_id":"a.md","s":"x y\n"}` + "\n"},
		{"document escapes kept", doc(`{"_id":"\u0061.md","s":"\u2028<&>"}`), `{"_id":"\u0061.md","s":"\u2028<&>"}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := journal.AppendRecord([]byte("prev"), tt.rec)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "prev"+tt.want {
				t.Fatalf("got %q, want %q", got, "prev"+tt.want)
			}
			back, err := journal.DecodePack(got[4:])
			if err != nil || len(back) != 1 {
				t.Fatalf("decode: %v %v", back, err)
			}
			want := tt.rec
			if !want.IsChunk() {
				want.Doc = json.RawMessage(strings.TrimSuffix(tt.want, "\n"))
			}
			if !equalRecords(back, []journal.Record{want}) {
				t.Fatalf("round trip: got %+v, want %+v", back[0], want)
			}
		})
	}
}

// TestAppendRecordRejects lists records a reader could not read back.
func TestAppendRecordRejects(t *testing.T) {
	tests := []struct {
		name string
		rec  journal.Record
	}{
		{"empty chunk id", chunk("", "x")},
		{"chunk id without h:", chunk("abc", "x")},
		{"chunk id with LF", chunk("h:a\nb", "x")},
		{"chunk id with U+001F", chunk("h:a\x1fb", "x")},
		{"invalid UTF-8 data", chunk("h:a", "\xff")},
		{"invalid UTF-8 id", chunk("h:\xff", "x")},
		{"doc not JSON", journal.Record{ID: "a", Doc: json.RawMessage(`{"_id":"a"`)}},
		{"doc array", journal.Record{ID: "a", Doc: json.RawMessage(`["a"]`)}},
		{"doc null", journal.Record{ID: "a", Doc: json.RawMessage(`null`)}},
		{"doc without _id", journal.Record{ID: "a", Doc: json.RawMessage(`{"id":"a"}`)}},
		{"doc _id not string", journal.Record{ID: "1", Doc: json.RawMessage(`{"_id":1}`)}},
		{"doc _id case differs", journal.Record{ID: "a", Doc: json.RawMessage(`{"_ID":"a"}`)}},
		{"doc id mismatch", journal.Record{ID: "b", Doc: json.RawMessage(`{"_id":"a"}`)}},
		{"doc with chunk id", journal.Record{ID: "h:a", Doc: json.RawMessage(`{"_id":"h:a","data":"x"}`)}},
		{"doc with chunk data", journal.Record{ID: "a", ChunkData: "x", Doc: json.RawMessage(`{"_id":"a"}`)}},
		{"doc invalid UTF-8", journal.Record{ID: "a", Doc: json.RawMessage("{\"_id\":\"a\",\"s\":\"\xff\"}")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("keep")
			got, err := journal.AppendRecord(dst, tt.rec)
			if !errors.Is(err, engine.ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
			if string(got) != "keep" {
				t.Fatalf("dst changed to %q", got)
			}
			_, err = journal.EncodePack([]journal.Record{chunk("h:ok", "1"), tt.rec})
			var ee *engine.Error
			if !errors.As(err, &ee) || ee.Stage != engine.StageEncode || !strings.Contains(err.Error(), "record 1") {
				t.Fatalf("EncodePack: %v", err)
			}
		})
	}
}

// TestDecodePack covers the reader rules of JournalSyncCore.ts's receive
// transform, including the places where this package keeps more than
// upstream.
func TestDecodePack(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    []journal.Record
	}{
		{"empty payload", "", nil},
		{"chunk and doc", "~h:a\x1fx\n{\"_id\":\"d\"}\n", []journal.Record{chunk("h:a", "x"), doc(`{"_id":"d"}`)}},
		// Upstream splits at every U+001F and would read "a" only.
		{"stray U+001F kept", "~h:a\x1fa\x1fb\x1f\n", []journal.Record{chunk("h:a", "a\x1fb\x1f")}},
		{"escaped data", "~h:a\x1f\\fl1\\nl2\\r\\\\\\x\n", []journal.Record{chunk("h:a", "l1\nl2\r\\\\x")}},
		{"trailing lone backslash", "~h:a\x1f\\fx\\\n", []journal.Record{chunk("h:a", "x\\")}},
		// Upstream quirk kept: raw data starting with `\f` is unescaped.
		{"raw leading marker read as upstream", "~h:a\x1f\\fab\\\\c\n", []journal.Record{chunk("h:a", "ab\\c")}},
		{"chunk id any prefix", "~x\x1fy\n", []journal.Record{chunk("x", "y")}},
		{"BOM per record dropped", "\ufeff~h:a\x1fx\n\ufeff{\"_id\":\"d\"}\n", []journal.Record{chunk("h:a", "x"), doc(`{"_id":"d"}`)}},
		{"BOM inside data kept", "~h:a\x1f\ufeffx\n", []journal.Record{chunk("h:a", "\ufeffx")}},
		{"CR kept in raw line", "~h:a\x1fx\r\n", []journal.Record{chunk("h:a", "x\r")}},
		{"JSON doc with chunk id is a document", "{\"_id\":\"h:a\",\"data\":\"x\"}\n", []journal.Record{{ID: "h:a", Doc: json.RawMessage(`{"_id":"h:a","data":"x"}`)}}},
		{"duplicate _id: last wins", "{\"_id\":\"a\",\"_id\":\"b\"}\n", []journal.Record{{ID: "b", Doc: json.RawMessage(`{"_id":"a","_id":"b"}`)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := journal.DecodePack([]byte(tt.payload))
			if err != nil {
				t.Fatal(err)
			}
			if !equalRecords(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestDecodePackErrors checks that each malformed record is refused with
// its line number and never with its content.
func TestDecodePackErrors(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		line    int
		reason  string
	}{
		{"no separator", "~h:a\x1fok\n~h:secret-data\n", 2, "U+001F"},
		{"empty id", "~\x1fsecret\n", 1, "empty id"},
		{"broken JSON", "~h:a\x1fx\n{\"_id\":\"a\"}\n{\"_id\":\"secret\"\n", 3, "invalid JSON"},
		{"JSON array", "[\"secret\"]\n", 1, "not a JSON object"},
		{"JSON null", "null\n", 1, "not a JSON object"},
		{"JSON without _id", "{\"x\":\"secret\"}\n", 1, "_id"},
		{"empty _id", "{\"_id\":\"\"}\n", 1, "_id"},
		{"numeric _id", "{\"_id\":7}\n", 1, "_id"},
		{"empty line", "~h:a\x1fx\n\n", 2, "empty record"},
		{"leading empty line", "\n~h:a\x1fx\n", 1, "empty record"},
		{"unterminated", "~h:a\x1fx\n~h:b\x1fsecret", 2, "not terminated"},
		{"invalid UTF-8", "~h:a\x1fsecret\xff\n", 1, "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := journal.DecodePack([]byte(tt.payload))
			if recs != nil {
				t.Errorf("records returned with an error: %v", recs)
			}
			var pe *journal.ParseError
			var ee *engine.Error
			if !errors.As(err, &pe) || !errors.As(err, &ee) || !errors.Is(err, engine.ErrMalformed) {
				t.Fatalf("err = %v", err)
			}
			if pe.Line != tt.line || !strings.Contains(pe.Reason, tt.reason) || ee.Stage != engine.StageDecode {
				t.Fatalf("got line %d %q stage %q, want line %d %q", pe.Line, pe.Reason, ee.Stage, tt.line, tt.reason)
			}
			if strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "parse") {
				t.Fatalf("error text %q", err)
			}
		})
	}
}

func TestDecodeFuncStopsOnCallbackError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := journal.DecodeFunc([]byte("~h:a\x1f1\n~h:b\x1f2\n~h:c\x1f3\n"), func(r journal.Record) error {
		n++
		if r.ID == "h:b" {
			return stop
		}
		return nil
	})
	if err != stop || n != 2 {
		t.Fatalf("err %v after %d records", err, n)
	}
}

// TestEscapeAmbiguity: chunk data starting with `\f` and without line
// breaks round-trips through our encoder, and an upstream-style reader
// (split at every U+001F, then unescapeNewLineFromString) reads our
// encoding the same way.
func TestEscapeAmbiguity(t *testing.T) {
	for _, data := range []string{`\f`, `\fabc`, `\f\n`, `\f\\`, "\\f\n", `\\f`, `\fa\nb\rc`} {
		payload, err := journal.EncodePack([]journal.Record{chunk("h:x", data)})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := journal.DecodePack(payload)
		if err != nil || len(recs) != 1 || recs[0].ChunkData != data {
			t.Fatalf("%q: decoded %+v, %v", data, recs, err)
		}
		if got := upstreamParseChunk(t, payload); got != data {
			t.Fatalf("%q: upstream-style reader gets %q", data, got)
		}
	}
}

func TestKey(t *testing.T) {
	tests := []struct {
		rec  journal.Record
		want string
	}{
		{chunk("h:a", "x"), "h:a"},
		{doc(`{"_id":"n.md","_rev":"2-ab"}`), "n.md-2-ab"},
		{doc(`{"_id":"n.md"}`), "n.md-undefined"},
		{doc(`{"_id":"n.md","_rev":3}`), "n.md-3"},
	}
	for _, tt := range tests {
		if got := tt.rec.Key(); got != tt.want {
			t.Errorf("Key() = %q, want %q", got, tt.want)
		}
	}
}

func TestInflate(t *testing.T) {
	payload := bytes.Repeat([]byte("~h:a\x1fhello\n"), 1000)
	z, err := journal.Deflate(payload)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("exact limit", func(t *testing.T) {
		got, err := journal.Inflate(z, int64(len(payload)))
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("one byte over the limit", func(t *testing.T) {
		_, err := journal.Inflate(z, int64(len(payload)-1))
		if !errors.Is(err, journal.ErrTooLarge) || !errors.Is(err, engine.ErrUnsupported) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("zip bomb", func(t *testing.T) {
		bomb, err := journal.Deflate(make([]byte, 4<<20))
		if err != nil {
			t.Fatal(err)
		}
		if len(bomb) > 16<<10 {
			t.Fatalf("bomb is %d bytes", len(bomb))
		}
		_, err = journal.Open("k", bomb, nil, 256<<10)
		var ee *engine.Error
		if !errors.Is(err, journal.ErrTooLarge) || !errors.As(err, &ee) || ee.Stage != engine.StageDecode ||
			ee.DocID != "k" || !strings.Contains(err.Error(), "inflate") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("empty input is an empty pack", func(t *testing.T) {
		got, err := journal.Inflate(nil, 0)
		if err != nil || len(got) != 0 {
			t.Fatalf("%q %v", got, err)
		}
		recs, err := journal.Open("k", nil, nil, 0)
		if err != nil || len(recs) != 0 {
			t.Fatalf("%v %v", recs, err)
		}
	})
	t.Run("an empty stream followed by bytes is not a pack", func(t *testing.T) {
		// Ciphertext read without the key can start like this; taken as an
		// empty pack, it would be recorded as received and never read.
		empty, err := journal.Deflate(nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := journal.Inflate(empty, 0); err != nil || len(got) != 0 {
			t.Fatalf("the empty stream alone: %q %v", got, err)
		}
		if _, err := journal.Inflate(append(bytes.Clone(empty), 0x5a, 0x17, 0xc3), 0); !errors.Is(err, engine.ErrMalformed) {
			t.Fatalf("got %v, want ErrMalformed", err)
		}
	})
	t.Run("bytes after the final block ignored", func(t *testing.T) {
		got, err := journal.Inflate(append(bytes.Clone(z), 1, 2, 3), 0)
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("%v", err)
		}
	})
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	for name, b := range map[string][]byte{
		"truncated":     z[:len(z)/2],
		"last byte cut": z[:len(z)-1],
		"random bytes":  random,
		"bad block":     {0xff, 0xff, 0xff},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := journal.Inflate(b, 0)
			var ee *engine.Error
			if !errors.Is(err, engine.ErrMalformed) || !errors.As(err, &ee) || ee.Stage != engine.StageDecode ||
				!strings.Contains(err.Error(), "inflate") {
				t.Fatalf("%v", err)
			}
			_, err = journal.Open("key.jsonl.gz", b, nil, 0)
			if !errors.Is(err, engine.ErrMalformed) || !strings.Contains(err.Error(), `"key.jsonl.gz"`) {
				t.Fatalf("Open: %v", err)
			}
		})
	}
}

// xorCipher is a test fake: not encryption, just reversible and
// checkable. Decryption fails unless the object starts with its magic.
type xorCipher struct{ key byte }

var errFake = errors.New("fake cipher: bad magic")

func (c xorCipher) EncryptBinary(p []byte) ([]byte, error) {
	out := append([]byte("XOR"), p...)
	for i := 3; i < len(out); i++ {
		out[i] ^= c.key
	}
	return out, nil
}

func (c xorCipher) DecryptBinary(b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, []byte("XOR")) {
		return nil, errFake
	}
	out := bytes.Clone(b[3:])
	for i := range out {
		out[i] ^= c.key
	}
	return out, nil
}

type failingCipher struct{}

func (failingCipher) EncryptBinary([]byte) ([]byte, error) { return nil, errFake }
func (failingCipher) DecryptBinary([]byte) ([]byte, error) {
	return nil, errors.Join(engine.ErrDecrypt, errFake)
}

func TestSealOpen(t *testing.T) {
	recs := []journal.Record{
		chunk("h:1", "line\r\nline"), chunk("h:2", "aGVsbG8="), chunk("h:3", `\fx`),
		doc(`{"_id":"n.md","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"children":["h:1","h:2","h:3"]}`),
	}
	for _, c := range []journal.Cipher{nil, xorCipher{0x5a}} {
		obj, err := journal.Seal(recs, c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := journal.Open("k", obj, c, 0)
		if err != nil || !equalRecords(got, recs) {
			t.Fatalf("cipher %v: %+v %v", c, got, err)
		}
	}
	obj, _ := journal.Seal(recs, xorCipher{1})
	for _, c := range []journal.Cipher{failingCipher{}, xorCipher{1}} {
		// xorCipher{1} on a nil-cipher object: no magic, plain error that
		// Open must still classify as ErrDecrypt.
		in := obj
		if _, ok := c.(xorCipher); ok {
			in, _ = journal.Seal(recs, nil)
		}
		_, err := journal.Open("k", in, c, 0)
		var ee *engine.Error
		if !errors.Is(err, engine.ErrDecrypt) || !errors.As(err, &ee) || ee.Stage != engine.StageDecrypt ||
			!strings.Contains(err.Error(), "decrypt") {
			t.Fatalf("%T: %v", c, err)
		}
	}
	// A wrong key decrypts to garbage: refused at inflate or parse.
	if _, err := journal.Open("k", obj, xorCipher{2}, 0); !errors.Is(err, engine.ErrMalformed) {
		t.Fatalf("wrong xor key: %v", err)
	}
	_, err := journal.Seal(recs, failingCipher{})
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Stage != engine.StageEncrypt || !errors.Is(err, errFake) {
		t.Fatalf("Seal: %v", err)
	}
	if _, err := journal.Seal([]journal.Record{chunk("", "x")}, nil); !errors.Is(err, engine.ErrMalformed) {
		t.Fatalf("Seal bad record: %v", err)
	}
}

func TestPackKeys(t *testing.T) {
	if got := journal.PackKey("vault/", 1700000501000); got != "vault/1700000501000-docs.jsonl.gz" {
		t.Fatal(got)
	}
	tests := []struct {
		prefix, key string
		ms          int64
		ok          bool
	}{
		{"", "1700000501000-docs.jsonl.gz", 1700000501000, true},
		{"v/", "v/0-docs.jsonl.gz", 0, true},
		{"v/", "1-docs.jsonl.gz", 0, false},
		{"", "01-docs.jsonl.gz", 0, false},
		{"", "-1-docs.jsonl.gz", 0, false},
		{"", "+1-docs.jsonl.gz", 0, false},
		{"", "-docs.jsonl.gz", 0, false},
		{"", "12-docs.jsonl", 0, false},
		{"", "1a-docs.jsonl.gz", 0, false},
		{"", "99999999999999999999-docs.jsonl.gz", 0, false},
		{"", journal.MilestoneKey, 0, false},
		{"", journal.SyncParametersKey, 0, false},
	}
	for _, tt := range tests {
		ms, ok := journal.ParsePackKey(tt.prefix, tt.key)
		if ms != tt.ms || ok != tt.ok {
			t.Errorf("ParsePackKey(%q, %q) = %d, %v", tt.prefix, tt.key, ms, ok)
		}
	}
}

// TestComparePackKeys pins the order Node 20 (ICU, en-US) gives with
// a.localeCompare(b, undefined, {numeric: true}).
func TestComparePackKeys(t *testing.T) {
	sorted := []string{"_x", "9-docs.jsonl.gz", "10-docs.jsonl.gz", "1700000501000-docs.jsonl.gz",
		"1700000502000-docs.jsonl.gz", "a", "Abc1", "abc2", "abc10", "B"}
	for i := range sorted {
		for j := range sorted {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := journal.ComparePackKeys(sorted[i], sorted[j]); got != want {
				t.Errorf("ComparePackKeys(%q, %q) = %d, want %d", sorted[i], sorted[j], got, want)
			}
		}
	}
	// ICU's ASCII order: " _-,;:!?.'\"()[]{}@*/\&#%`^+<=>|~$", digits, letters.
	ascii := " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789aAbBcCdDeEfFgGhHiIjJkKlLmMnNoOpPqQrRsStTuUvVwWxXyYzZ"
	for i := 0; i+1 < len(ascii); i++ {
		if c := journal.ComparePackKeys(ascii[i:i+1], ascii[i+1:i+2]); c != -1 {
			t.Errorf("%q vs %q: %d", ascii[i], ascii[i+1], c)
		}
	}
	pairs := []struct {
		a, b string
		want int
	}{
		{"ab", "a-b", 1},
		{"a b", "ab", -1},
		{"a1b", "A1a", 1},
		{"01", "1", -1},      // ICU: 0; byte order breaks the tie
		{"x\x00y", "xy", -1}, // ICU: 0 (control characters ignored)
		{"1.5", "1.10", -1},
		{"e", "é", -1},
		{"z", "é", -1},
		{"", "a", -1},
	}
	for _, p := range pairs {
		if got := journal.ComparePackKeys(p.a, p.b); got != p.want {
			t.Errorf("ComparePackKeys(%q, %q) = %d, want %d", p.a, p.b, got, p.want)
		}
		if got := journal.ComparePackKeys(p.b, p.a); got != -p.want {
			t.Errorf("ComparePackKeys(%q, %q) = %d, want %d", p.b, p.a, got, -p.want)
		}
	}
}
