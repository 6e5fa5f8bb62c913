//go:build !js

package livesyncp2p

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
)

// A peer's bulkGet answer is checked as hostile input: omissions are
// error entries and deleted documents; anything else off is malformed.
func TestParseBulkGet(t *testing.T) {
	want := map[string]bool{"h:a": true, "h:b": true, "h:c": true, "h:d": true}
	ok := `{"results":[
		{"id":"h:a","docs":[{"ok":{"_id":"h:a","_rev":"1-x","type":"leaf","data":"A"}}]},
		{"id":"h:b","docs":[{"error":{"id":"h:b","error":"not_found","reason":"missing"}}]},
		{"id":"h:c","docs":[{"ok":{"_id":"h:c","_rev":"2-y","_deleted":true}}]},
		{"id":"h:d","docs":[]}]}`
	got, err := parseBulkGet(json.RawMessage(ok), want)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["h:a"] != (engine.Chunk{ID: "h:a", Data: "A"}) {
		t.Fatalf("found %v", got)
	}
	for name, body := range map[string]string{
		"not json":       `{"results":`,
		"not asked for":  `{"results":[{"id":"h:z","docs":[]}]}`,
		"another id":     `{"results":[{"id":"h:a","docs":[{"ok":{"_id":"h:b","type":"leaf","data":"B"}}]}]}`,
		"not a leaf":     `{"results":[{"id":"h:a","docs":[{"ok":{"_id":"h:a","type":"plain","children":[]}}]}]}`,
		"still sealed":   `{"results":[{"id":"h:a","docs":[{"ok":{"_id":"h:a","type":"leaf","data":"%xyz","e_":true}}]}]}`,
		"data not text":  `{"results":[{"id":"h:a","docs":[{"ok":{"_id":"h:a","type":"leaf","data":7}}]}]}`,
		"doc not object": `{"results":[{"id":"h:a","docs":[{"ok":[1]}]}]}`,
	} {
		if _, err := parseBulkGet(json.RawMessage(body), want); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !errors.Is(err, engine.ErrMalformed) && !errors.Is(err, engine.ErrDecrypt) {
			t.Errorf("%s: %v, want a malformed answer", name, err)
		}
	}
}
