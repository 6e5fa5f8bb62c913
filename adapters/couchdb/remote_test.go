package couchdb

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
)

func TestSplitURL(t *testing.T) {
	for _, tc := range []struct{ in, server, db string }{
		{"http://u:p@127.0.0.1:5984/vault", "http://127.0.0.1:5984", "vault"},
		{"https://h/couch/db/", "https://h/couch", "db"},
	} {
		s, d, err := SplitURL(tc.in)
		if err != nil || s != tc.server || d != tc.db {
			t.Errorf("SplitURL(%q) = %q, %q, %v; want %q, %q", tc.in, s, d, err, tc.server, tc.db)
		}
	}
	r, err := NewRemote(Config{URL: "http://127.0.0.1:5984", Database: "vault"}, RemoteOptions{})
	if err != nil || r.ID() != "http://127.0.0.1:5984/vault" {
		t.Fatalf("NewRemote: %v, id %q", err, r.ID())
	}
}

type bulkRecorder struct {
	engine.Endpoint
	calls [][]string
}

func (b *bulkRecorder) BulkDocs(_ context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	var ids []string
	var out []engine.BulkDocResult
	for _, d := range docs {
		ids = append(ids, rawDocID(d))
		out = append(out, engine.BulkDocResult{ID: rawDocID(d)})
	}
	b.calls = append(b.calls, ids)
	return out, nil
}

func TestChunksFirst(t *testing.T) {
	rec := &bulkRecorder{}
	docs := []json.RawMessage{json.RawMessage(`{"_id":"note.md"}`), json.RawMessage(`{"_id":"h:abc"}`)}
	res, err := ChunksFirst(rec).BulkDocs(context.Background(), docs)
	if err != nil || len(res) != 2 || len(rec.calls) != 2 || rec.calls[0][0] != "h:abc" || rec.calls[1][0] != "note.md" {
		t.Fatalf("calls %v, %v: want the chunk first, alone", rec.calls, err)
	}
}
