package journal_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/livesync-go/livesync-go/engine/journal"
)

func addPayloadSeeds(f *testing.F) {
	for _, s := range []string{
		"", "\n", "~h:a\x1fx\n", "~h:a\x1f\\fa\\nb\\\\\n", "~h:a\x1fa\x1fb\n", "{\"_id\":\"a\"}\n",
		"\ufeff~h:a\x1fx\n", "~h:a\n", "[1]\n", "{\"_id\":\"h:x\"}\n", "{\"_id\":\"a\",\"b\":[{\"c\":null}]}\n",
	} {
		f.Add([]byte(s))
	}
}

// FuzzDecodePack: never panics; whatever decodes and re-encodes decodes
// again to the same records.
func FuzzDecodePack(f *testing.F) {
	addPayloadSeeds(f)
	f.Fuzz(func(t *testing.T, payload []byte) {
		recs, err := journal.DecodePack(payload)
		if err != nil {
			if recs != nil {
				t.Fatal("records with an error")
			}
			return
		}
		for _, r := range recs {
			if r.ID == "" || (r.IsChunk() && r.Doc != nil) || !utf8.ValidString(r.ChunkData) {
				t.Fatalf("bad record %+v", r)
			}
		}
		enc, err := journal.EncodePack(recs)
		if err != nil {
			return // e.g. a chunk id without "h:" that upstream would read
		}
		again, err := journal.DecodePack(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !equalRecords(again, compacted(t, recs)) {
			t.Fatalf("round trip changed records:\n%+v\n%+v", recs, again)
		}
	})
}

// FuzzOpen: never panics on arbitrary object bytes, with and without a
// (fake) cipher, and stays within the limit.
func FuzzOpen(f *testing.F) {
	addPayloadSeeds(f)
	for _, s := range []string{"~h:a\x1fx\n", "{\"_id\":\"a\"}\n"} {
		z, _ := journal.Deflate([]byte(s))
		f.Add(z)
	}
	f.Fuzz(func(t *testing.T, object []byte) {
		journal.Open("k", object, nil, 1<<16)
		journal.Open("k", object, xorCipher{7}, 1<<16)
		if out, err := journal.Inflate(object, 1<<16); err == nil && len(out) > 1<<16 {
			t.Fatalf("inflated %d bytes beyond the limit", len(out))
		}
	})
}

// FuzzChunkRoundTrip: chunk data with any mix of \n, \r, \\, `\f` and
// U+001F survives EncodePack/DecodePack, and an upstream-style reader
// reads the same data whenever it has no U+001F.
func FuzzChunkRoundTrip(f *testing.F) {
	for _, s := range []string{"", "x", "\n", "\r\n", `\f`, `\fx`, "\\f\n", `\\`, "a\x1fb", "\\\\n\\r", "\ufeff\f"} {
		f.Add("h:id", s)
	}
	f.Fuzz(func(t *testing.T, id, data string) {
		rec := journal.Record{ID: id, ChunkData: data}
		payload, err := journal.EncodePack([]journal.Record{rec})
		if err != nil {
			if strings.HasPrefix(id, "h:") && !strings.ContainsAny(id, "\n\x1f") && utf8.ValidString(id) && utf8.ValidString(data) {
				t.Fatalf("valid record refused: %v", err)
			}
			return
		}
		recs, err := journal.DecodePack(payload)
		if err != nil || len(recs) != 1 || recs[0].ID != id || recs[0].ChunkData != data || !recs[0].IsChunk() {
			t.Fatalf("round trip of %q: %+v %v", data, recs, err)
		}
		if !strings.Contains(data, "\x1f") {
			if got := upstreamParseChunk(t, payload); got != data {
				t.Fatalf("upstream-style reader: %q, want %q", got, data)
			}
		}
	})
}

// compacted returns recs with each Doc compacted, which is what
// EncodePack writes.
func compacted(t *testing.T, recs []journal.Record) []journal.Record {
	out := make([]journal.Record, len(recs))
	for i, r := range recs {
		out[i] = r
		if r.Doc != nil {
			var b bytes.Buffer
			if err := json.Compact(&b, r.Doc); err != nil {
				t.Fatal(err)
			}
			out[i].Doc = b.Bytes()
		}
	}
	return out
}
