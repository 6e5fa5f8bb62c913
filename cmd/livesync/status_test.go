package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// status counts chunks by distinct id: a chunk two files share is one
// chunk held locally, and one chunk to fetch when both files wait for it.
func TestStatusCountsDistinctChunks(t *testing.T) {
	s := newSession(t)
	s.ok("same text\n", "put", "a.md")
	s.ok("same text\n", "put", "b.md")
	st := s.openStore()
	for _, doc := range []string{
		`{"_id":"held1.md","path":"held1.md","children":["h:shared","h:only1"],"size":6,"type":"plain","ctime":1,"mtime":1,"eden":{}}`,
		`{"_id":"held2.md","path":"held2.md","children":["h:shared","h:only2","h:shared"],"size":6,"type":"plain","ctime":1,"mtime":1,"eden":{}}`,
	} {
		if _, err := st.Put(context.Background(), json.RawMessage(doc)); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	out := s.ok("", "status")
	if !strings.Contains(out, "2 files wait for 3 chunks") || !strings.Contains(out, "4 files, 0 deleted files, 1 chunks") {
		t.Errorf("status:\n%s\nwant 2 files waiting for 3 distinct chunks, and the shared local chunk counted once", out)
	}
	var got struct {
		HeldFiles     int `json:"held_files"`
		MissingChunks int `json:"missing_chunks"`
		Chunks        int `json:"chunks"`
	}
	if err := json.Unmarshal([]byte(s.ok("", "status", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if got.HeldFiles != 2 || got.MissingChunks != 3 || got.Chunks != 1 {
		t.Errorf("status --json: %+v, want 2 held files, 3 missing chunks, 1 chunk", got)
	}
}
