package holdback

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// FuzzBulkDocs pushes arbitrary documents: no panic, one result per
// document, and a document the Store serves is never file metadata with
// a chunk missing.
func FuzzBulkDocs(f *testing.F) {
	for _, seed := range []json.RawMessage{
		meta("a.md", "1-a", "h:1"), meta("b.md", "1-b", "h:0"), tombstone("a.md", "2-b", "a"),
		metaHist("a.md", "2-c", []string{"a"}, "h:0", "h:2"), chunk("h:1"),
		json.RawMessage(`{"_id":"f:1","_rev":"1-a","type":"plain","path":"/\\:%=x","children":[]}`),
		json.RawMessage(`{"_id":"c.md","_rev":"1-a","type":"plain","children":["h:0"],"eden":{"h:++encrypted-hkdf":{"data":"x","epoch":1}}}`),
		json.RawMessage(`{"_id":"d.md","_rev":"1-a","type":"newnote","children":["h:0","h:3"],"size":"x"}`),
		json.RawMessage(`{"_id":"e.md","_rev":"1-a","_revisions":{"start":1,"ids":["b"]},"type":"plain","children":["h:3"]}`),
		json.RawMessage(`{"_id":"n.md","_rev":"1-a","data":"legacy"}`),
		json.RawMessage(`null`), json.RawMessage(`{}`),
	} {
		f.Add([]byte(seed))
	}
	inner, err := store.NewMemory(store.Options{})
	if err != nil {
		f.Fatal(err)
	}
	s, err := New(Config{}, Deps{Inner: inner})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	if _, err := s.BulkDocs(bg, []json.RawMessage{chunk("h:0")}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		res, err := s.BulkDocs(bg, []json.RawMessage{doc, chunk("h:2")})
		if err != nil {
			t.Fatalf("BulkDocs: %v", err)
		}
		if len(res) != 2 {
			t.Fatalf("%d results", len(res))
		}
		d, err := livesync.ParseDoc(doc)
		if err != nil {
			return
		}
		served, err := s.Get(bg, d.ID(), store.GetOptions{})
		if errors.Is(err, engine.ErrNotFound) {
			return
		}
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if j := classify(s.codec, served); j.kind == kindMeta && len(j.r.Chunks) > 0 {
			got, err := s.GetChunks(bg, j.r.Chunks)
			if err != nil {
				t.Fatalf("GetChunks: %v", err)
			}
			for _, id := range j.r.Chunks {
				if _, ok := got[id]; !ok {
					t.Fatalf("%s served without chunk %s", d.ID(), id)
				}
			}
		}
	})
}

// FuzzHoldingDocuments decodes arbitrary holding documents and indexes
// (read back from the inner store at a restart): an error or a value
// that encodes and decodes to itself.
func FuzzHoldingDocuments(f *testing.F) {
	f.Add([]byte(`{"revs":{"1-a":{"source":"","body":{"_id":"a.md","_rev":"1-a"}}}}`))
	f.Add([]byte(`{"revs":{}}`))
	f.Add([]byte(`{"revs":{"x":{"body":1}}}`))
	f.Add([]byte(`{"docs":["a.md","b.md"]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := decodeHolding(b); err == nil {
			enc, err := json.Marshal(h)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			h2, err := decodeHolding(enc)
			if err != nil || len(h2.Revs) != len(h.Revs) {
				t.Fatalf("round trip: %v, %d != %d revisions", err, len(h2.Revs), len(h.Revs))
			}
		} else if !errors.Is(err, engine.ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", err)
		}
		if ix, err := decodeIndex(b); err == nil {
			enc, _ := json.Marshal(ix)
			ix2, err := decodeIndex(enc)
			if err != nil || !reflect.DeepEqual(ix2, ix) {
				t.Fatalf("index round trip: %v, %v != %v", err, ix2, ix)
			}
		}
	})
}
