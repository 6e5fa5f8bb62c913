//go:build !js

package livesyncp2p

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// A peer's bulkGet answer is checked as hostile input: omissions are
// error entries and deleted documents; anything else off is malformed.
func TestParseBulkGet(t *testing.T) {
	want := map[string]bool{"h:a": true, "h:b": true, "h:c": true, "h:d": true, "h:e": true}
	ok := `{"results":[
		{"id":"h:a","docs":[{"ok":{"_id":"h:a","_rev":"1-x","type":"leaf","data":"A"}}]},
		{"id":"h:b","docs":[{"error":{"id":"h:b","error":"not_found","reason":"missing"}}]},
		{"id":"h:c","docs":[{"ok":{"_id":"h:c","_rev":"2-y","_deleted":true}}]},
		{"id":"h:d","docs":[]},
		{"id":"h:e","docs":[{"ok":{"_id":"h:e","type":"leaf","data":"E"}}]}]}`
	got, err := parseBulkGet(json.RawMessage(ok), want)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["h:a"] != (RawChunk{Chunk: engine.Chunk{ID: "h:a", Data: "A"}, Rev: "1-x"}) ||
		got["h:e"] != (RawChunk{Chunk: engine.Chunk{ID: "h:e", Data: "E"}}) {
		t.Fatalf("found %v", got)
	}
	long := strings.Repeat("a", store.MaxRevLength)
	for name, body := range map[string]string{
		"not json":       `{"results":`,
		"not asked for":  `{"results":[{"id":"h:z","docs":[]}]}`,
		"another id":     `{"results":[{"id":"h:a","docs":[{"ok":{"_id":"h:b","type":"leaf","data":"B"}}]}]}`,
		"not a leaf":     `{"results":[{"id":"h:a","docs":[{"ok":{"_id":"h:a","type":"plain","children":[]}}]}]}`,
		"still sealed":   `{"results":[{"id":"h:a","docs":[{"ok":{"_id":"h:a","type":"leaf","data":"%xyz","e_":true}}]}]}`,
		"data not text":  `{"results":[{"id":"h:a","docs":[{"ok":{"_id":"h:a","type":"leaf","data":7}}]}]}`,
		"doc not object": `{"results":[{"id":"h:a","docs":[{"ok":[1]}]}]}`,
		"rev not text":   `{"results":[{"id":"h:a","docs":[{"ok":{"_id":"h:a","_rev":7,"type":"leaf","data":"A"}}]}]}`,
		"rev empty":      `{"results":[{"id":"h:a","docs":[{"ok":{"_id":"h:a","_rev":"","type":"leaf","data":"A"}}]}]}`,
		"rev too long":   `{"results":[{"id":"h:a","docs":[{"ok":{"_id":"h:a","_rev":"1-` + long + `","type":"leaf","data":"A"}}]}]}`,
	} {
		if _, err := parseBulkGet(json.RawMessage(body), want); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !errors.Is(err, engine.ErrMalformed) && !errors.Is(err, engine.ErrDecrypt) {
			t.Errorf("%s: %v, want a malformed answer", name, err)
		}
	}
}

// FetchRaw returns each chunk with the revision the peer holds it at,
// not one computed from its content, and the ids it lacks.
func TestFetchRaw(t *testing.T) {
	relay := startRelay(t)
	a := openNode(t, relay, "room", "Alpha", nil)
	b := openNode(t, relay, "room", "Beta", nil)
	ctx, cancel := context.WithTimeout(context.Background(), meetLimit)
	defer cancel()
	one := engine.Chunk{ID: "h:one", Data: "first"}
	if err := a.st.PutChunks(ctx, []engine.Chunk{one}); err != nil {
		t.Fatal(err)
	}
	// A chunk edited once on the peer is at a second revision.
	edited := engine.Chunk{ID: "h:edited", Data: "same data"}
	rev1, err := a.st.Put(ctx, json.RawMessage(`{"_id":"h:edited","type":"leaf","data":"same data"}`))
	if err != nil {
		t.Fatal(err)
	}
	rev2, err := a.st.Put(ctx, json.RawMessage(fmt.Sprintf(`{"_id":"h:edited","_rev":%q,"type":"leaf","data":"same data"}`, rev1)))
	if err != nil {
		t.Fatal(err)
	}
	if rev2 == store.ChunkRev(edited.ID, edited.Data) || !strings.HasPrefix(rev2, "2-") {
		t.Fatalf("the edited chunk is at %q", rev2)
	}
	if _, err := b.WaitPeer(ctx, "Alpha"); err != nil {
		t.Fatal(err)
	}
	c := b.ChunkClient(a.SelfID())
	if c.Peer() != a.SelfID() {
		t.Fatalf("Peer %q", c.Peer())
	}
	found, missing, err := c.FetchRaw(ctx, []engine.ChunkID{edited.ID, "h:absent", one.ID})
	if err != nil {
		t.Fatal(err)
	}
	wantFound := []RawChunk{{Chunk: edited, Rev: rev2}, {Chunk: one, Rev: store.ChunkRev(one.ID, one.Data)}}
	if len(found) != 2 || found[0] != wantFound[0] || found[1] != wantFound[1] {
		t.Fatalf("found %+v, want %+v", found, wantFound)
	}
	if len(missing) != 1 || missing[0] != "h:absent" {
		t.Fatalf("missing %v", missing)
	}
	if found, missing, err := c.FetchRaw(ctx, nil); err != nil || found != nil || missing != nil {
		t.Fatalf("no ids: %v, %v, %v", found, missing, err)
	}
}
