package livesync

import (
	"os"
	"testing"

	"github.com/livesync-go/livesync-go/engine/internal/testvectors"
	"unicode/utf8"
)

func seedDocs(f *testing.F) {
	d := loadDump(f, "vault-dump-e2ee.json")
	for i, r := range d.Remote.AllDocs {
		if i%15 == 0 {
			b, _ := r.Doc.MarshalJSON()
			f.Add(b)
		}
	}
	f.Add([]byte(`{"_id":"a.md","data":["x"],"type":"notes"}`))
	f.Add([]byte(`{"_id":"f:1","path":"/\\:%=AAAA","children":[]}`))
	f.Add([]byte(`{"_id":"h:+x","type":"leaf","data":"%=","e_":true}`))
	f.Add([]byte(`{"_id":"a.md","eden":{"h:++encrypted-hkdf":{"data":"%=zz","epoch":1}}}`))
	f.Add([]byte("{\"_id\":\"h:x\",\"type\":\"leaf\",\"data\":\"\\u000eLZ\\u001d~AAAA\"}"))
}

// FuzzDecodeDocument feeds arbitrary JSON through every document decoder:
// parse, remote decode (decrypt, decompress), metadata, chunk, and file
// reassembly. None may panic.
func FuzzDecodeDocument(f *testing.F) {
	seedDocs(f)
	d := loadDump(f, "vault-dump-e2ee.json")
	c := newTestCodec(f, d, nil)
	f.Fuzz(func(t *testing.T, b []byte) {
		doc, err := ParseDoc(b)
		if err != nil {
			return
		}
		if plain, err := c.DecodeRemote(doc); err == nil {
			doc = plain
		}
		if ch, err := ParseChunk(doc); err == nil && ch.ID == "" {
			t.Fatal("chunk without id")
		}
		m, err := ParseMeta(doc)
		if err != nil {
			return
		}
		_, _ = ReadFile(m, func(id string) (string, error) { return id, nil })
	})
}

// FuzzFileRoundTrip: any bytes stored under a text or binary path read
// back identically (text only when it is valid UTF-8, as upstream).
func FuzzFileRoundTrip(f *testing.F) {
	b, _ := os.ReadFile(testvectors.Path("inputs/unicode-crlf.md"))
	f.Add("a.md", b)
	f.Add("b.bin", []byte{0, 1, 2, 255})
	f.Add("c.json", []byte(`{"k":[1,2,3]}`))
	c, err := New(Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path string, data []byte) {
		if path == "" || len(data) > 1<<20 {
			return
		}
		m, chunks, err := c.FileDocs(path, data, 1, 1)
		if err != nil {
			return
		}
		got, err := ReadFile(m, getterOf(chunks))
		if err != nil {
			if m.Type == TypePlain && !utf8.Valid(data) {
				return
			}
			t.Fatalf("%q: %v", path, err)
		}
		if m.Type == TypePlain && !utf8.Valid(data) {
			return
		}
		if string(got) != string(data) {
			t.Fatalf("%q: round trip differs", path)
		}
	})
}
